"""The engine in Jupyter: rich reprs, ``to_dataframe`` and ``compaction_figure`` on a real store.
(tests/slow/test_tour_notebook.py executes the tour notebook itself.)"""
import subprocess
import sys

import pytest

from memorylab import KVStore, Session, StaticProvider, plan_compaction
from memorylab.display.frames import (
    KV_COLUMNS,
    MESSAGE_COLUMNS,
    PLAN_COLUMNS,
    RECORD_COLUMNS,
    SESSION_COLUMNS,
    to_dataframe,
)
from memorylab.display.notebook import SystemPrompt, show_prompt, show_table
from memorylab.display.viz import compaction_figure
from memorylab.memory.longterm import LongTermMemory
from tests.helpers import ROOT, TableCells, text_message

TOUR = ROOT / "examples" / "memorylab_tour.ipynb"
SCRIPT = "<script>alert('x')</script>"


def chat_of(store, count=8, session_id="chat"):
    session = Session.create(store, session_id, metadata={"title": f"Support {SCRIPT}"})
    for index in range(1, count + 1):
        role = "user" if index % 2 else "assistant"
        session.append_message(text_message(f"m{index}", f"message {index} {SCRIPT if index == 4 else ''}", role))
    return session


# -- reprs ------------------------------------------------------------------------------------------

def test_session_summary_escapes_what_users_wrote(store):
    session = chat_of(store).with_context("soul", description=f"Identity {SCRIPT}",
                                          provider=StaticProvider(SCRIPT))
    session.with_context("memory", max_tokens=100)
    markup = session._repr_html_()
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    rows = TableCells(markup).rows
    assert rows[0] == ["messages", "branches", "overlays", "latest path (messages)", "latest path tokens",
                       "history tokens (overlays applied)"]
    assert rows[1][:4] == ["8", "1", "0", "8"]
    assert ["soul", f"Identity {SCRIPT}", "readonly"] == rows[3][:3]
    assert rows[4][0] == "memory" and rows[4][4] == "100 (0% used)"


def test_plan_table_counts_and_its_prompt_are_escaped(store):
    plan = plan_compaction(chat_of(store).get_history(), protect_head=2, tail_token_budget=0)
    markup = plan._repr_html_()
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    assert TableCells(markup).rows == [
        ["part", "messages", "span", "tokens"],
        ["head (kept)", "2", "m1 … m2", str(plan.head_tokens)],
        ["middle (summarized)", "4", "m3 … m6", str(plan.middle_tokens)],
        ["tail (kept)", "2", "m7 … m8", str(plan.tail_tokens)],
    ]


def test_show_prompt_is_the_frozen_string_shown_preformatted(store):
    session = chat_of(store).with_context("soul", provider=StaticProvider(f"Be brief. {SCRIPT}"))
    prompt = show_prompt(session)
    frozen = session.freeze_system_prompt()
    assert type(frozen) is str and isinstance(prompt, SystemPrompt) and prompt == frozen
    markup = prompt._repr_html_()
    assert markup.startswith("<pre") and "<script>" not in markup and "Be brief. &lt;script&gt;" in markup
    assert show_prompt(session, frozen=False) == session.render_system_prompt()


def test_show_table_lays_out_rows_and_nested_diagnostics():
    rows = TableCells(show_table([{"fact": SCRIPT, "kept": True}, {"fact": "B-1093", "missing": ["b-1093"]}],
                                 caption="facts")._repr_html_()).rows
    assert rows == [["fact", "kept", "missing"], [SCRIPT, "True", ""], ["B-1093", "", '["b-1093"]']]
    diagnostics = {"step": "prepare_request", "elapsed_ms": 1.5,
                   "scopes": {"GLOBAL_MEMORY": {"included": True, "ranked": [2, 1]}},
                   "events": [{"code": "memory_rerank_skipped", "reason": "no_reranker"}]}
    markup = show_table(diagnostics)._repr_html_()
    assert TableCells(markup).rows == [
        ["field", "value"], ["step", "prepare_request"], ["elapsed_ms", "1.5"],
        ["scopes", "included", "ranked"], ["GLOBAL_MEMORY", "True", "[2,1]"],
        ["code", "reason"], ["memory_rerank_skipped", "no_reranker"],
    ]


# -- to_dataframe -------------------------------------------------------------------------------------

def test_history_frame_has_a_row_per_message_with_tools_and_summaries(store):
    session = chat_of(store)
    session.append_message({"id": "t1", "role": "assistant", "parts": [
        {"type": "tool-search", "toolCallId": "c1", "toolName": "search", "input": {"q": "x"},
         "output": "found", "state": "output-available"}]})
    session.add_compaction("the middle", "m3", "m6")
    frame = to_dataframe(session.get_history())
    assert list(frame.columns) == MESSAGE_COLUMNS and len(frame) == 9 - 4 + 1
    assert frame.loc[frame["id"] == "t1", "tools"].item() == "search"
    assert frame["is_summary"].sum() == 1 and str(frame["created_at"].dtype).startswith("datetime64")
    assert len(to_dataframe(session.get_all_messages())) == 9


def test_sessions_frame_from_a_store_or_its_rows(store):
    chat_of(store, 4, "one")
    chat_of(store, 2, "two")
    frame = to_dataframe(store)
    assert list(frame.columns) == SESSION_COLUMNS and len(frame) == 2
    assert dict(zip(frame["session_id"], frame["message_count"])) == {"one": 4, "two": 2}
    assert set(frame["title"]) == {f"Support {SCRIPT}"}
    assert to_dataframe(store.sessions.list()).equals(frame)


def test_kv_frame_holds_every_live_entry_across_pages(store, monkeypatch):
    now = [1_000_000.0]
    kv = KVStore(store, namespace="carts", clock=lambda: now[0])
    kv.set("cart:a", {"items": [1, 2]})
    kv.set("cart:b", None)
    kv.set("flag", True, ttl=60)
    kv.set("gone", 1, ttl=1)
    now[0] += 10
    monkeypatch.setattr("memorylab.display.frames.MAX_PAGE_SIZE", 2)
    frame = to_dataframe(kv)
    assert list(frame.columns) == KV_COLUMNS and list(frame["key"]) == ["cart:a", "cart:b", "flag"]
    assert frame["value"].tolist() == [{"items": [1, 2]}, None, True]
    assert frame["expires_at"].notna().tolist() == [False, False, True]


def test_plan_frame_gives_each_message_its_fate(store):
    plan = plan_compaction(chat_of(store).get_history(), protect_head=2, tail_token_budget=0)
    frame = to_dataframe(plan)
    assert list(frame.columns) == PLAN_COLUMNS
    assert frame["fate"].value_counts().to_dict() == {"summarized": 4, "head": 2, "tail": 2}


def test_long_term_frame_lists_records_with_provenance(store):
    chat_of(store)
    long_term = LongTermMemory(store, workspace="lab", extractor=lambda turn: {"memories": [
        {"scope": "GLOBAL", "summary": "prefers email"}, {"scope": "SESSION", "summary": "order A-1"}]})
    assert list(to_dataframe(long_term).columns) == RECORD_COLUMNS and to_dataframe(long_term).empty
    long_term.after_turn("chat", "message 1 ", "message 2 ")
    frame = to_dataframe(long_term)
    assert len(frame) == 2 and set(frame["scope"]) == {"GLOBAL_MEMORY", "SESSION_MEMORY"}
    assert frame["provenance"].map(lambda p: p["message_ids"]).tolist() == [["m1", "m2"]] * 2
    assert len(to_dataframe(long_term.records(scope="GLOBAL"))) == 1


def test_other_rows_keep_their_keys_and_other_objects_are_refused():
    assert list(to_dataframe([{"fact": "x", "kept": False}]).columns) == ["fact", "kept"]
    assert to_dataframe([]).empty
    with pytest.raises(TypeError, match="to_dataframe takes"):
        to_dataframe("history")


def test_pandas_is_imported_only_when_a_frame_is_made():
    code = "import sys, memorylab, memorylab.display.frames, memorylab.display.notebook; print('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_compaction_figure_stacks_the_branch_before_and_after(store):
    plan = plan_compaction(chat_of(store).get_history(), protect_head=2, tail_token_budget=0)
    figure = compaction_figure(plan)
    totals = {}
    for trace in figure.data:
        for bar, tokens in zip(trace.y, trace.x):
            totals[bar] = totals.get(bar, 0) + tokens
    assert totals == {"before": plan.tokens_before, "after": plan.tokens_after}
    assert [trace.name for trace in figure.data][1] == "summarized (4 msgs, m3 … m6)"
