"""The Tree page's pins: pin or unpin the selected message, and every pin of the session in a table.

State: ``tree_pin_note`` (why the selected message is pinned) and ``tree_pins_table`` (the pins
selected for unpinning; a new key whenever the pins change).
"""
import pandas as pd
import streamlit as st

from memorylab.display.treeview import preview
from memorylab.history.pins import MAX_PIN_NOTE_CHARS

from .tables import selected_rows, table_key


def pin_row(pin, message):
    """A pin as the pins table shows it; ``message`` is the outlined message, None when unreadable."""
    return {"message": pin["message_id"], "role": message["role"] if message else None,
            "text": preview(message, 120) if message else "", "note": pin["note"], "pinned at": pin["pinned_at"]}


def pin_manager(session, tree, selected_id):
    """Pin or unpin the selected message, and list every pin of the session with a way to drop some."""
    pins = session.get_pins()
    pinned = {pin["message_id"]: pin for pin in pins}
    with st.expander(f"📌 Pins ({len(pins)}): messages compactions keep whole", expanded=bool(pins)):
        selected = tree.messages.get(selected_id)
        if selected is not None:
            text, button = st.columns([4, 1], vertical_alignment="bottom")
            if selected_id in pinned:
                text.caption(f"The selected message `{selected_id}` is pinned.")
                if button.button("Unpin it", key="tree_unpin_selected"):
                    session.unpin(selected_id)
                    st.rerun()
            else:
                note = text.text_input(f"Pin the selected message `{selected_id}` ({selected['role']}): why?",
                                       key="tree_pin_note", placeholder="e.g. the budget the user set",
                                       max_chars=MAX_PIN_NOTE_CHARS)
                if button.button("Pin it", key="tree_pin_selected", type="primary"):
                    session.pin(selected_id, note=note)
                    st.rerun()
        if not pins:
            st.caption("No pins yet. A pinned message is left out of every compaction's summary and read whole "
                       "right after it; its tool call or result stays with it.")
            return
        rows = pd.DataFrame(pin_row(pin, tree.messages.get(pin["message_id"])) for pin in pins)
        table = st.dataframe(rows, hide_index=True, width="stretch", on_select="rerun", selection_mode="multi-row",
                             key=table_key("tree_pins_table", [pin["message_id"] for pin in pins]))
        chosen = [pin["message_id"] for pin in selected_rows(table, pins)]
        if st.button(f"Unpin {len(chosen)} selected", key="tree_unpin_rows", disabled=not chosen):
            for message_id in chosen:
                session.unpin(message_id)
            st.rerun()
