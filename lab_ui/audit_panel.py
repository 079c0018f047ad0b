"""What a summary dropped, as the Tree, the Compaction lab and the Audit page show it: the span's lost
artifacts by kind, each with a way to its message, and what was kept and where.

State: a lost artifact's button opens the Tree on its message (``open_message``, with ``tree_message``
naming it there) or, for one an earlier summary stated, on that summary's band (``tree_overlay``).
"""
import streamlit as st

from memorylab.audit import KINDS, audit_proposal, audit_session
from memorylab.display.frames import to_dataframe
from memorylab.history.overlays import SUMMARY_ID_PREFIX

from .navigation import open_message
from .selection import branch_key

SHOWN_PER_KIND = 5
"""Lost artifacts of one kind listed at once; the others are folded under them."""
WHERE_KEPT = {"summary": "the summary", "pin": "a pinned message read after it", "tail": "the tail (after the span)",
              "head": "the head (before the span)"}


def session_audits(session):
    """``{overlay id: CompactionAudit}`` of every overlay of ``session``, audited once per version of
    it and shared by every page: read-only."""
    return _session_audits(branch_key(session, None), session)


@st.cache_resource(max_entries=8, show_spinner="Auditing the session's compactions…")
def _session_audits(key, _session):
    return {audit.overlay_id: audit for audit in audit_session(_session)}


@st.cache_resource(max_entries=8, show_spinner="Auditing the proposed summary…")
def proposal_audit(key, summary, from_id, to_id, _session):
    """What ``summary`` would keep and lose over ``from_id .. to_id``, once per branch version
    (``key``) and text: read-only."""
    return audit_proposal(_session, summary, from_id, to_id)


def audit_caption(audit, subject):
    """The audit in one line: the span, the summary (``subject``) and how much of what the span
    stated survived."""
    whole = len(audit.kept) + len(audit.lost)
    share = f"kept {len(audit.kept)} of {whole} artifacts ({len(audit.kept) / whole:.0%})" if whole else \
        "its span states no artifact (path, command, URL, id, number, date, version, error or decision)"
    return (f"{subject}: {audit.span_messages} messages ({audit.span_tokens:,} tokens) → "
            f"{audit.summary_tokens:,}-token summary; {share}.")


def open_on_tree(session, overlay_id, message_id=None):
    """The Tree on ``session`` with the band of ``overlay_id`` selected and, given ``message_id``,
    that message shown (the branch through it made active); without one, the branch through the band."""
    st.session_state["tree_overlay"] = overlay_id
    st.session_state["tree_message"] = st.session_state["tree_focus"] = message_id
    if message_id is None:
        message_id = next(o["to_id"] for o in session.get_compactions() if o["id"] == overlay_id)
    open_message((session.tenant_id, session.agent_id, session.session_id), message_id, session)


def lost_artifact(artifact, audit, session, key):
    """One lost artifact: its text (plain: it is user content) and a button to where it was stated."""
    text, button = st.columns([3, 1], vertical_alignment="center")
    text.text(" ".join(artifact["text"].split()))
    message_id = artifact["message_id"]
    if message_id.startswith(SUMMARY_ID_PREFIX):  # stated by an earlier summary the span held
        earlier = int(message_id.removeprefix(SUMMARY_ID_PREFIX))
        if button.button(f"Show summary {earlier}", key=key, width="stretch",
                         help=f"Stated by summary {earlier}, which this span updated: open its band on the Tree"):
            open_on_tree(session, earlier)
    elif button.button("Show message", key=key, width="stretch", help=f"Show message {message_id} on the Tree"):
        open_on_tree(session, audit.overlay_id, message_id)


def lost_artifacts(audit, session, key):
    """The lost artifacts by kind, the first ``SHOWN_PER_KIND`` of each with a button to its message and
    the rest folded in a table, so a long list does not push what follows (the Accept button) off the
    screen."""
    for kind in KINDS:
        lost = [artifact for artifact in audit.lost if artifact["kind"] == kind]
        if not lost:
            continue
        st.markdown(f"**{kind}** · {len(lost)} lost")
        for number, artifact in enumerate(lost[:SHOWN_PER_KIND]):
            lost_artifact(artifact, audit, session, f"{key}:{kind}:{number}")
        if len(lost) > SHOWN_PER_KIND:  # one table, not a row of widgets each: a long span loses thousands
            with st.expander(f"{len(lost) - SHOWN_PER_KIND} more {kind} lost"):
                st.dataframe(to_dataframe([{"text": a["text"], "message": a["message_id"]}
                                           for a in lost[SHOWN_PER_KIND:]]), hide_index=True, width="stretch")


def kept_artifacts(audit):
    """What was kept, and where the request still held it."""
    if not audit.kept:
        return
    with st.expander(f"What was kept ({len(audit.kept)}), and where"):
        table = to_dataframe([{"kind": a["kind"], "text": a["text"], "kept in": WHERE_KEPT[a["where"]],
                               "message": a["message_id"]} for a in audit.kept])
        st.dataframe(table, hide_index=True, width="stretch")


def dropped_panel(audit, session, key, *, heading="What this summary dropped", subject=None):
    """``audit`` (a ``CompactionAudit`` of ``session``) under ``heading`` (None: the caller's
    expander names it): the lost artifacts by kind, then what was kept and where. ``subject`` names
    the summary (default: by its overlay id); ``key`` makes its buttons' keys unique on the page."""
    if heading:
        st.markdown(f"#### {heading}")
    st.caption(audit_caption(audit, subject or f"Summary {audit.overlay_id}") + " An artifact is lost when neither "
               "the summary, a pinned message, the head nor the tail the agent read next still holds it.")
    if audit.kept and not audit.lost:
        st.success(f"Nothing: the request after it still holds all {len(audit.kept)} artifacts.")
    lost_artifacts(audit, session, key)
    kept_artifacts(audit)
