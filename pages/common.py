"""What every page shares: the cached store. Pages call the engine; they hold no SQL or algorithms."""
import os

import streamlit as st

from memorylab import Store, load_samples

DB_PATH = os.environ.get("MEMORYLAB_DB", "lab.db")


@st.cache_resource(show_spinner="Opening the lab database…")
def open_store(path=DB_PATH):
    """One Store per database file for the whole server; a new, empty file gets the sample data."""
    store = Store(path)
    if not store.list_sessions():
        load_samples(store)
    return store
