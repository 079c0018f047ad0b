"""memorylab lab: `streamlit run app.py`. Opens on the sample data the first time."""
import streamlit as st

st.set_page_config(page_title="memorylab", page_icon="🧠", layout="wide")

navigation = st.navigation([st.Page("pages/sessions.py", title="Sessions", icon="🗂️", default=True)])
navigation.run()
