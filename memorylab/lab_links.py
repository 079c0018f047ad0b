"""Links into the lab: the URL of the page that shows a session, a branch, an experiment's trial or a
compaction's audit. The lab writes the same query parameters while it runs and reads them back from
a pasted link (``lab_ui/deep_links.py``), so a link printed by the CLI opens the view it names."""
from urllib.parse import urlencode, urlsplit

from .errors import InvalidInputError

SELECTION_PARAMS = ("tenant", "agent", "session", "leaf")
"""The session every page shows and its branch (by its leaf; none: the newest)."""
EXPERIMENT_PARAMS = ("experiment", "tab", "trial")
"""On the Experiments page: the experiment, its open tab and the trial shown on its Results tab."""
AUDIT_PARAMS = ("overlay",)
"""On the Audit page: the compaction (overlay id) of the selected session whose audit is shown."""
VIEW_PARAMS = SELECTION_PARAMS + EXPERIMENT_PARAMS + AUDIT_PARAMS


def lab_url(base: str, page: str = "", **view) -> str:
    """The URL of ``page`` (its url path: ``"experiments"``; ``""``: Sessions) of the lab served at
    ``base`` (``http://localhost:8501``), opened on ``view`` (names from ``VIEW_PARAMS``; None is
    left out)."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise InvalidInputError(f"the lab URL must be where the lab is served, such as http://localhost:8501, "
                                f"got {base!r}")
    unknown = sorted(set(view) - set(VIEW_PARAMS))
    if unknown:
        raise InvalidInputError(f"a lab link names no {', '.join(unknown)}: use {', '.join(VIEW_PARAMS)}")
    query = urlencode({name: str(view[name]) for name in VIEW_PARAMS if view.get(name) is not None})
    return f"{base.rstrip('/')}/{page}" + (f"?{query}" if query else "")


def session_view(tenant_id, agent_id, session_id, leaf_id=None) -> dict:
    """The view naming one session (and a branch of it), as ``lab_url`` takes it."""
    return {"tenant": tenant_id, "agent": agent_id, "session": session_id, "leaf": leaf_id}


class AuditLink:
    """Follows the audits a command writes; ``url`` is the lab page that shows them: the one
    compaction's audit when there was one, else the Audit page of them all."""

    def __init__(self, base: str):
        lab_url(base)  # a wrong base is refused before anything is audited
        self.base, self.first, self.count = base, None, 0

    def follow(self, audits):
        for audit in audits:
            self.first = self.first or audit
            self.count += 1
            yield audit

    @property
    def url(self) -> str:
        if self.count != 1:
            return lab_url(self.base, "audit")
        audit = self.first
        return lab_url(self.base, "audit", **session_view(audit.tenant_id, audit.agent_id, audit.session_id),
                       overlay=audit.overlay_id)
