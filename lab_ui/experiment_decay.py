"""The Experiments page's decay chart: each decay arm's retention curve (the early probes' score after
each round of compaction), drawn under the leaderboard when the trial has a decay arm."""
import streamlit as st


def render_decay(results):
    """The retention chart and its table; nothing when no arm of the trial ran ``rounds``."""
    curve = results.retention()
    if not curve:
        return
    st.subheader("Decay over repeated compactions")
    st.plotly_chart(results.decay_figure(), width="stretch", config={"displaylogo": False})
    st.caption("Each decay arm replays its cases, compacting again whenever the context grows past compact_at "
               "tokens; a point is the mean score of the probes whose facts were all stated before the first "
               "compaction, after that many compactions (fact matcher). A round no case reached is a gap.")
    st.dataframe(curve, hide_index=True, column_config={
        "score": st.column_config.NumberColumn(format="%.2f"),
        "probes": st.column_config.NumberColumn("early probes scored")})
