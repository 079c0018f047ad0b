"""Links into the lab, as the CLI prints them and the lab reads them back."""
from urllib.parse import parse_qs, urlsplit

import pytest

from memorylab import InvalidInputError
from memorylab.audit.audit import CompactionAudit
from memorylab.lab_links import AuditLink, lab_url, session_view


def test_a_link_names_its_page_and_view_and_leaves_out_what_is_none():
    url = lab_url("http://localhost:8501/", "tree", **session_view("acme", "bot", "s 1/ü", None))
    assert url == "http://localhost:8501/tree?tenant=acme&agent=bot&session=s+1%2F%C3%BC"
    assert parse_qs(urlsplit(url).query)["session"] == ["s 1/ü"]
    assert lab_url("https://lab.example.com/memorylab") == "https://lab.example.com/memorylab/"
    assert lab_url("http://h:1", "experiments", experiment="sample", trial=3, tab="Results") == \
        "http://h:1/experiments?experiment=sample&tab=Results&trial=3"


@pytest.mark.parametrize("base", ["localhost:8501", "ftp://h", "http://h/?x=1", "http://h/#top", ""])
def test_a_base_that_is_not_where_a_lab_is_served_is_refused(base):
    with pytest.raises(InvalidInputError, match="such as http://localhost:8501"):
        lab_url(base)


def test_a_view_the_lab_does_not_read_is_refused():
    with pytest.raises(InvalidInputError, match="names no branch"):
        lab_url("http://h", "tree", branch="m1")


def audit(session_id, overlay_id):
    return CompactionAudit(session_id, overlay_id, 3, 100, 10, agent_id="bot", tenant_id="acme")


def test_an_audit_link_opens_the_one_compaction_audited_else_the_audit_page():
    one = AuditLink("http://h")
    assert [a.session_id for a in one.follow([audit("s1", 2)])] == ["s1"]
    assert one.url == "http://h/audit?tenant=acme&agent=bot&session=s1&overlay=2"
    many = AuditLink("http://h")
    list(many.follow([audit("s1", 1), audit("s2", 1)]))
    assert many.url == "http://h/audit"
    with pytest.raises(InvalidInputError):
        AuditLink("localhost")
