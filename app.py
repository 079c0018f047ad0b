"""memorylab lab: `streamlit run app.py`. Opens on the sample data the first time."""
import streamlit as st

PAGES = [
    st.Page("pages/sessions.py", title="Sessions", icon="🗂️", default=True),
    st.Page("pages/chat.py", title="Chat", icon="💬"),
    st.Page("pages/tree.py", title="Tree", icon="🌳"),
    st.Page("pages/context_blocks.py", title="Context blocks", icon="🧱"),
    st.Page("pages/context_window.py", title="Context window", icon="📏"),
    st.Page("pages/compaction_lab.py", title="Compaction lab", icon="🗜️"),
    st.Page("pages/audit.py", title="Audit", icon="🩺"),
    st.Page("pages/experiments.py", title="Experiments", icon="🧪"),
    st.Page("pages/search.py", title="Search", icon="🔎"),
    st.Page("pages/memory.py", title="Sessions and memory", icon="🗃️"),
    st.Page("pages/long_term.py", title="Long-term memory", icon="🧠"),
]

st.navigation(PAGES).run()
