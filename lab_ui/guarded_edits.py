"""Editing forms that never overwrite someone else's save unseen.

A form keeps the version of what it edits as it was when its widgets were filled
(``st.session_state["editor_versions"]``, see ``loaded_version``); a save is a compare-and-set write
against it, and a refused one shows both versions, their diff, and reload or overwrite.
"""
import difflib

import streamlit as st

from memorylab import MemoryLabError
from memorylab.store.compare_and_set import StaleWriteError

EDITOR_VERSIONS = "editor_versions"


def loaded_version(editor, subject, version, values):
    """The version of what the form ``editor`` edits when its widgets were filled. They are filled
    with ``values`` ({widget key: value}) when first drawn, when they show another ``subject`` (a
    session's block, another entry), when a page switch dropped their state and after
    ``reload_editor``; never while someone types, so a save sends the version its text came from."""
    loaded = st.session_state.setdefault(EDITOR_VERSIONS, {}).get(editor)
    if loaded is None or loaded[0] != subject or any(key not in st.session_state for key in values):
        st.session_state.update(values)
        loaded = st.session_state[EDITOR_VERSIONS][editor] = (subject, version)
    return loaded[1]


def reload_editor(editor):
    """Fill the form from what is stored on the next run (after a save too: that is the version it
    holds then, whoever wrote last)."""
    st.session_state.get(EDITOR_VERSIONS, {}).pop(editor, None)
    st.session_state.pop(f"shown:{editor}", None)
    st.rerun()


def rebase_editor(editor, version):
    """Keep what the form ``editor`` holds but count it as edited from ``version`` (the stored one a
    refused save reported): saving again then replaces that version on purpose."""
    subject, _ = st.session_state[EDITOR_VERSIONS][editor]
    st.session_state[EDITOR_VERSIONS][editor] = (subject, version)


def guarded_save(editor, write, done):
    """Run ``write()``, a compare-and-set write. True when it was refused because the stored version
    moved on; False after saying why it was refused otherwise; on success the form is filled again
    from what is stored (``reload_editor``) after the toast ``done``."""
    try:
        write()
    except StaleWriteError:
        return True
    except (MemoryLabError, ValueError) as error:
        st.error(f"Not saved: {error}")
        return False
    st.toast(done)
    reload_editor(editor)


def changed_since_loaded(editor, what, *, stored, version, yours, overwrite, refused=False, reload=None):
    """What a form shows while the stored ``version`` is not the one it was loaded from (someone else
    saved): both versions as text (``stored`` None: removed), their diff, and the choice to reload
    (take the stored one: ``reload()``, by default ``reload_editor``) or overwrite it with yours on
    purpose. ``overwrite(expected)`` writes over the version shown on the screen when the button was
    pressed, so a version nobody saw is never overwritten: it returns True when that one changed too,
    and the page shows the newest."""
    if refused:
        st.error(f"Not saved: {what} changed since you loaded it. Both versions are below; nothing was written.")
    else:
        st.warning(f"{what} changed since you loaded it: someone else saved it. Saving yours is refused "
                   "until you reload or overwrite.")
    shown = st.session_state.get(f"shown:{editor}", version)
    st.session_state[f"shown:{editor}"] = version
    diff = "\n".join(difflib.unified_diff((stored or "").splitlines(), yours.splitlines(), "stored now", "yours",
                                          lineterm=""))
    diff_tab, stored_tab, yours_tab = st.tabs(["Diff", "Stored now", "Yours"])
    diff_tab.code(diff or "(the same text)", language="diff")
    stored_tab.code("(removed)" if stored is None else stored, language=None, wrap_lines=True)
    yours_tab.code(yours, language=None, wrap_lines=True)
    take, keep = st.columns(2)
    if take.button("Reload: take the stored one", key=f"{editor}:reload", width="stretch"):
        (reload or reload_editor)(editor)
    if keep.button("Overwrite it with mine", key=f"{editor}:overwrite", width="stretch",
                   help="Save yours over the stored version shown here.") and overwrite(shown):
        st.rerun()
