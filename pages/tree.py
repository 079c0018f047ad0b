import pandas as pd
import streamlit as st

from memorylab.lab.frames import to_dataframe
from memorylab.messages import message_text
from memorylab.lab.viz import tree_figure
from pages.common import active_leaf, select_leaf, session_page

store, session = session_page("Tree")

leaf_id = active_leaf(session)
leaves = session.get_leaves()
stats = session.stats()
left, middle, right, far = st.columns(4)
left.metric("Messages", stats["messages"])
middle.metric("Branches", stats["branches"])
right.metric("Active path", f"{session.get_path_length(leaf_id)} msgs")
far.metric("History tokens", f"{session.get_history_tokens(leaf_id):,}",
           help="Estimated tokens of the active path as sent: overlays applied, stored estimates summed")

st.caption("Click a node to make its branch active on every page. Diamonds are branch points, squares "
           "are collapsed runs of messages, purple bands are compaction summaries (hover for the text).")
event = st.plotly_chart(tree_figure(session, leaf_id), on_select="rerun", selection_mode="points",
                        key="tree_chart", width="stretch", config={"scrollZoom": True, "displaylogo": False})
points = (event or {}).get("selection", {}).get("points", []) if event else []
if points and points[0].get("customdata") and points[0]["customdata"] != leaf_id:
    select_leaf(points[0]["customdata"])
    st.rerun()

# Plain-string options (one per branch, named by its leaf) map back to leaf ids.
branch_names = {f"{leaf['id']} · {message_text(leaf)[:60] or leaf['role']}": leaf["id"] for leaf in leaves}
if leaf_id not in branch_names.values():  # a message inside a branch was clicked: chat continues from it
    branch_names = {f"{leaf_id} · the selected message (new turns fork here)": leaf_id, **branch_names}
names = list(branch_names)
current = next((i for i, name in enumerate(names) if branch_names[name] == leaf_id), 0)
chosen = st.selectbox("Active branch (by its leaf)", names, index=current)
if branch_names[chosen] != leaf_id:
    select_leaf(branch_names[chosen])
    st.rerun()

st.subheader("Active path")
history = session.get_history(leaf_id)
children = session.get_child_counts()
path_table = to_dataframe(history)[["id", "role", "text", "tools", "tokens", "created_at"]]
path_table["children"] = path_table["id"].map(children).fillna(0).astype(int)
st.dataframe(path_table, hide_index=True, width="stretch",
             column_config={"text": st.column_config.TextColumn(width="large")})

overlays = session.get_compactions()
if overlays:
    st.subheader("Compaction overlays")
    st.dataframe(pd.DataFrame(overlays)[["id", "from_id", "to_id", "summary", "created_at"]], hide_index=True,
                 width="stretch")
