# Search: full-text search over every text part, in this tenant, the selected session or every tenant;
# each hit opens its message on the Tree or the Chat page.
#
# State: ``search_query``, ``search_scope``, ``search_roles`` and ``search_limit`` (the form's widgets).
import streamlit as st

from lab_ui.deep_links import stop_showing_view
from lab_ui.escaping import escape_markdown
from lab_ui.navigation import open_message
from lab_ui.selection import session_row
from lab_ui.sidebar import setup_page
from memorylab import Session
from memorylab.store import ALL_TENANTS, SNIPPET_MARKS


def search_form(tenant):
    """The query and its filters; returns (query, scope, roles, limit)."""
    query = st.text_input("Search", placeholder="e.g. refund card, \"wrong item\", A-4471", key="search_query")
    filters = st.columns([2, 2, 1])
    scope = filters[0].radio("Search in", ["This tenant", "Selected session", "All tenants"], horizontal=True,
                             key="search_scope", help=f"This tenant is `{tenant}`, the selected session's.")
    roles = filters[1].multiselect("Roles", ["user", "assistant", "system", "tool"], key="search_roles")
    limit = filters[2].number_input("Hits", min_value=1, max_value=200, value=20, key="search_limit")
    return query, scope, roles, limit


def title_of(ref):
    row = session_row(store, ref)
    return (row and row["metadata"].get("title")) or ref[2]


def render_hits(hits, scope):
    """Each hit with its session's title, its snippet highlighted, and the ways to open it."""
    # Only the sessions the hits come from are read, however many the store holds.
    refs = dict.fromkeys((h["tenant_id"], h["agent_id"], h["session_id"]) for h in hits)
    titles = {ref: title_of(ref) for ref in refs}
    for index, hit in enumerate(hits):
        ref = (hit["tenant_id"], hit["agent_id"], hit["session_id"])
        with st.container(border=True):
            head, action = st.columns([5, 1])
            tenant_note = f" · tenant `{hit['tenant_id']}`" if scope == "All tenants" else ""
            head.caption(f"{titles.get(ref, hit['session_id'])}{tenant_note} · {hit['role']} · `{hit['id']}` · "
                         f"{hit['created_at']}")
            snippet = escape_markdown(hit["snippet"])
            head.markdown(snippet.replace(SNIPPET_MARKS[0], "**").replace(SNIPPET_MARKS[1], "**"))
            for page in ("tree", "chat"):
                if action.button(f"Open in {page}", key=f"open_{page}_{index}"):
                    open_message(ref, hit["id"], Session.open(store, ref[2], tenant_id=ref[0], agent_id=ref[1]), page)


store, session = setup_page("Search")
st.title("Search")
st.caption(f"Full-text search ({store.search_engine.description}) over every text part. Words match as prefixes; "
           "\"quoted words\" match as a phrase. Any text is safe to type.")
# One tenant unless every tenant is asked for: crossing tenants is an admin's deliberate choice.
tenant = session.tenant_id if session else "default"
query, scope, roles, limit = search_form(tenant)
if not query.strip():
    st.info("Type words to search the conversations.")
    stop_showing_view()
hits = store.search(query, tenant_id=ALL_TENANTS if scope == "All tenants" else tenant,
                    limit=int(limit), roles=roles or None,
                    session_pk=session.pk if scope == "Selected session" and session else None)
st.write(f"**{len(hits)}** hit{'s' if len(hits) != 1 else ''}")
render_hits(hits, scope)
