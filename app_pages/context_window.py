# Context window: what the next request on the active branch holds (the frozen system prompt block by
# block, the tool schemas, compaction summaries and the messages after micro-compaction), the estimate
# against the model's tokenizer, and the prompt cache turn by turn.
#
# Each row says where it comes from: the session's own blocks and messages, or the lab's sample context
# when the sidebar's switch attaches it (lab_ui/session_context.py).
#
# State: none of its own beyond its widgets; the branch is the selected one (lab_ui/selection.py).
import pandas as pd
import streamlit as st

from lab_ui.selection import active_leaf, branch_history, branch_key
from lab_ui.session_context import lab_context_attached
from lab_ui.sidebar import session_page
from memorylab.display.viz import context_window_figure, prompt_cache_figure
from memorylab.history.budget import HistoryBudget, prompt_and_tool_rows
from memorylab.llm.models import KEYED_PROVIDERS
from memorylab.llm.prompt_cache import dollars, prompt_cache_report
from memorylab.session_context import request_sources

OWN_MODEL = "each turn's own model"


@st.cache_resource(max_entries=8, show_spinner=False)
def history_budget(branch, _session, _leaf_id):
    """One budget per branch version: moving a setting answers from its totals, not the messages."""
    return HistoryBudget(branch_history(_session, _leaf_id))


@st.cache_resource(max_entries=8, show_spinner="Reading the recorded requests and their prices…")
def cache_report(branch, model, _session, _leaf_id):
    """One report per branch version and pricing model: a new turn is a new version."""
    return prompt_cache_report(_session, _leaf_id, model=model)


def render_settings():
    """The limits the request is measured against; returns (context limit, threshold, messages kept whole)."""
    settings = st.columns(3)
    context_limit = settings[0].number_input("Model context limit (tokens)", min_value=512, value=8192, step=1024,
                                             help="SmolLM2-135M reads 8,192 tokens; most hosted models 128k or more.")
    threshold = settings[1].number_input("Compaction threshold (tokens)", min_value=100, value=6000, step=500,
                                         help="compact_after(threshold): compaction runs when a request goes over it.")
    keep_recent = settings[2].number_input("Messages kept whole (micro-compaction)", min_value=0, value=4,
                                           help="Older tool outputs over 500 characters and texts over 10,000 are cut.")
    return context_limit, threshold, keep_recent


def render_request(context_limit, threshold, keep_recent):
    """The request's parts as a chart, its totals against the limits, and its table; returns its total."""
    budget = history_budget(branch_key(session, leaf_id), session, leaf_id)
    rows = request_sources(session, prompt_and_tool_rows(session) + budget.rows(int(keep_recent)),
                           lab_context=lab_context_attached(session))
    total = sum(r["tokens"] for r in rows)
    figure = context_window_figure(rows, context_limit=int(context_limit), threshold=int(threshold))
    st.plotly_chart(figure, width="stretch", config={"displaylogo": False})

    status = st.columns(3)
    status[0].metric("Estimated request", f"{total:,} tokens")
    status[1].metric("Of the context limit", f"{total / context_limit:.0%}")
    over = total - threshold
    status[2].metric("Against the threshold", f"{over:+,} tokens", delta="would compact" if over > 0 else "below",
                     delta_color="inverse" if over > 0 else "normal")

    table = pd.DataFrame(rows, columns=["part", "item", "source", "tokens"])
    table["share"] = table["tokens"] / max(total, 1)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"share": st.column_config.ProgressColumn(format="percent", min_value=0, max_value=1),
                                "source": st.column_config.TextColumn(width="large")})
    return total


def render_tokenizer_count(total):
    st.subheader("Estimate vs the model's tokenizer")
    model = st.session_state.get("model")
    st.caption(f"The estimate is model-free (max of 4 characters or 1.3 words per token). The exact count uses "
               f"litellm's tokenizer for `{model}`, which loads litellm (a few seconds, once).")
    if st.button("Count with the model's tokenizer"):
        from memorylab.llm.chat import build_request
        from memorylab.llm.models import count_tokens

        with st.spinner("Loading litellm and counting…"):
            request = build_request(session, leaf_id, history=branch_history(session, leaf_id))
            counted = count_tokens(request["messages"], model, tools=request.get("tools"))
        exact = counted["tokens"]
        drift = (total - exact) / exact if exact else 0
        columns = st.columns(3)
        columns[0].metric("Estimate", f"{total:,}")
        columns[1].metric(f"Counted ({counted['source']})", f"{exact:,}", help=counted["note"])
        columns[2].metric("Drift", f"{drift:+.1%}", help="How far the estimate is from the tokenizer's count")


def render_prompt_cache():
    st.subheader("Prompt cache, turn by turn")
    st.caption("Of each turn's first request, the prefix it shares with the previous request on this branch is what a "
               "provider's prefix cache can serve; the rest of the previous request is lost, and the table says what "
               "invalidated it. Tokens are estimates; prices come from litellm's cost map.")
    branch = branch_key(session, leaf_id)
    report = cache_report(branch, None, session, leaf_id)
    if not report.recorded_rows:
        st.info("No recorded turns on this branch: chat on this branch to record requests. Turns imported or "
                "stored before recording existed show as not recorded.")
    else:
        price_as = st.selectbox("Price the turns as", [OWN_MODEL, *(model for _, _, model, _ in KEYED_PROVIDERS)],
                                help="A hosted model's prices show what this branch would cost there, with and "
                                     "without caching.")
        if price_as != OWN_MODEL:
            report = cache_report(branch, price_as, session, leaf_id)
        totals = report.totals()
        columns = st.columns(4)
        columns[0].metric("Input served from the cache", f"{totals['cached_share']:.0%}",
                          help=f"{totals['cached_input_tokens']:,} of {totals['input_tokens']:,} estimated "
                               "input tokens")
        columns[1].metric("Lost to invalidations", f"{totals['lost_tokens']:,} tokens",
                          help=", ".join(f"{cause}: {tokens:,}" for cause, tokens in totals["lost_by_cause"].items()))
        for column, key, label in ((columns[2], "cost_cached", "Cost with caching"),
                                   (columns[3], "cost_uncached", "Cost without caching")):
            column.metric(label, "no price" if totals[key] is None else dollars(totals[key]))
        st.plotly_chart(prompt_cache_figure(report.rows), width="stretch", config={"displaylogo": False})
        for note in report.notes:
            st.caption(note)
        st.dataframe(report.frame(), hide_index=True, width="stretch")


store, session = session_page(
    "Context window",
    "What the next request on the active branch holds: the frozen system prompt block by block, "
    "the tool schemas, compaction summaries and the messages after micro-compaction.",
)
leaf_id = active_leaf(session)
total = render_request(*render_settings())
render_tokenizer_count(total)
render_prompt_cache()
