"""Experiments from where you are: the Chat and Tree pages put the branch shown (as a case) and a
message of it (as a probe, its text as the fact) into the experiment draft the Experiments page
edits (``experiment_drafts.editable_draft``), which then opens on its "Cases and probes" tab.

State: ``exp_added`` (what was just added, said once beside the button) and the draft's own keys.
"""
import streamlit as st

from memorylab import MemoryLabError
from memorylab.experiments import Experiments
from memorylab.experiments.drafts import with_branch_case, with_message_probe

from .escaping import escape_markdown
from .experiment_drafts import draft_choice, editable_draft, set_draft
from .navigation import link_to


def _add(session, change):
    """Apply ``change`` (spec -> (spec, case name)) to the draft; returns what to say, or None."""
    try:
        draft = editable_draft(Experiments(session.store, tenant_id=session.tenant_id))
    except MemoryLabError as error:
        st.error(f"Nothing was added: {error}")
        return None
    spec, case_name = change(draft["spec"])
    set_draft(draft["origin"], spec, draft["version"])
    st.session_state["exp_open"] = draft_choice(draft)
    st.session_state["exp_show"] = "Cases and probes"
    return f"case “{escape_markdown(case_name)}” of the draft “{escape_markdown(spec['name'])}”"


def _branch(session, leaf_id):
    return (session.tenant_id, session.agent_id, session.session_id, leaf_id)


def add_branch_button(session, leaf_id, key):
    """"Add this branch as a case": the branch ending at ``leaf_id``, with no probes yet."""
    if st.button("Add this branch as a case", key=key, icon=":material/science:",
                 help="Put this branch into the experiment draft as a case (once), to probe and run on the "
                      "Experiments page."):
        added = _add(session, lambda spec: with_branch_case(spec, *_branch(session, leaf_id)))
        if added:
            st.session_state["exp_added"] = f"This branch is {added}."
    _say_added()


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
    if st.button("Add the probe to the experiment draft", key=f"probe_add_{message['id']}", type="primary",
                 disabled=not (question.strip() and fact.strip())):
        added = _add(session, lambda spec: with_message_probe(spec, _branch(session, leaf_id), question, fact))
        if added:
            st.session_state["exp_added"] = f"The probe is in {added}."
            st.rerun()


def _say_added():
    added = st.session_state.pop("exp_added", None)
    if added:
        st.success(added)
        link_to("experiments", "Open the draft on the Experiments page", ":material/science:")
