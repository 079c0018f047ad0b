# Chat: talk to the agent on the active branch (regenerate, edit and fork, pin, switch between sibling
# branches), with what the model sees beside it, and the replay panel below.
#
# State: ``chat_ltm`` and ``chat_ltm_model`` (long-term memory toggles), ``chat_threshold``,
# ``chat_window_<session>_<leaf>`` (how many of the branch's newest messages are drawn),
# ``focus_message`` (a message another page opened, drawn back to), ``pending`` (a regeneration or edit
# asked for, run on the next rerun), ``last_request`` (the last request sent on the session) and the
# replay panel's (lab_ui/replay_panel.py).
import streamlit as st

from lab_ui.chat_messages import branch_switcher, render_parts, sibling_ids
from lab_ui.deep_links import stop_showing_view
from lab_ui.experiment_from_here import add_branch_button, add_probe_popover
from lab_ui.live import live_updates
from lab_ui.models import completion_settings
from lab_ui.selection import active_leaf, branch_history, branch_key, select_leaf
from lab_ui.session_context import lab_context_attached
from lab_ui.sidebar import setup_page
from memorylab import MemoryLabError
from memorylab.history.overlays import is_summary_message

store, session = setup_page("Chat")
if session is None:
    st.title("Chat")
    stop_showing_view()
live_updates(session)

from lab_ui.replay_panel import render_replay  # noqa: E402
from memorylab.llm.chat import ChatRunner, chat_errors  # noqa: E402  (after the page shows: it loads the model layer)
from memorylab.llm.prompt_cache import prompt_cache_report, turn_cache_caption  # noqa: E402
from memorylab.memory.longterm import LongTermMemory  # noqa: E402
from memorylab.samples import LONGTERM_WORKSPACE  # noqa: E402

SHOWN_MESSAGES = 50  # a branch's newest messages drawn at first; earlier ones load on request, as many again


def chat_runner(model):
    """The toggles for long-term memory (the lab's, so only with its sample context attached), and the
    runner they make; returns (runner, long-term memory)."""
    if not lab_context_attached(session):
        st.caption(f"Long-term memory: none recorded for this session. The lab's workspace `{LONGTERM_WORKSPACE}` "
                   "comes with the lab's sample context (the switch in the sidebar).")
    try:
        long_term = long_term_memory(model) if lab_context_attached(session) else None
        return ChatRunner(session, model=model, long_term=long_term, **completion_settings()), long_term
    except MemoryLabError as error:
        st.error(f"Cannot chat with these settings: {error}")
        stop_showing_view()


def long_term_memory(model):
    """The lab workspace's long-term memory as its toggles set it, or None."""
    use_long_term = st.toggle(f"Long-term memory (workspace `{LONGTERM_WORKSPACE}`)", value=True, key="chat_ltm",
                              help="Recall records before each turn; store what the model extracts after it.")
    model_steps = st.toggle("Extract, plan and rerank with the model", value=False, key="chat_ltm_model",
                            disabled=not use_long_term,
                            help="Off: recall by keywords only and extract nothing (fast, deterministic). "
                                 "The embedded model is too weak for these steps.")
    return LongTermMemory(store, workspace=LONGTERM_WORKSPACE, model=model if model_steps else None,
                          settings={"model_kwargs": completion_settings()}) if use_long_term else None


@st.cache_resource(max_entries=8, show_spinner=False)
def cache_rows(branch, _session, _leaf_id):
    """The prompt-cache report's rows of the recorded turns, each priced as the model that answered it,
    by assistant message id, once per branch version (the Context window page charts the same report)."""
    return {message_id: row for message_id, row in prompt_cache_report(_session, _leaf_id)
            .by_message_id().items() if row["recorded"]}


def toggle_pin(message_id, pinned):
    if pinned:
        session.unpin(message_id)
    else:
        session.pin(message_id)
    st.rerun()


def run_turn(make_stream):
    """Stream one assistant turn into the page, then make its message the active leaf."""
    with st.chat_message("assistant"):
        try:
            st.write_stream(make_stream())
        except MemoryLabError as error:
            st.error(str(error))
            return
    if runner.last_message is not None:
        select_leaf(runner.last_message["id"])
    st.session_state["last_request"] = {"session": session.session_id, "request": runner.last_request}
    st.rerun()


def shown_window(history):
    """The newest messages drawn (back to a message another page opened), and "Show earlier"."""
    window_key = f"chat_window_{session.session_id}_{leaf_id}"
    shown = st.session_state.get(window_key, SHOWN_MESSAGES)
    focus = st.session_state.pop("focus_message", None)  # opened from Search: draw back to that message
    position = next((i for i, m in enumerate(history) if m["id"] == focus), None)
    if position is not None:
        shown = st.session_state[window_key] = max(shown, len(history) - position)
    shown = min(shown, len(history))
    st.caption(f"Branch ending at `{leaf_id}` · {shown} of {len(history)} messages shown · model `{model}`")
    add_branch_button(session, leaf_id, "chat_add_case")
    if shown < len(history):
        earlier = min(SHOWN_MESSAGES, len(history) - shown)
        if st.button(f"Show {earlier} earlier messages", key="chat_earlier", icon="⬆️"):
            st.session_state[window_key] = shown + earlier
            st.rerun()
    return history[len(history) - shown:]


def render_message(message, pinned, cached, siblings):
    """One stored message with its actions in a row: regenerate (an answer), edit and fork (a question),
    pin, add a probe, and the switch between its sibling branches."""
    avatar = {"system": "⚙️", "tool": "🔧"}.get(message["role"])
    with st.chat_message(message["role"], avatar=avatar):
        if pinned:
            st.caption("📌 Pinned: compactions keep this message whole")
        render_parts(message)
        if message["id"] in cached:
            st.caption(turn_cache_caption(cached[message["id"]]))
        actions = st.container(horizontal=True, gap="small", vertical_alignment="center")
        if message["role"] == "assistant" and message["parent_id"]:
            if actions.button("Regenerate", key=f"regen_{message['id']}", icon=":material/refresh:",
                              help="Regenerate: a new sibling branch"):
                st.session_state["pending"] = ("regenerate", message["id"], None)
        if message["role"] == "user":
            # Its text box is drawn only while open: fifty of them would cost every rerun.
            editor = actions.popover("Edit", icon=":material/edit:", help="Edit: fork a new branch from here",
                                     key=f"edit_{message['id']}", on_change="rerun")
            if editor.open:
                with editor:
                    edited = st.text_area("Edited message",
                                          message["parts"][0].get("text", "") if message["parts"] else "",
                                          key=f"edit_text_{message['id']}")
                    if st.button("Fork and answer", key=f"fork_{message['id']}"):
                        st.session_state["pending"] = ("edit", message["id"], edited)
        if actions.button("Unpin" if pinned else "Pin", key=f"pin_{message['id']}", icon=":material/push_pin:",
                          type="primary" if pinned else "secondary",
                          help="Unpin: let compactions summarize it again" if pinned
                          else "Pin: compactions keep this message whole"):
            toggle_pin(message["id"], pinned)
        add_probe_popover(session, leaf_id, message, actions)
        branch_switcher(session, message, actions, siblings.get(message["parent_id"], ()))


def render_chat(history):
    st.title("Chat")
    # A long branch draws only its newest messages: Streamlit pays for every element on every rerun.
    window = shown_window(history)
    siblings = sibling_ids(branch_key(session, leaf_id), tuple(m["parent_id"] for m in window if m.get("parent_id")),
                           session)
    cached = cache_rows(branch_key(session, leaf_id), session, leaf_id)
    for message in window:
        if is_summary_message(message):
            with st.chat_message("assistant", avatar="🗜️"):
                covered = message["metadata"]["compaction"]["covered_messages"]
                st.caption(f"Summary standing in for {covered} earlier messages (originals kept)")
                render_parts(message)
        else:
            render_message(message, message["id"] in history.pinned_ids, cached, siblings)


def render_turn(prompt, turn_area):
    """The turn the input box (``prompt``) or a pending regeneration or edit streams into ``turn_area``,
    below the branch."""
    with turn_area:
        pending = st.session_state.pop("pending", None)
        if pending:
            action, message_id, text = pending
            if action == "regenerate":
                run_turn(lambda: runner.regenerate(message_id, stream=True))
            else:
                with st.chat_message("user"):
                    st.markdown(text)
                run_turn(lambda: runner.edit(message_id, text, stream=True))
        if prompt:
            with st.chat_message("user"):
                st.markdown(prompt)
            run_turn(lambda: runner.stream(prompt, leaf_id=leaf_id))


def render_what_the_model_sees(history):
    """The frozen prompt, the estimate against the threshold, the recalled memories, the exact request
    and the model's errors."""
    frozen = session.freeze_system_prompt()
    with st.expander(f"Frozen system prompt ({len(frozen):,} characters)"):
        st.code(frozen or "(none: no context blocks; the session's own system messages, if any, are in its history)",
                language=None, wrap_lines=True)
    estimate = session.estimate_context_tokens(leaf_id, history=history)
    threshold = st.number_input("Compaction threshold (tokens)", 100, 1_000_000, 6000, step=500, key="chat_threshold")
    st.progress(min(estimate / threshold, 1.0),
                text=f"{estimate:,} estimated tokens of {threshold:,} ({estimate / threshold:.0%})")
    if estimate > threshold:
        st.warning("Over the threshold: the Compaction lab can summarize this branch.")
    if st.button("Count with the model's tokenizer", key="chat_count"):
        from memorylab.llm.models import count_tokens

        with st.spinner("Counting…"):
            request = runner.build_request(leaf_id, history=history)
            counted = count_tokens(request["messages"], model, tools=request["tools"])
        st.metric(f"Counted ({counted['source']})", f"{counted['tokens']:,}",
                  delta=f"{estimate - counted['tokens']:+,} estimate drift", delta_color="off", help=counted["note"])
    sent = st.session_state.get("last_request") or {}
    request = sent.get("request") if sent.get("session") == session.session_id else None
    memories = request["memories"] if request else runner.recall(leaf_id)
    if memories:
        with st.expander(f"Long-term memories injected ({len(memories)})"):
            for memory in memories:
                st.caption(f"[{memory['scope']}] {memory['summary']}")
    # Built only while open: converting a long branch to the request's messages is the costly part.
    preview = st.expander("View the exact request", key="chat_request_preview", on_change="rerun")
    with preview:
        st.caption("The last request sent on this session" if request
                   else "What the next turn would send (nothing sent yet)")
        if preview.open:
            request = request or runner.build_request(leaf_id, history=history)
            st.json({"model": request["model"], "messages": request["messages"], "tools": request["tools"]},
                    expanded=False)
    errors = chat_errors(session)
    if errors:
        with st.expander(f"Model errors ({len(errors)})", expanded=False):
            for record in reversed(errors):
                st.error(f"{record['at']} · {record.get('model')} · {record.get('message')}")


model = st.session_state["model"]
leaf_id = active_leaf(session)
chat_column, side_column = st.columns([3, 2], gap="large")
with side_column:
    st.subheader("What the model sees")
    runner, long_term = chat_runner(model)
with chat_column:
    history = branch_history(session, leaf_id)  # read once per branch version, for the chat, budget and request
    render_chat(history)
    turn_area = st.container()  # a new turn streams here, below the branch
# At the page's top level, so Streamlit pins it to the bottom of the window.
prompt = st.chat_input("Message the agent")
render_turn(prompt, turn_area)
with side_column:
    render_what_the_model_sees(history)
st.divider()
render_replay(session, leaf_id, long_term=long_term)
