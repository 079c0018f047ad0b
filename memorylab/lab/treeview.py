"""The shape of a session tree for drawing: nodes, edges, positions, collapsed runs, overlay bands.

Pure data (no plotting) so the Streamlit page, notebooks and tests share one layout. networkx holds
the structure; positions come from a tidy layered layout: x is the position along the
conversation, y gives every leaf its own lane and puts a parent at the middle of its children.
"""
from dataclasses import dataclass, field

import networkx as nx

from ..messages import is_tool_part, message_text
from ..history.overlays import visible_overlays


@dataclass
class TreeNode:
    id: str
    role: str
    text: str
    tokens: int
    children: int
    on_active_path: bool
    members: list = field(default_factory=list)
    x: float = 0.0
    y: float = 0.0

    @property
    def is_group(self):
        """A collapsed run of single-child messages drawn as one node."""
        return len(self.members) > 1


@dataclass
class TreeLayout:
    nodes: dict
    edges: list
    bands: list
    active_path: list
    message_count: int


def build_graph(messages):
    graph = nx.DiGraph()
    for message in messages:
        graph.add_node(message["id"], message=message)
        if message.get("parent_id") is not None and message["parent_id"] in graph:
            graph.add_edge(message["parent_id"], message["id"])
    return graph


def _preview(message, limit=280):
    text = message_text(message)
    if not text:
        names = [p.get("toolName") or p["type"] for p in message["parts"] if is_tool_part(p)]
        text = f"[tool {', '.join(names)}]" if names else "[no text]"
    return text if len(text) <= limit else text[:limit] + "…"


def _collapse_runs(graph, keep, min_run):
    """Map each message id to the id of the node that draws it.

    A run is a chain of messages with one child each; runs longer than ``min_run`` are drawn as one
    node (its first member's id), except the messages in ``keep`` (branch points, overlay ends, the
    active leaf), which always stay visible.
    """
    owner = {}
    for node in nx.topological_sort(graph):
        parent = next(iter(graph.predecessors(node)), None)
        joinable = (
            parent is not None and graph.out_degree(parent) == 1 and parent not in keep
            and node not in keep and graph.out_degree(node) <= 1
        )
        owner[node] = owner[parent] if joinable else node
    runs = {}
    for node, head in owner.items():
        runs.setdefault(head, []).append(node)
    # Short runs are not worth hiding: give their members back their own nodes.
    for head, members in runs.items():
        if len(members) <= min_run:
            for member in members:
                owner[member] = member
    return owner


def tree_layout(messages, overlays=(), *, active_leaf=None, collapse_over=400, min_run=6):
    """Positions and groups for drawing ``messages`` (every message of a session, parents first).

    When the tree has more than ``collapse_over`` messages, linear runs longer than ``min_run`` are
    collapsed into group nodes so 2,000 messages stay readable.
    """
    graph = build_graph(messages)
    by_id = {m["id"]: m for m in messages}
    active_path = _path_to(graph, active_leaf) if active_leaf in graph else []
    path_messages = [by_id[i] for i in active_path]
    shown_overlays = visible_overlays(path_messages, overlays) if path_messages else {}

    keep = {n for n in graph if graph.out_degree(n) != 1} | {active_leaf}
    keep |= {n for n in graph if graph.in_degree(n) == 0}
    for overlay in overlays:
        keep |= {overlay["from_id"], overlay["to_id"]}
    owner = (_collapse_runs(graph, keep, min_run) if graph.number_of_nodes() > collapse_over
             else {n: n for n in graph})

    active = set(active_path)
    nodes = {}
    for message_id in nx.topological_sort(graph):
        head = owner[message_id]
        message = by_id[message_id]
        if head not in nodes:
            nodes[head] = TreeNode(
                id=head, role=message["role"], text=_preview(message),
                tokens=0, children=graph.out_degree(message_id), on_active_path=False,
            )
        node = nodes[head]
        node.members.append(message_id)
        node.tokens += message.get("tokens", 0)
        node.children = graph.out_degree(message_id)
        node.on_active_path = node.on_active_path or message_id in active
    for node in nodes.values():
        if node.is_group:
            node.role = "group"
            node.text = f"{len(node.members)} messages ({node.members[0]} … {node.members[-1]})"

    drawn = nx.DiGraph()
    drawn.add_nodes_from(nodes)
    for parent, child in graph.edges:
        if owner[parent] != owner[child]:
            drawn.add_edge(owner[parent], owner[child])
    _place(drawn, nodes)

    bands = []
    for start, (overlay, end) in sorted(shown_overlays.items()):
        covered = [nodes[owner[m["id"]]] for m in path_messages[start:end + 1]]
        bands.append({
            "overlay": overlay,
            "x0": min(n.x for n in covered) - 0.45, "x1": max(n.x for n in covered) + 0.45,
            "y0": min(n.y for n in covered) - 0.35, "y1": max(n.y for n in covered) + 0.35,
            "covered": end - start + 1,
        })
    return TreeLayout(nodes=nodes, edges=list(drawn.edges), bands=bands, active_path=active_path,
                      message_count=len(messages))


def _path_to(graph, leaf):
    path = [leaf]
    while True:
        parents = list(graph.predecessors(path[-1]))
        if not parents:
            return path[::-1]
        path.append(parents[0])


def _place(graph, nodes):
    """x = sequence position along the drawn chain, y = lane: leaves get lanes in order, parents sit
    at the mean of their children."""
    next_lane = 0
    for root in [n for n in graph if graph.in_degree(n) == 0]:
        for node in nx.dfs_postorder_nodes(graph, root):
            children = list(graph.successors(node))
            if children:
                nodes[node].y = sum(nodes[c].y for c in children) / len(children)
            else:
                nodes[node].y = float(next_lane)
                next_lane += 1
        for node in nx.dfs_preorder_nodes(graph, root):
            parent = next(iter(graph.predecessors(node)), None)
            nodes[node].x = nodes[parent].x + 1 if parent is not None else 0.0
