"""The KV store's entries as a table and the form that adds or edits one, guarded against overwriting
someone else's newer value (``guarded_edits``).

State: the form's widgets ``kv_key``, ``kv_value`` and ``kv_ttl`` (loaded by ``loaded_version``
under the editor name ``kv``).
"""
import json

import streamlit as st

from memorylab import MemoryLabError, to_dataframe
from memorylab.store.compare_and_set import MISSING

from .guarded_edits import changed_since_loaded, guarded_save, loaded_version


def entries_table(kv, entries):
    """The page of entries, each with its value as JSON and when it expires."""
    table = to_dataframe(entries)
    table["value"] = [json.dumps(value, ensure_ascii=False) for value in table["value"]]
    table.insert(2, "expires", [_expires_in(kv.ttl_left(entry)) for entry in entries])
    st.dataframe(table.drop(columns=["expires_at", "created_at"]), hide_index=True, width="stretch",
                 column_config={"updated_at": st.column_config.DatetimeColumn("updated")})


def _expires_in(ttl):
    return "never" if ttl is None else f"in {ttl:,} s"


def _entry_text(value, ttl):
    """An entry as the editor shows it and a conflict compares it: its JSON, then its expiry."""
    return f"{value}\nexpires: {_expires_in(ttl or None)}"


def _save_entry(kv, key, expected):
    """Write the form's entry if the stored one is still at ``expected`` (``MISSING``: none)."""
    return guarded_save("kv", lambda: kv.set(key, json.loads(st.session_state["kv_value"]),
                                             ttl=int(st.session_state["kv_ttl"]) or None, expected=expected),
                        f"Saved {key}")


def kv_editor(kv, key):
    """The entry form: a new key (``key`` None; refused when it exists by then) or a stored entry,
    loaded with its version so a save over someone else's newer value is refused and both are shown."""
    entry = kv.get_entry(key) if key else None
    base = loaded_version("kv", (kv.tenant_id, kv.namespace, key), entry["version"] if entry else MISSING, {
        "kv_key": key or "", "kv_ttl": (kv.ttl_left(entry) or 0) if entry else 0,
        "kv_value": json.dumps(entry["value"], ensure_ascii=False, indent=2) if entry else '{"example": true}'})
    with st.form("kv_edit"):
        st.text_input("Key", key="kv_key", disabled=key is not None)
        st.text_area("Value (any JSON)", height=90, key="kv_value")
        st.number_input("TTL in seconds (0 = never expires)", 0, 3_153_600_000, key="kv_ttl")
        target = key or st.session_state["kv_key"]
        refused = st.form_submit_button("Save entry", type="primary") and _save_entry(kv, target, base)
    try:
        stored = kv.get_entry(target) if target else None
    except MemoryLabError:  # a key the form refused already
        return
    version = stored["version"] if stored else MISSING
    if refused or base != version:
        changed_since_loaded(
            "kv", f"Entry `{target}`", version=version,
            stored=stored and _entry_text(json.dumps(stored["value"], ensure_ascii=False, indent=2),
                                          kv.ttl_left(stored)),
            yours=_entry_text(st.session_state["kv_value"], st.session_state["kv_ttl"]), refused=refused,
            overwrite=lambda expected: _save_entry(kv, target, expected))
