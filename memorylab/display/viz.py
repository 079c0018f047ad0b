"""Plotly figures shared by the lab's pages and notebooks (built once here, shown by both)."""
import html

import plotly.graph_objects as go

from ..audit import KINDS
from ..experiments.results import percent_text
from ..history.overlays import SUMMARY_ID_PREFIX
from .treeview import SessionTree

ROLE_COLORS = {"user": "#2563eb", "assistant": "#16a34a", "tool": "#ea580c", "system": "#6b7280",
               "group": "#a855f7"}
ACTIVE_EDGE = "#f59e0b"
FLAGGED_OUTLINE = "#dc2626"
"""The outline of a node holding a message with a finding (``lint_tool_pairs``)."""
OPENED_RING = "#7e22ce"
"""The ring around the message a page opened the tree on (a lost artifact's, from the audit)."""


def _legend_key(name, marker):
    """A legend entry with no point of its own (it shows and hides the trace of its ``legendgroup``)."""
    return {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": name, "legendgroup": name,
            "marker": marker, "hoverinfo": "skip"}


def _hover(text, width=80):
    """Escaped, wrapped hover text: plotly renders a subset of HTML, so user content is escaped."""
    escaped = html.escape(text)
    lines, line = [], ""
    for word in escaped.split():
        if len(line) + len(word) > width and line:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    lines.append(line)
    return "<br>".join(lines[:8]) + ("<br>…" if len(lines) > 8 else "")


def tree_figure(session, leaf_id=None, *, collapse_over=400, height=None):
    """The whole tree of ``session``: nodes by role, the active path highlighted, overlays as bands."""
    leaf_id = leaf_id or session.get_latest_leaf_id()
    layout = SessionTree.of(session).layout(session.get_compactions(), active_leaf=leaf_id,
                                            collapse_over=collapse_over)
    return tree_layout_figure(layout, height=height)


VIEW_COLUMNS = 48
"""Columns a wide tree shows at first; the range slider under it pans over the rest."""


def _band_shape(band):
    """The shaded rectangle over the messages a summary overlay covers."""
    return {"type": "rect", "x0": band["x0"], "x1": band["x1"], "y0": band["y0"], "y1": band["y1"],
            "fillcolor": "rgba(168,85,247,0.12)", "line": {"color": "#a855f7", "dash": "dot"}, "layer": "below"}


def _band_label(band):
    """A band's label above it: clicking it picks the summary (``customdata`` is the summary's id)."""
    overlay = band["overlay"]
    return {
        "type": "scatter", "x": [(band["x0"] + band["x1"]) / 2], "y": [band["y1"]], "mode": "text",
        "text": [f"summary {overlay['id']} ({band['covered']} msgs)"], "textposition": "top center",
        "customdata": [f"{SUMMARY_ID_PREFIX}{overlay['id']}"],
        "hovertext": [_hover(overlay["summary"])], "hoverinfo": "text", "showlegend": False,
        "textfont": {"color": "#7e22ce", "size": 11},
    }


def _edge_trace(layout, on_path):
    """One trace of the tree's edges: those along the active path (``on_path``), or all the others."""
    xs, ys = [], []
    for parent, child in layout.edges:
        a, b = layout.nodes[parent], layout.nodes[child]
        if (a.on_active_path and b.on_active_path) == on_path:
            xs += [a.x, b.x, None]
            ys += [a.y, b.y, None]
    return {
        "type": "scatter", "x": xs, "y": ys, "mode": "lines", "hoverinfo": "skip", "showlegend": False,
        "line": {"color": ACTIVE_EDGE if on_path else "#cbd5e1", "width": 3 if on_path else 1.2},
    }


def _tree_xaxis(layout, focus):
    """A hidden axis; for a tree wider than ``VIEW_COLUMNS``, a window centred on ``focus`` (default the
    active leaf) with a range slider over the whole tree."""
    if layout.width <= VIEW_COLUMNS:
        return {"visible": False}
    focus = layout.nodes.get(focus) or layout.nodes.get((layout.active_path or [None])[-1])
    right = min(max(focus.x + VIEW_COLUMNS // 2 if focus else layout.width, VIEW_COLUMNS), layout.width + 1)
    # The range slider is drawn only under a visible axis; its ticks would mean nothing here.
    return {"range": [right - VIEW_COLUMNS, right], "showticklabels": False, "showgrid": False,
            "zeroline": False, "rangeslider": {"visible": True, "thickness": 0.15}}


def tree_layout_figure(layout, *, focus=None, height=None, flagged=frozenset(), opened=None):
    """Draw a ``TreeLayout``. Each point's ``customdata`` is its node's id (a message id; for a
    collapsed run, its first message; for a band's label, its summary's id), so
    ``st.plotly_chart(..., on_select="rerun")`` can select a message, open a run or pick a band. A tree
    wider than ``VIEW_COLUMNS`` opens centred on ``focus`` (a node id; default the active leaf), with a
    range slider under it that shows and pans the whole tree.
    Nodes holding a message of ``flagged`` (ids, e.g. of tool-pair findings) get a red outline; the
    node of ``opened`` (a message id, e.g. a lost artifact's) a ring."""
    # Traces and shapes as plain dicts, validated once by the Figure: add_trace would copy each again.
    shapes = [_band_shape(band) for band in layout.bands]
    traces = [_band_label(band) for band in layout.bands] + [_edge_trace(layout, on_path) for on_path in (False, True)]
    marked = {n.id for n in layout.nodes.values() if flagged and not flagged.isdisjoint(n.members)}
    for role, color in ROLE_COLORS.items():
        nodes = [n for n in layout.nodes.values() if n.role == role]
        if not nodes:
            continue
        # The legend draws a role's key from its first marker, which may wear a problem's outline: each
        # role gets a key of its own, and the outline one.
        traces.append(_legend_key(role, {"color": color, "size": 8, "line": {"color": "white", "width": 2},
                                          "symbol": "square" if role == "group" else "circle"}))
        traces.append({
            "type": "scatter", "x": [n.x for n in nodes], "y": [n.y for n in nodes], "name": role,
            "legendgroup": role, "showlegend": False, "customdata": [n.id for n in nodes],
            # A run's square is labelled with how many messages it holds.
            "mode": "markers+text" if role == "group" else "markers", "textposition": "top center",
            "text": [len(n.members) for n in nodes] if role == "group" else None, "textfont": {"size": 10},
            "hovertext": [_hover(f"{'tool-pair problem: ' if n.id in marked else ''}"
                                 f"{n.id if not n.is_group else 'click to open:'} [{n.role}, {n.tokens} tokens] "
                                 f"{n.text}") for n in nodes],
            "hoverinfo": "text",
            "marker": {
                "color": color, "size": [14 if n.is_group else (11 if n.children > 1 else 8) for n in nodes],
                "symbol": ["square" if n.is_group else ("diamond" if n.children > 1 else "circle") for n in nodes],
                "line": {"color": [FLAGGED_OUTLINE if n.id in marked else ACTIVE_EDGE if n.on_active_path else "white"
                                   for n in nodes],
                         "width": [4 if n.id in marked else 2 for n in nodes]},
            },
        })
    if marked:
        traces.append(_legend_key("tool-pair problem", {"color": "white", "size": 8,
                                                        "line": {"color": FLAGGED_OUTLINE, "width": 4}}))
    ring = layout.nodes.get(opened)
    if ring is not None:
        # On top of its node, so it answers a click as the node does.
        traces.append({"type": "scatter", "x": [ring.x], "y": [ring.y], "mode": "markers", "name": "opened message",
                       "customdata": [ring.id], "hoverinfo": "skip",
                       "marker": {"symbol": "circle-open", "size": 24, "color": OPENED_RING,
                                  "line": {"width": 3, "color": [OPENED_RING]}}})
    pinned = [n for n in layout.nodes.values() if n.pinned]
    if pinned:
        traces.append({
            "type": "scatter", "x": [n.x for n in pinned], "y": [n.y - 0.32 for n in pinned], "mode": "text",
            "text": ["📌"] * len(pinned), "showlegend": False, "hoverinfo": "text", "textfont": {"size": 14},
            "hovertext": [f"{n.id} is pinned: compactions keep it whole" for n in pinned],
        })
    return go.Figure(data=traces, layout={
        "shapes": shapes, "height": height or min(900, 220 + 70 * layout.lanes),
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "xaxis": _tree_xaxis(layout, focus), "yaxis": {"visible": False, "range": [layout.lanes - 0.4, -0.6]},
        "legend": {"orientation": "h", "y": 1.02, "x": 0}, "hovermode": "closest", "dragmode": "pan",
        "plot_bgcolor": "white", "clickmode": "event+select",
    })


PART_COLORS = {"system prompt": "#6366f1", "tool schemas": "#0ea5e9", "summaries": "#a855f7",
               "messages": "#22c55e"}


def context_window_figure(rows, *, context_limit=None, threshold=None, height=360):
    """A stacked bar of what fills the request (rows from ``budget.request_breakdown``), with the
    model's context limit and the compaction threshold as vertical lines."""
    figure = go.Figure()
    for row in rows:
        figure.add_trace(go.Bar(
            y=["request"], x=[row["tokens"]], orientation="h", name=f"{row['part']}: {row['item']}",
            marker={"color": PART_COLORS.get(row["part"], "#94a3b8"), "line": {"color": "white", "width": 1}},
            hovertemplate=f"{html.escape(row['part'])} / {html.escape(row['item'])}: %{{x:,}} tokens<extra></extra>",
        ))
    total = sum(r["tokens"] for r in rows)
    limits = ((context_limit, "context limit", "#dc2626"), (threshold, "compaction threshold", "#f59e0b"))
    for value, label, color in limits:
        if value:
            figure.add_vline(x=value, line={"color": color, "dash": "dash", "width": 2},
                             annotation_text=f"{label} {value:,}", annotation_position="top")
    figure.update_layout(
        barmode="stack", height=height, showlegend=True, margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.25}, yaxis={"visible": False},
        xaxis={"title": f"estimated tokens (total {total:,})",
               "range": [0, max(total, context_limit or 0, threshold or 0) * 1.05]},
        plot_bgcolor="white",
    )
    return figure


def budget_figure(blocks, *, height=None):
    """Each context block's tokens against its budget (blocks without a budget show their size)."""
    labels = [b["label"] for b in blocks]
    used = [b["tokens"] for b in blocks]
    free = [max((b["max_tokens"] or 0) - b["tokens"], 0) for b in blocks]
    figure = go.Figure([
        go.Bar(y=labels, x=used, orientation="h", name="used", marker={"color": "#6366f1"},
               hovertemplate="%{y}: %{x:,} tokens used<extra></extra>"),
        go.Bar(y=labels, x=free, orientation="h", name="free", marker={"color": "#e0e7ff"},
               hovertemplate="%{y}: %{x:,} tokens free<extra></extra>"),
    ])
    figure.update_layout(barmode="stack", height=height or 80 + 40 * len(blocks),
                         margin={"l": 10, "r": 10, "t": 10, "b": 10}, yaxis={"autorange": "reversed"},
                         legend={"orientation": "h"}, plot_bgcolor="white")
    return figure


PLAN_COLORS = {"head": "#64748b", "summarized": "#f97316", "summary": "#a855f7", "pinned": "#eab308",
               "tail": "#22c55e"}


def compaction_figure(plan, *, height=220):
    """The branch's tokens before and after a ``CompactionPlan``: head and tail stay, the middle
    (drawn on the "before" bar) gives way to a summary of the target size (on the "after" bar)."""
    segments = (
        ("head", f"head kept ({len(plan.head)} msgs)", {"before": plan.head_tokens, "after": plan.head_tokens}),
        ("summarized", f"summarized ({len(plan.middle)} msgs, {plan.from_id} … {plan.to_id})",
         {"before": plan.middle_tokens}),
        ("summary", "summary (target size)", {"after": plan.target_summary_tokens}),
        *([("pinned", f"pinned, kept whole ({len(plan.kept)} msgs)",
            {"before": plan.kept_tokens, "after": plan.kept_tokens})] if plan.kept else []),
        ("tail", f"tail kept ({len(plan.tail)} msgs)", {"before": plan.tail_tokens, "after": plan.tail_tokens}),
    )
    figure = go.Figure([
        go.Bar(y=list(values), x=list(values.values()), orientation="h", name=html.escape(name),
               marker={"color": PLAN_COLORS[key], "line": {"color": "white", "width": 1}},
               hovertemplate=f"{html.escape(name)}: %{{x:,}} tokens<extra></extra>")
        for key, name, values in segments
    ])
    saved = plan.tokens_before - plan.tokens_after
    figure.update_layout(
        barmode="stack", height=height, margin={"l": 10, "r": 10, "t": 40, "b": 10},
        title={"text": f"{plan.tokens_before:,} → {plan.tokens_after:,} estimated tokens (saves {saved:,})",
               "font": {"size": 14}},
        yaxis={"categoryorder": "array", "categoryarray": ["after", "before"]},
        xaxis={"title": "estimated tokens"}, legend={"orientation": "h", "y": -0.4, "traceorder": "normal"},
        plot_bgcolor="white",
    )
    return figure


STRATEGY_COLORS = {"summarize": "#a855f7", "extractive": "#0ea5e9", "window": "#f59e0b", "truncate": "#64748b",
                   "none": "#16a34a", "mask": "#14b8a6", "mask+summarize": "#ec4899"}


LABEL_CHARS = 24
"""Characters of an arm's name written beside its point; the whole name is in its hover."""
LABEL_POSITIONS = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom left")


def pareto_figure(arms, *, height=380):
    """Each arm (``ExperimentResults.arm_summaries``) at its tokens saved and its probe score; the
    arms no other arm beats on both are joined by the Pareto line, the choices worth making. The x
    axis spans the data, 0 included (an arm can cost tokens), and labels of points close together
    go different ways."""
    points = [a for a in arms if a["saved_pct"] is not None and a["score"] is not None]
    front, best = [], -1.0
    for arm in sorted(points, key=lambda a: (-a["saved_pct"], -a["score"])):
        if arm["score"] > best:
            front.append(arm)
            best = arm["score"]
    x_range = _saved_range([a["saved_pct"] for a in points])
    positions = _label_positions(points, x_range[1] - x_range[0])
    figure = go.Figure()
    for strategy in dict.fromkeys(a["strategy"] for a in points):
        chosen = [a for a in points if a["strategy"] == strategy]
        figure.add_trace(go.Scatter(
            x=[a["saved_pct"] for a in chosen], y=[a["score"] for a in chosen], mode="markers+text",
            name=strategy, text=[html.escape(_label(a["arm"])) for a in chosen],
            textposition=[positions[a["arm"]] for a in chosen], cliponaxis=False,
            marker={"size": 14, "color": STRATEGY_COLORS.get(strategy, "#94a3b8"),
                    "line": {"color": "white", "width": 1}},
            customdata=[[html.escape(a["arm"]), a["spread"], a["tokens_after"] or 0, percent_text(a["saved_pct"])]
                        for a in chosen],
            hovertemplate="%{customdata[0]}: score %{y:.2f} ± %{customdata[1]:.2f}, saves %{customdata[3]} "
                          "(%{customdata[2]:,} tokens after)<extra></extra>",
        ))
    if len(front) > 1:
        front.sort(key=lambda a: a["saved_pct"])
        figure.add_trace(go.Scatter(x=[a["saved_pct"] for a in front], y=[a["score"] for a in front], mode="lines",
                                    name="Pareto front", line={"color": "#94a3b8", "dash": "dot"}, hoverinfo="skip"))
    figure.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10}, plot_bgcolor="white",
        xaxis={"title": "tokens saved (% of the branch; under 0: the arm adds tokens)", "range": x_range,
               "gridcolor": "#e5e7eb", "zeroline": True, "zerolinecolor": "#94a3b8", "ticksuffix": "%"},
        yaxis={"title": "probe score", "range": [-0.08, 1.12], "gridcolor": "#e5e7eb"},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def decay_figure(curve, *, height=340):
    """Each decay arm's retention curve (``ExperimentResults.retention``): the early probes' mean score
    after each round of compaction, one line per arm; a round no case reached is a gap."""
    figure = go.Figure()
    for arm in dict.fromkeys(row["arm"] for row in curve):
        rows = sorted((row for row in curve if row["arm"] == arm), key=lambda row: row["round"])
        figure.add_trace(go.Scatter(
            x=[row["round"] for row in rows], y=[row["score"] for row in rows], mode="lines+markers",
            name=html.escape(arm), customdata=[row["probes"] for row in rows],
            hovertemplate=f"{html.escape(arm)}, round %{{x}}: %{{y:.2f}} over %{{customdata}} early probes"
                          "<extra></extra>"))
    rounds = sorted({row["round"] for row in curve})
    figure.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10}, plot_bgcolor="white",
        xaxis={"title": "compactions so far (round)", "tickvals": rounds, "gridcolor": "#e5e7eb",
               "type": "log" if rounds and rounds[-1] / rounds[0] >= 8 else "linear"},
        yaxis={"title": "early probes' score", "range": [-0.05, 1.05], "gridcolor": "#e5e7eb"},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def _saved_range(saved):
    """The x axis of a Pareto chart: every arm's saving and 0, with room for the labels either side."""
    low, high = min([0.0, *saved]), max([0.0, *saved])
    pad = max((high - low) * 0.12, 5.0)
    return [low - pad, high + pad]


def _label_positions(points, x_span):
    """A text position per arm, so that the labels of points close together (within about a label's
    width and height) go different ways rather than over each other."""
    placed, positions = [], {}
    for arm in sorted(points, key=lambda a: (a["saved_pct"], a["score"])):
        taken = {position for other, position in placed if abs(other["saved_pct"] - arm["saved_pct"]) < 0.15 * x_span
                 and abs(other["score"] - arm["score"]) < 0.1}
        positions[arm["arm"]] = next((p for p in LABEL_POSITIONS if p not in taken), LABEL_POSITIONS[len(placed) % 6])
        placed.append((arm, positions[arm["arm"]]))
    return positions


def _label(name):
    return name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"


CACHE_COLORS = {"cached prefix": "#16a34a", "uncached": "#f97316"}
LOST_COLORS = {"block write": "#6366f1", "memories": "#0ea5e9", "compaction": "#a855f7", "micro-compaction": "#eab308",
               "edit": "#dc2626", "history window": "#64748b"}


def prompt_cache_figure(rows, *, height=360):
    """Each recorded turn's first request (rows of ``prompt_cache_report``) as a cached prefix and
    an uncached rest stacked above zero, and the previous request's tokens it lost below zero,
    coloured by what invalidated them. Turns not recorded leave a gap."""
    turns = [row["turn"] for row in rows]
    ids = [html.escape(str(row["message_id"])) for row in rows]

    def bar(name, values, color):
        return go.Bar(x=turns, y=values, name=name, marker={"color": color}, customdata=ids,
                      hovertemplate=f"turn %{{x}} (%{{customdata}}): {name} %{{y:,}} tokens<extra></extra>")

    traces = [bar("cached prefix", [row["cached_tokens"] for row in rows], CACHE_COLORS["cached prefix"]),
              bar("uncached", [row["uncached_tokens"] for row in rows], CACHE_COLORS["uncached"])]
    for cause, color in LOST_COLORS.items():
        lost = [-row["lost_tokens"] if row["cause"] == cause and row["lost_tokens"] else None for row in rows]
        if any(lost):
            traces.append(bar(f"lost to {cause}", lost, color))
    figure = go.Figure(traces)
    figure.update_layout(
        barmode="relative", height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10}, plot_bgcolor="white",
        xaxis={"title": "assistant turn on the branch", "dtick": max(1, len(rows) // 20)},
        yaxis={"title": "estimated tokens (lost below 0)", "gridcolor": "#e5e7eb", "zerolinecolor": "#94a3b8"},
        legend={"orientation": "h", "y": -0.25}, bargap=0.15,
    )
    return figure


RETENTION_COLORS = {"kept": "#16a34a", "lost": "#dc2626"}


def retention_figure(by_kind, *, height=None):
    """The share of each kind of artifact kept and lost over many compactions (``by_kind`` as
    ``retention_totals`` gives it), one bar per kind in ``KINDS`` order; each bar's ``customdata`` is
    ``[kept, lost]``, the counts its hover names."""
    kinds = [kind for kind in KINDS if kind in by_kind]
    if not kinds:
        return go.Figure(layout={"height": height or 160, "xaxis": {"visible": False}, "yaxis": {"visible": False},
                                 "annotations": [{"text": "No compaction to audit", "showarrow": False}],
                                 "plot_bgcolor": "white"})
    counts = [[by_kind[kind]["kept"], by_kind[kind]["lost"]] for kind in kinds]
    traces = []
    for column, verdict in enumerate(("kept", "lost")):
        shares = [pair[column] / sum(pair) for pair in counts]
        traces.append(go.Bar(
            y=kinds, x=shares, orientation="h", name=verdict, customdata=counts,
            marker={"color": RETENTION_COLORS[verdict], "line": {"color": "white", "width": 1}},
            text=[(f"{share:.0%} kept" if verdict == "kept" else f"{pair[1]:,} lost") if pair[column] else ""
                  for share, pair in zip(shares, counts)],
            textposition="inside", insidetextanchor="middle", textfont={"color": "white"},
            hovertemplate=f"%{{y}}: {verdict} %{{x:.0%}} (%{{customdata[0]:,}} kept, %{{customdata[1]:,}} lost)"
                          "<extra></extra>"))
    figure = go.Figure(traces)
    figure.update_layout(
        barmode="stack", height=height or 90 + 34 * len(kinds), margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis={"title": "share of each kind's artifacts, over every compacted span", "tickformat": ".0%",
               "range": [0, 1]},
        yaxis={"autorange": "reversed"}, legend={"orientation": "h", "y": -0.35, "traceorder": "normal"},
        plot_bgcolor="white")
    return figure
