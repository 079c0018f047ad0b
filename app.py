"""memorylab lab: `streamlit run app.py`. Opens on the sample data the first time.

The page scripts are in app_pages/ (not pages/: Streamlit would list every file of a pages/ folder
in the sidebar of a deep link opened before this router first ran), their shared parts in lab_ui/.
Each url_path is fixed, so links keep working whatever the files are called. Every run ends by
drawing the sidebar's menu and writing the view it showed into the URL's query parameters
(lab_ui/navigation.py, lab_ui/deep_links.py).
"""
import streamlit as st

from lab_ui.navigation import run_page

PAGES = [
    st.Page("app_pages/sessions.py", title="Sessions", icon="🗂️", default=True),
    st.Page("app_pages/chat.py", title="Chat", icon="💬", url_path="chat"),
    st.Page("app_pages/tree.py", title="Tree", icon="🌳", url_path="tree"),
    st.Page("app_pages/context_blocks.py", title="Context blocks", icon="🧱", url_path="context_blocks"),
    st.Page("app_pages/context_window.py", title="Context window", icon="📏", url_path="context_window"),
    st.Page("app_pages/compaction_lab.py", title="Compaction lab", icon="🗜️", url_path="compaction_lab"),
    st.Page("app_pages/audit.py", title="Audit", icon="🩺", url_path="audit"),
    st.Page("app_pages/experiments.py", title="Experiments", icon="🧪", url_path="experiments"),
    st.Page("app_pages/search.py", title="Search", icon="🔎", url_path="search"),
    st.Page("app_pages/memory.py", title="Memory manager", icon="🗃️", url_path="memory"),
    st.Page("app_pages/long_term.py", title="Long-term memory", icon="🧠", url_path="long_term"),
]

run_page(st.navigation(PAGES, position="hidden"), PAGES)
