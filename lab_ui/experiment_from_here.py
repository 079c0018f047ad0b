"""Experiments from where you are: the Chat and Tree pages put the branch shown (as a case) and a
message of it (as a probe, its text as the fact) into the experiment draft the Experiments page
edits (``experiment_drafts.editable_draft``), which then opens on its "Cases and probes" tab.

State: the draft's own (``exp_draft``; ``exp_open`` and ``exp_show`` say what the Experiments page
opens next). Whether the branch shown is a case of the draft is read from the draft on every run.
"""
import streamlit as st

from memorylab import MemoryLabError
from memorylab.experiments import Experiments
from memorylab.experiments.drafts import case_for_branch, with_branch_case, with_message_probe

from .escaping import escape_markdown
from .experiment_drafts import draft_choice, editable_draft, set_draft
from .navigation import link_to


def _add(session, change):
    """Apply ``change`` (spec -> (spec, case name)) to the draft, which the Experiments page then opens."""
    try:
        draft = editable_draft(Experiments(session.store, tenant_id=session.tenant_id))
    except MemoryLabError as error:
        st.error(f"Nothing was added: {error}")
        return
    spec, _ = change(draft["spec"])
    set_draft(draft["origin"], spec, draft["version"])
    st.session_state["exp_open"] = draft_choice(draft)
    st.session_state["exp_show"] = "Cases and probes"


def _branch(session, leaf_id):
    return (session.tenant_id, session.agent_id, session.session_id, leaf_id)


def add_branch_button(session, leaf_id, key):
    """"Add this branch as a case": the branch ending at ``leaf_id``, with no probes yet."""
    if st.button("Add this branch as a case", key=key, icon=":material/science:",
                 help="Put this branch into the experiment draft as a case (once), to probe and run on the "
                      "Experiments page."):
        _add(session, lambda spec: with_branch_case(spec, *_branch(session, leaf_id)))
    _in_the_draft(session, leaf_id)


def add_probe_popover(session, leaf_id, message, column):
    """"Add a probe from this message" in ``column``, for a message with text; its form is drawn only
    while open (fifty of them would cost every rerun)."""
    text = "\n".join(part["text"] for part in message["parts"] if part["type"] == "text").strip()
    if not text:
        return
    probe = column.popover("Add a probe", icon=":material/science:", key=f"probe_{message['id']}", on_change="rerun",
                           help="Add a probe from this message to the experiment draft: its text is prefilled as "
                                "the fact")
    if probe.open:
        with probe:
            _probe_form(session, leaf_id, message, text)


def _probe_form(session, leaf_id, message, text):
    """A question, and the message's text as the fact (trim it to the words the answer must hold)."""
    question = st.text_input("Question a user could ask later", key=f"probe_question_{message['id']}",
                             placeholder="e.g. Which order number was refunded?")
    fact = st.text_area("Fact the answer must hold", text, key=f"probe_fact_{message['id']}",
                        help="Prefilled with the message's text: keep the short exact phrase a context must "
                             "still hold for the probe to pass.")
    st.button("Add the probe to the experiment draft", key=f"probe_add_{message['id']}", type="primary",
              disabled=not (question.strip() and fact.strip()), on_click=_add_probe,
              args=(session, _branch(session, leaf_id), message["id"]))


def _add_probe(session, branch, message_id):
    """The button's callback: add the probe as typed, and close its popover (a click outside an open
    one only closes it), which only a callback may do to a widget drawn in this run."""
    question, fact = (st.session_state[f"probe_{field}_{message_id}"] for field in ("question", "fact"))
    _add(session, lambda spec: with_message_probe(spec, branch, question, fact))
    st.session_state[f"probe_{message_id}"] = False


def _in_the_draft(session, leaf_id):
    """Whether the branch shown is a case of the draft, with its probes, and the way to the draft."""
    draft = st.session_state.get("exp_draft")
    case = case_for_branch(draft["spec"], *_branch(session, leaf_id)) if draft else None
    if case is None:
        return
    probes = len(case.get("probes") or ())
    st.success(f"This branch is case “{escape_markdown(case['name'])}” of the draft "
               f"“{escape_markdown(draft['spec']['name'])}”, with {probes} probe{'' if probes == 1 else 's'}.")
    link_to("experiments", "Open the draft on the Experiments page", ":material/science:")
