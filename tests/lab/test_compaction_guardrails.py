"""Guardrails in the Compaction lab: a proposed summary shows its tokens against its span's and is
flagged when it keeps nothing; Accept and Undo ask first; an undone summary can be restored; the
overlay history is a table."""
import pytest
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store
from tests.helpers import ROOT, confirm_in_dialog

REF = ("default", "project-assistant", "long-migration-project")


@pytest.fixture
def lab_db(sample_lab_db):
    return sample_lab_db


def proposed(summary):
    """The Compaction lab on the long sample session with ``summary`` proposed by the (mocked) model."""
    app = AppTest.from_file(str(ROOT / "app_pages" / "compaction_lab.py"), default_timeout=60)
    app.session_state["session_ref"] = REF
    app.session_state["completion_kwargs"] = {"mock_response": summary}
    app.run()
    app.number_input(key="main_tail").set_value(1000).run()
    [b for b in app.button if b.label == "Run the summarizer"][0].click().run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def overlays(lab_db):
    with Store(lab_db) as store:
        return Session.open(store, REF[2], agent_id=REF[1]).get_compactions()


def test_a_summary_that_says_nothing_is_flagged_and_accepted_only_when_acknowledged(lab_db):
    app = proposed("I'm ready to help")
    metrics = {metric.label: metric.value for metric in app.metric}
    summary_tokens, span_tokens = (int(metrics[label].split()[0].replace(",", ""))
                                   for label in ("Proposed summary", "Span it replaces"))
    assert summary_tokens < 32 < 1000 < span_tokens
    kept, whole = (int(n) for n in metrics["Artifacts kept"].split(" (")[0].split(" of "))
    assert kept < whole
    flags = [error.value for error in app.error]
    assert any(flag.startswith(f"It is {summary_tokens} tokens standing in for") for flag in flags)
    assert f"It states none of the {whole} artifacts of its span itself; only the head, the tail or a pin still " \
           "holds the ones kept." in flags

    app.button(key="accept_summary").click().run()
    assert overlays(lab_db) == []  # asked first
    assert app.button(key="accept_summary:confirm").disabled  # and flagged: acknowledged first
    app.button(key="accept_summary:cancel").click().run()
    assert overlays(lab_db) == [] and not any(b.key == "accept_summary:confirm" for b in app.button)

    app.button(key="accept_summary").click().run()
    confirm_in_dialog(app, "accept_summary")
    assert [overlay["summary"] for overlay in overlays(lab_db)] == ["I'm ready to help"]


def test_undo_asks_first_and_the_removed_summary_can_be_restored(lab_db):
    app = proposed("## Topic\nThe MySQL 5.7 to PostgreSQL 16 migration, decided and dry-run.")
    app.button(key="accept_summary").click().run()
    confirm_in_dialog(app, "accept_summary")
    (overlay,) = overlays(lab_db)
    table = app.dataframe[0].value
    assert list(table["overlay"]) == [overlay["id"]] and list(table["state"]) == ["on this branch"]
    assert table["tokens_before"][0] == overlay["metadata"]["tokens_before"]
    assert not any("{'tokens_before'" in caption.value for caption in app.caption)  # a table, not a raw dict

    app.button(key=f"undo_{overlay['id']}").click().run()
    assert len(overlays(lab_db)) == 1  # asked first
    confirm_in_dialog(app, f"undo_{overlay['id']}")
    assert overlays(lab_db) == []
    assert "#### Removed summaries" in [m.value for m in app.markdown]
    assert list(app.dataframe[-1].value["state"]) == ["removed"]

    app.button(key="restore_0").click().run()
    (restored,) = overlays(lab_db)
    assert restored["summary"] == overlay["summary"] and restored["metadata"]["restored_from"] == overlay["id"]
    assert "#### Removed summaries" not in [m.value for m in app.markdown]
