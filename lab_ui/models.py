"""The model the lab talks to, picked in the sidebar, and the completion arguments set there.

``st.session_state["model"]`` is the litellm model string; ``completion_kwargs`` the extra arguments.
"""
import json

import streamlit as st

from memorylab.llm.api_hosts import api_base_host


@st.cache_data(ttl=30, show_spinner=False)
def _usable_models():
    """The picker's choices; probing local servers is cheap but not free, so once per 30 s."""
    from memorylab.llm.models import usable_models

    return usable_models()


def model_picker():
    from memorylab.llm.models import DEFAULT_LOCAL_MODEL

    models = _usable_models()
    usable = [m for m in models if m["usable"]]
    options = [m["model"] for m in usable] or [DEFAULT_LOCAL_MODEL]
    current = st.session_state.get("model")
    if current not in options:
        current = st.session_state["model"] = options[0]
    labels = {m["model"]: m["label"] for m in models}
    names = {labels.get(model, model): model for model in options}
    choice = st.sidebar.selectbox(
        "Model", list(names), index=options.index(current),
        help="Models with a key in the environment, a reachable local server, or the embedded one.",
    )
    st.session_state["model"] = names[choice]
    if st.session_state["model"] == DEFAULT_LOCAL_MODEL:
        st.sidebar.caption("SmolLM2-135M runs offline on this machine. It is tiny: good enough to prove "
                           "the loop, not to write good summaries. Set an API key to use a stronger model.")
    with st.sidebar.expander("Other models"):
        custom = st.text_input("Any litellm model string", placeholder="e.g. ollama/llama3.2 or gpt-4o-mini",
                               help="Keys come from the environment; they are never stored or shown.")
        if custom.strip():
            st.session_state["model"] = custom.strip()
        raw = st.text_area(
            "Completion arguments (JSON)", json.dumps(completion_settings()),
            help='Passed to litellm.completion for chat and summaries, e.g. {"temperature": 0.2, '
                 '"max_tokens": 256, "api_base": "http://localhost:8000/v1"}. Never put keys here.')
        try:
            parsed = json.loads(raw or "{}")
            if not isinstance(parsed, dict):
                raise ValueError("it must be a JSON object")
            st.session_state["completion_kwargs"] = parsed
        except ValueError as error:
            st.error(f"Ignored: not a JSON object ({error})")
        for model in models:
            if not model["usable"]:
                st.caption(f"{model['label']}: {model['reason']}")


def completion_settings():
    """Extra ``litellm.completion`` arguments for chat and summaries, as set in the sidebar."""
    return dict(st.session_state.get("completion_kwargs") or {})


def sidebar_api_hosts():
    """The host of the sidebar's ``api_base``: the lab's user named it, so experiments may call it too
    (besides those in MEMORYLAB_ALLOWED_API_HOSTS)."""
    host = api_base_host(completion_settings().get("api_base"))
    return [host] if host else []


def sidebar_summarizer(model=None):
    """``summarize(prompt) -> str`` with ``model`` (default: the sidebar's) and the sidebar's arguments;
    the model layer loads on its first call, so a page that may never summarize does not pay for it."""
    def summarize(prompt):
        from memorylab.llm.models import make_summarizer

        return make_summarizer(st.session_state["model"] if model is None else model, **completion_settings())(prompt)

    return summarize
