"""The compaction audit: an artifact ledger of a span (``artifacts``) and what each overlay kept of
it (``audit``)."""
from .artifacts import KINDS, Artifact, extract_artifacts
from .audit import CompactionAudit, audit_compaction, audit_proposal, audit_session, iter_store_audits, retention_totals
from .guardrails import summary_warnings

__all__ = ["KINDS", "Artifact", "CompactionAudit", "audit_compaction", "audit_proposal", "audit_session",
           "extract_artifacts", "iter_store_audits", "retention_totals", "summary_warnings"]
