"""The compaction audit in the lab: "What this summary dropped" on the Tree (a band selected), in the
Compaction lab (each overlay, and the proposed summary before it is accepted) and on the Audit page
(every compaction of the store, worst first), for a session imported from a compacted Claude Code
transcript."""
import pytest
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store
from memorylab.display.treeview import SessionTree
from memorylab.display.viz import tree_figure, tree_layout_figure
from memorylab.importers import import_source
from tests.helpers import ROOT, run_app_page

COMPACTED = ROOT / "tests" / "data" / "claude_code" / "compacted.jsonl"
LOST_IN_OVERLAY_2 = {"httpkit/client.py", "3 times", "CHANGELOG.md"}


@pytest.fixture
def compacted_db(sample_lab_db):
    """The samples and the Claude Code session with two compactions; returns (path, its ref)."""
    with Store(sample_lab_db) as store:
        import_source(store, COMPACTED)
        (row,) = store.sessions.list(agent_id="claude-code")
    return sample_lab_db, (row["tenant_id"], row["agent_id"], row["session_id"])


def texts(app):
    return {element.value for element in app.text}


def headings(app):
    return [m.value for m in app.markdown if m.value.startswith("####")]


def test_a_band_selected_on_the_tree_shows_what_its_summary_dropped(compacted_db):
    _, ref = compacted_db
    app = run_app_page("app_pages/tree.py", session_ref=ref)
    band = app.selectbox(key="tree_band")
    assert band.value is None and not headings(app)  # nothing selected: no audit drawn
    band.select(2).run()
    assert not app.exception, [e.message for e in app.exception]
    assert headings(app) == ["#### What this summary dropped"]
    assert LOST_IN_OVERLAY_2 <= texts(app)
    assert any("kept 1 of 4 artifacts" in c.value for c in app.caption)
    app.selectbox(key="tree_band").select(1).run()
    assert not LOST_IN_OVERLAY_2 & texts(app)
    assert any("all 2 artifacts" in s.value for s in app.success)


def test_a_band_on_the_tree_chart_names_its_overlay_for_a_click(compacted_db):
    path, ref = compacted_db
    with Store(path) as store:
        figure = tree_figure(Session.open(store, ref[2], agent_id=ref[1]))
    labels = [trace for trace in figure.data if trace.mode == "text" and trace.customdata is not None]
    # Claude Code's second compaction covers the first (its span starts with summary 1): one band drawn,
    # and summary 1 is picked in the band box.
    assert [trace.customdata[0] for trace in labels] == ["compaction_2"]


def test_a_lost_artifact_opens_its_message_on_the_tree(compacted_db):
    path, ref = compacted_db
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.session_state["session_ref"] = ref
    app.session_state["tree_overlay"] = 2
    app.run()
    app.switch_page("app_pages/tree.py").run()
    lost = [b for b in app.button if b.help and "Show message" in b.help]
    assert len(lost) == 1  # CHANGELOG.md; the other two were stated by summary 1
    message_id = lost[0].help.split()[2]
    lost[0].click().run()
    assert not app.exception, [e.message for e in app.exception]
    with Store(path) as store:
        session = Session.open(store, ref[2], agent_id=ref[1])
        assert app.session_state["leaf_id"] == session.get_leaf_for(message_id)
        text = " ".join(session.get_message(message_id)["parts"][0]["text"].split())
    assert app.session_state["tree_message"] == message_id
    assert app.title[0].value == "Tree"
    assert any(message_id in m.value for m in app.markdown)  # the opened message, named above the chart
    assert any(text[:40] in t for t in texts(app))
    [b for b in app.button if b.label == "Show summary 1"][0].click().run()
    assert app.session_state["tree_band"] == 1 and app.session_state["tree_message"] is None
    assert headings(app) == ["#### What this summary dropped"]


def test_each_overlay_in_the_compaction_lab_shows_what_it_dropped(compacted_db):
    _, ref = compacted_db
    app = run_app_page("app_pages/compaction_lab.py", session_ref=ref)
    dropped = [e for e in app.expander if e.label.startswith("What this summary dropped")]
    assert [e.label for e in dropped] == ["What this summary dropped: 3 of 4 artifacts",
                                          "What this summary dropped: nothing (kept all 2 artifacts)"]
    assert LOST_IN_OVERLAY_2 <= {t.value for t in dropped[0].text}


def test_a_long_sessions_overlays_are_audited_when_asked(sample_lab_db):
    from memorylab.importers import SourceMessage, SourceSession, write_sessions

    length = 2001  # over the Compaction lab's AUDIT_ON_RENDER_MESSAGES
    messages = [SourceMessage({"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                               "parts": [{"type": "text", "text": f"Step {i}: see deploy/step_{i}.sh"}]},
                              parent_id=f"m{i - 1}" if i else None) for i in range(length)]
    with Store(sample_lab_db) as store:
        write_sessions(store, [SourceSession("long", messages)], source="test", format_name="test", agent_id="bench",
                       tenant_id="default")
        Session.open(store, "long", agent_id="bench").add_compaction("Steps were run.", "m0", "m20")
    app = run_app_page("app_pages/compaction_lab.py", session_ref=("default", "bench", "long"))
    assert not [e for e in app.expander if e.label.startswith("What this summary dropped")]
    (button,) = [b for b in app.button if b.label == "Audit these summaries"]
    button.click()
    app.run()
    assert not app.exception
    (dropped,) = [e for e in app.expander if e.label.startswith("What this summary dropped")]
    assert dropped.label == "What this summary dropped: 21 of 21 artifacts"


def test_the_proposed_summary_is_audited_before_it_is_accepted(sample_lab_db):
    ref = ("default", "project-assistant", "long-migration-project")
    app = run_app_page("app_pages/compaction_lab.py", session_ref=ref,
              completion_kwargs={"mock_response": "## Topic\nMigration."})
    [b for b in app.button if b.label == "Run the summarizer"][0].click().run()
    assert not app.exception, [e.message for e in app.exception]
    assert "#### What this summary would drop" in headings(app)
    lost = texts(app)
    assert lost, "a two-word summary of a long span loses what the span stated"
    dropped = sorted(lost)[0]
    [t for t in app.text_area if t.key == "proposal_text"][0].set_value(f"## Topic\nMigration. {dropped}").run()
    assert dropped not in texts(app)  # the edited summary keeps it: audited again before accepting
    with Store(sample_lab_db) as store:
        assert Session.open(store, ref[2], agent_id=ref[1]).get_compactions() == []


def test_the_audit_page_shows_every_compaction_worst_first(compacted_db):
    _, ref = compacted_db
    app = run_app_page("app_pages/audit.py")
    assert app.title[0].value == "Audit"
    table = app.dataframe[0].value
    assert list(table["overlay_id"]) == [2, 1] and list(table["lost"]) == [3, 0]
    assert app.get("plotly_chart"), "retention per kind is drawn"
    assert "#### What this summary dropped" in headings(app)  # the worst, until another is selected
    assert LOST_IN_OVERLAY_2 <= texts(app)
    app.session_state["audit_table"] = {"selection": {"rows": [1], "columns": []}}
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert not LOST_IN_OVERLAY_2 & texts(app)
    assert any("all 2 artifacts" in s.value for s in app.success)
    app.button(key="audit_open_band").click().run()
    assert not app.exception and app.session_state["tree_overlay"] == 1  # the Tree picks it up when opened


def test_the_audit_page_of_a_store_without_compactions_says_how_to_make_one(sample_lab_db):
    app = run_app_page("app_pages/audit.py")
    (info,) = app.info
    assert "Compaction lab" in info.value and "memorylab" in info.value and "import" in info.value
    assert not app.dataframe


def test_the_opened_message_is_ringed_and_a_click_on_the_ring_selects_it(compacted_db):
    path, ref = compacted_db
    with Store(path) as store:
        session = Session.open(store, ref[2], agent_id=ref[1])
        message_id = session.get_history(apply_compactions=False)[3]["id"]
        figure = tree_figure(session)
        layout = SessionTree.of(session).layout(session.get_compactions())
    ringed = tree_layout_figure(layout, opened=message_id)
    (ring,) = [trace for trace in ringed.data if trace.name == "opened message"]
    assert list(ring.customdata) == [message_id] and (ring.x[0], ring.y[0]) == (layout.nodes[message_id].x,
                                                                                layout.nodes[message_id].y)
    assert not [trace for trace in figure.data if trace.name == "opened message"]
