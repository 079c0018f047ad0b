"""The Compaction lab's plan settings as widgets, and what follows from them, computed once.

Settings live in widget keys ``<prefix>_head``, ``<prefix>_tail`` and ``<prefix>_min_tail`` for the
prefixes ``main`` (the preview), ``A`` and ``B`` (the comparison); ``<prefix>_branch`` is the branch
they were seeded for. The Experiments page's "Use this arm" writes the ``main_`` ones,
``main_strategy``, ``main_template``, ``main_model`` and ``main_settings_from`` (where they came from).
"""
import streamlit as st

from memorylab import MemoryLabError, plan_compaction, truncate_older_messages
from memorylab.display.frames import to_dataframe
from memorylab.display.viz import compaction_figure
from memorylab.experiments.strategies import suggested_plan_settings
from memorylab.history.compaction import DEFAULT_SUMMARY_TEMPLATE
from memorylab.history.truncation import stored_bytes

SUMMARIZERS = {"summarize": "A model (summarize)", "extractive": "Extractive: no model"}
"""The strategies that write a summary over a plan's span, as the Compaction lab's choices name them."""
SUMMARIZER_HELP = ("summarize: a model writes the summary from the prompt template; extractive: the span's most "
                   "informative sentences, picked without a model")
SETTING_KEYS = {"protect_head": "head", "tail_token_budget": "tail", "min_tail_messages": "min_tail"}
"""Plan setting -> the suffix of its widget keys."""


def seed_settings(prefix, defaults, branch_id, *, keep=False):
    """Fill the widgets of ``prefix`` that hold nothing with ``defaults``; on another branch than they
    were set for, the tail budget too (it is relative to the branch), unless ``keep``."""
    moved = st.session_state.get(f"{prefix}_branch") != branch_id
    st.session_state[f"{prefix}_branch"] = branch_id
    for setting, suffix in SETTING_KEYS.items():
        key = f"{prefix}_{suffix}"
        if key not in st.session_state or (moved and not keep and setting == "tail_token_budget"):
            st.session_state[key] = defaults[setting]


def seed_lab(history, branch_id, model):
    """Every widget's starting value on this branch; returns where handed-over settings came from (the
    Experiments page's "Use this arm"), which keeps the tail they set."""
    handed_over = st.session_state.pop("main_settings_from", None)
    seed_settings("main", suggested_plan_settings(history), branch_id, keep=bool(handed_over))
    seed_settings("A", suggested_plan_settings(history), branch_id)
    seed_settings("B", suggested_plan_settings(history, tail_share=8) | {"protect_head": 1}, branch_id)
    st.session_state.setdefault("main_template", DEFAULT_SUMMARY_TEMPLATE)
    st.session_state.setdefault("main_strategy", "summarize")
    for name in ("main", "A", "B"):
        st.session_state.setdefault(f"{name}_model", model or "")
    return handed_over


def setting_controls(prefix, container):
    """One set of plan settings as widgets (seeded by ``seed_settings``); returns the settings dict."""
    columns = container.columns(3)
    return {
        "protect_head": columns[0].number_input("Protect head (messages)", 0, 50, key=f"{prefix}_head"),
        "tail_token_budget": columns[1].number_input("Tail token budget", 0, 500_000, step=100, key=f"{prefix}_tail",
                                                     help="Defaults to a quarter of the branch's tokens."),
        "min_tail_messages": columns[2].number_input("Min tail messages", 0, 100, key=f"{prefix}_min_tail"),
    }


def plan_span(plan):
    """What a summary is written from: the span it replaces and the earlier summary it updates. A
    summary made before someone else changed the branch (a new overlay, new messages) covers another."""
    earlier = f"\nupdating the earlier summary: {plan.previous_summary}" if plan.previous_summary else ""
    return f"summarizes {plan.from_id} … {plan.to_id} ({len(plan.middle)} messages){earlier}"


# Everything below is a pure function of the branch (``branch``: its ``branch_key``) and the settings,
# so each is computed once per branch version and settings (cache_resource: shared, read-only).
@st.cache_resource(max_entries=16, show_spinner=False)
def plan_or_error(branch, settings, template, _history):
    try:
        return plan_compaction(_history, prompt_template=template, **settings), None
    except MemoryLabError as error:
        return None, str(error)


@st.cache_resource(max_entries=16, show_spinner=False)
def plan_table_and_figure(branch, settings, template, _plan):
    return to_dataframe(_plan), compaction_figure(_plan)


@st.cache_resource(max_entries=8, show_spinner=False)
def stored_sizes(branch, _history):
    return [stored_bytes(message) for message in _history]


@st.cache_resource(max_entries=16, show_spinner=False)
def shortened_messages(branch, settings, _history):
    """``(original, shortened)`` of each message that micro-compaction with ``settings`` cuts."""
    truncated = truncate_older_messages(_history, **settings)
    return [(before, after) for before, after in zip(_history, truncated) if before is not after]
