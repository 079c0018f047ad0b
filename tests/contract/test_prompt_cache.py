"""Prompt-cache cost per turn: a scripted conversation through ChatRunner (litellm's mock_response)
whose cached prefixes, lost tokens and causes are computed here by hand, message by message."""
import json
import warnings

import pytest
from streamlit.testing.v1 import AppTest

from memorylab import LongTermMemory, Session, StaticProvider, Store, prompt_cache_report
from memorylab.display.viz import prompt_cache_figure
from memorylab.history.truncation import truncate_older_messages
from memorylab.llm.chat import ChatRunner
from memorylab.llm.prompt_cache import PROMPT_CACHE_KEY, dollars, turn_cache_caption
from memorylab.tokens import estimate_message_tokens, estimate_string_tokens
from tests.helpers import ROOT

ANSWER = "a" * 40  # every mocked answer: 10 tokens of text + 4 of message overhead
MOCK_COMPLETION_TOKENS = 20  # what litellm's mock_response reports as the completion


def ask(tokens):
    """A one-word user text of exactly ``tokens`` estimated tokens (4 characters a token)."""
    return "q" * (4 * tokens)


def system_tokens(session):
    """The first element: the frozen system prompt as one message (none when empty), plus the tool schemas."""
    prompt = session.freeze_system_prompt()
    return ((4 + estimate_string_tokens(prompt) if prompt else 0)
            + sum(estimate_string_tokens(json.dumps(schema)) for schema in session.openai_tools()))


@pytest.fixture
def chat(store):
    return (Session.create(store, "cache")
            .with_context("soul", provider=StaticProvider("You are Mira, a concise assistant."))
            .with_context("memory", description="Facts about the user", max_tokens=200))


def runner_for(session, **settings):
    return ChatRunner(session, model="gpt-4o-mini", mock_response=ANSWER, **settings)


def numbers(row):
    return row["request_tokens"], row["cached_tokens"], row["uncached_tokens"], row["lost_tokens"], row["cause"]


def test_a_scripted_conversation_matches_the_prefixes_computed_by_hand(chat, litellm):
    runner = runner_for(chat)
    S = system_tokens(chat)
    a1 = runner.send(ask(5))  # u1: 9 tokens
    a2 = runner.send(ask(6))  # u2: 10
    regenerated = runner.regenerate(a2["id"])  # a sibling of a2: the branch goes on from it
    chat.replace_context_block("memory", "The user likes green tea.")
    chat.refresh_system_prompt()
    S2 = system_tokens(chat)
    assert S2 != S
    a3 = runner.send(ask(7))  # u3: 11
    # An imported exchange (not sent by ChatRunner): a tool call with a 2,000-character output.
    chat.append_message({"role": "user", "parts": [{"type": "text", "text": ask(4)}]})  # ut: 8
    imported = chat.append_message({"role": "assistant", "parts": [
        {"type": "tool-lookup", "toolCallId": "call_1", "toolName": "lookup", "input": {},
         "output": "y" * 2000, "state": "output-available"}]})
    T = imported["tokens"]
    T_cut = estimate_message_tokens(truncate_older_messages([chat.get_message(imported["id"])], keep_recent=0)[0])
    assert T_cut < T
    a4 = runner.send(ask(8))  # u4: 12; the tool output is among the four newest messages: sent whole
    a5 = runner.send(ask(9))  # u5: 13; still among them
    a6 = runner.send(ask(10))  # u6: 14; now older than the four newest: micro-compacted
    path = chat.get_history(a6["id"])
    chat.add_compaction("s" * 40, path[0]["id"], regenerated["id"])  # summary: 14 tokens for u1 .. a2'
    a7 = runner.send(ask(11))  # u7: 15
    u3 = chat.get_message(a3["parent_id"])
    chat.update_message({**u3, "parts": [{"type": "text", "text": ask(3)}]})  # u3: 11 -> 7 tokens, in place
    a8 = runner.send(ask(12))  # u8: 16

    rows = prompt_cache_report(chat, a8["id"]).rows
    assert [row["message_id"] for row in rows] == [a1["id"], regenerated["id"], a3["id"], imported["id"], a4["id"],
                                                   a5["id"], a6["id"], a7["id"], a8["id"]]
    r1 = S + 9
    r2 = S + 9 + 14 + 10
    r3 = S2 + 9 + 14 + 10 + 14 + 11
    r4 = r3 + 14 + 8 + T + 12  # + a3, ut, the tool output, u4
    r5 = r4 + 14 + 13
    r6 = r5 - T + T_cut + 14 + 14  # the tool output cut, + a5, u6
    shared_6 = S2 + 9 + 14 + 10 + 14 + 11 + 14 + 8  # up to the tool output
    r7 = S2 + 14 + (r6 - S2 - 9 - 14 - 10 - 14) + 14 + 15  # the summary for u1 .. a2', + a6, u7
    r8 = r7 - 11 + 7 + 14 + 16  # u3 edited, + a7, u8
    assert [numbers(row) for i, row in enumerate(rows) if i != 3] == [
        (r1, 0, r1, 0, None),
        (r2, S + 9, 24, 0, None),  # the regenerated answer's request follows a1's, not its sibling's
        (r3, 0, r3, r2, "block write"),
        (r4, r3, r4 - r3, 0, None),  # the imported turn in between is skipped: a3's request came before
        (r5, r4, 27, 0, None),
        (r6, shared_6, r6 - shared_6, r5 - shared_6, "micro-compaction"),
        (r7, S2, r7 - S2, r6 - S2, "compaction"),
        (r8, S2 + 14, r8 - S2 - 14, r7 - S2 - 14, "edit"),
    ]
    assert not rows[3]["recorded"] and rows[3]["request_tokens"] is None
    assert turn_cache_caption(rows[3]) == "cache: not recorded (ChatRunner did not send this turn)"

    chart = prompt_cache_figure(rows)
    lost = {trace.name: [-y if y else 0 for y in trace.y] for trace in chart.data if trace.name.startswith("lost")}
    assert lost == {f"lost to {row['cause']}": [r["lost_tokens"] if r["cause"] == row["cause"] else 0 for r in rows]
                    for row in rows if row["lost_tokens"]}

    sibling = prompt_cache_report(chat, a2["id"]).rows
    assert [numbers(row) for row in sibling] == [(r1, 0, r1, 0, None), (r2, S + 9, 24, 0, None)]


def test_costs_come_from_the_cost_map_with_and_without_caching(chat, litellm):
    runner = runner_for(chat)
    S = system_tokens(chat)
    runner.send(ask(5))
    second = runner.send(ask(6))
    price = litellm.model_cost["gpt-4o-mini"]
    output = MOCK_COMPLETION_TOKENS * price["output_cost_per_token"]
    report = prompt_cache_report(chat)
    row = report.by_message_id()[second["id"]]
    request, cached = S + 33, S + 9
    assert row["cost_uncached"] == pytest.approx(request * price["input_cost_per_token"] + output)
    assert row["cost_cached"] == pytest.approx(cached * price["cache_read_input_token_cost"]
                                               + 24 * price["input_cost_per_token"]
                                               + output)
    assert row["output_tokens"] == MOCK_COMPLETION_TOKENS and report.notes == []
    totals = report.totals()
    assert totals["cached_input_tokens"] == cached and totals["input_tokens"] == S + 9 + request
    assert totals["cost_cached"] == pytest.approx(sum(r["cost_cached"] for r in report.rows))
    frame = report.frame()
    assert list(frame["cached_tokens"]) == [0, cached] and list(frame["cause"]) == [None, None]
    caption = turn_cache_caption(row)
    assert caption.startswith(f"cache: {cached:,} of {request:,} tokens a cached prefix ({cached / request:.0%})")
    assert "uncached" in caption.split(" · ")[-1]


def test_a_model_without_prices_gets_no_costs_and_the_report_says_so(chat, litellm):
    ChatRunner(chat, model="openai/an-unpriced-fine-tune", mock_response=ANSWER).send(ask(5))
    report = prompt_cache_report(chat)
    assert report.rows[0]["cost_cached"] is None and report.totals()["cost_cached"] is None
    assert report.notes == ["litellm's cost map has no prices for 'openai/an-unpriced-fine-tune': its turns have "
                            "no costs."]
    priced = prompt_cache_report(chat, model="gpt-4o-mini")  # priced as another model instead
    assert priced.rows[0]["cost_cached"] > 0 and priced.notes == []


def test_later_tool_rounds_are_cached_up_to_the_round_before(chat, litellm):
    write = {"id": "call_w", "type": "function",
             "function": {"name": "set_context", "arguments": json.dumps({"label": "memory", "content": "tea"})}}
    runner = runner_for(chat, mock_tool_calls=[write], max_tool_rounds=1)
    S = system_tokens(chat)
    answer = runner.send(ask(5))  # round 1 runs the write; round 2 asks again and is refused
    first_round = {"role": "assistant", "parts": answer["parts"][:2]}  # its text and the write
    second_request = S + 9 + estimate_message_tokens(first_round)
    assert answer["metadata"][PROMPT_CACHE_KEY]["rounds"] == [second_request]
    row = prompt_cache_report(chat).rows[0]
    assert (row["tool_rounds"], row["input_tokens"], row["cached_input_tokens"]) == (
        1, S + 9 + second_request, S + 9)
    assert (row["request_tokens"], row["cached_tokens"]) == (S + 9, 0)  # the turn's first request


def test_new_memories_and_a_sliding_history_window_are_named(chat, litellm):
    memory = LongTermMemory(chat.store, workspace="cache")
    memory.add_record("The customer prefers green tea")
    runner = runner_for(chat, long_term=memory)
    runner.send("Which tea do I like?")
    memory.add_record("The customer lives in Lisbon")  # recalled from the next turn on
    runner.send("And where do I live?")
    rows = prompt_cache_report(chat).rows
    assert rows[1]["cause"] == "memories" and rows[1]["cached_tokens"] == system_tokens(chat)

    windowed = Session.create(chat.store, "windowed")
    runner = runner_for(windowed, history_window=3)
    answers = [runner.send(ask(5 + n)) for n in range(3)]
    rows = prompt_cache_report(windowed).rows
    assert [row["cause"] for row in rows] == [None, None, "history window"]
    assert rows[2]["cached_tokens"] == system_tokens(windowed)  # the first message left the window
    assert rows[2]["lost_tokens"] == rows[1]["request_tokens"] - system_tokens(windowed)
    assert answers[-1]["metadata"][PROMPT_CACHE_KEY]["from"] == 1


def test_the_provider_reported_cached_tokens_are_kept_beside_the_estimate(chat, litellm):
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 300, "completion_tokens": 5, "total_tokens": 305,
                       "prompt_tokens_details": {"cached_tokens": 256}}}
    answer = ChatRunner(chat, model="gpt-4o-mini", mock_response=reply).send(ask(5))
    assert answer["metadata"]["usage"]["cached_tokens"] == 256
    row = prompt_cache_report(chat).rows[0]
    assert (row["provider_prompt_tokens"], row["provider_cached_tokens"]) == (300, 256)
    assert "provider: 256 cached" in turn_cache_caption(row)


def test_storage_grows_with_what_changed_not_with_the_history(store, litellm):
    session = Session.create(store, "long")
    runner = runner_for(session)
    answers = [runner.send(ask(5)) for _ in range(200)]
    records = [answer["metadata"][PROMPT_CACHE_KEY] for answer in answers]
    assert len(records[0]["elements"]) == 2  # the system prompt and the first user message
    # Every later turn appends the previous answer and its own user message, and stores only those.
    assert all(len(r["elements"]) == 2 and r["from"] == 2 * n for n, r in enumerate(records[1:], start=1))
    assert all(r["after"] == previous["id"] for r, previous in zip(records[1:], answers))
    rows = prompt_cache_report(session).rows
    assert all(row["cached_tokens"] == before["request_tokens"] and row["cause"] is None
               for row, before in zip(rows[1:], rows))
    assert rows[-1]["request_tokens"] == system_tokens(session) + 200 * 9 + 199 * 14


def test_the_report_reads_the_turns_metadata_and_not_the_messages_parts(chat, litellm):
    runner = runner_for(chat)
    for number in range(3):
        runner.send(ask(5 + number))
    before = prompt_cache_report(chat).rows
    user_ids = [m["id"] for m in chat.get_history() if m["role"] == "user"]
    with chat.store.transaction() as conn:  # parts the report has no use for, damaged behind the engine's back
        conn.execute(f"UPDATE messages SET parts = '[' WHERE id IN ({', '.join('?' * len(user_ids))})", user_ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a read of the parts would warn of each damaged message
        assert prompt_cache_report(chat).rows == before


def test_a_new_runner_rebuilds_the_previous_request_from_the_stored_segments(chat, litellm):
    streamed = runner_for(chat)
    assert "".join(streamed.stream(ask(5))) == ANSWER  # a streamed turn records like a sent one
    assert streamed.last_message["metadata"][PROMPT_CACHE_KEY]["from"] == 0
    runner_for(chat).send(ask(6))
    compacted = chat.get_history()
    chat.add_compaction("s" * 40, compacted[0]["id"], compacted[1]["id"])
    answer = runner_for(chat).send(ask(7))  # the turn before hides under the compaction: it still counts
    record = answer["metadata"][PROMPT_CACHE_KEY]
    assert record["after"] == compacted[3]["id"] and record["from"] == 1
    assert prompt_cache_report(chat).rows[-1]["cause"] == "compaction"


def test_the_context_window_page_shows_the_turns_of_the_branch(sample_lab_db, litellm):
    ref = ("default", "default", "cached-chat")
    with Store(sample_lab_db) as store:
        session = Session.create(store, ref[2])
        runner = runner_for(session)
        runner.send(ask(5))
        runner.send(ask(6))
        expected = prompt_cache_report(session).rows
        on_haiku = prompt_cache_report(session, model="claude-haiku-4-5").totals()
    app = AppTest.from_file(str(ROOT / "app_pages" / "context_window.py"), default_timeout=60)
    app.session_state["session_ref"] = ref
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert "Prompt cache, turn by turn" in [s.value for s in app.subheader]
    table = app.dataframe[1].value
    assert list(table["message_id"]) == [row["message_id"] for row in expected]
    assert list(table["cached_tokens"]) == [row["cached_tokens"] for row in expected]
    assert app.metric[3].label == "Input served from the cache"
    chart = json.loads(app.get("plotly_chart")[1].proto.spec)
    assert [trace["name"] for trace in chart["data"]] == ["cached prefix", "uncached"]
    assert chart["data"][0]["y"] == [row["cached_tokens"] for row in expected]

    [box for box in app.selectbox if box.label == "Price the turns as"][0].select("claude-haiku-4-5").run()
    assert app.metric[5].label == "Cost with caching" and app.metric[5].value == dollars(on_haiku["cost_cached"])
    assert on_haiku["cost_cached"] < on_haiku["cost_uncached"]

    app.session_state["session_ref"] = ("default", "support-bot", "support-order-4471")  # imported turns only
    app.run()
    assert any("chat on this branch to record requests" in info.value for info in app.info)
