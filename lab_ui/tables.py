"""Selectable tables whose selection follows their rows, not their row numbers."""
import streamlit as st


def table_key(name, ids):
    """The widget key of a selectable table that lists the rows ``ids``, new whenever they change (a
    filter, a delete, a list reordered by someone else's write): a selection is row numbers, which
    would otherwise pick whatever moved into those rows. Unchanged rows keep ``name`` and the selection."""
    ids = list(ids)
    if st.session_state.get(f"{name}:ids", ids) != ids:
        st.session_state[f"{name}:version"] = st.session_state.get(f"{name}:version", 0) + 1
    st.session_state[f"{name}:ids"] = ids
    version = st.session_state.get(f"{name}:version", 0)
    return name if not version else f"{name}:{version}"


def selected_rows(event, rows) -> list:
    """The items of ``rows`` selected in a table's selection ``event``."""
    return [rows[i] for i in (event.selection.rows if event else []) if i < len(rows)]
