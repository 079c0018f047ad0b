"""The shape of a session tree for drawing: nodes, edges, positions, collapsed runs, overlay bands.

Pure data (no plotting, no I/O) so the Streamlit page, notebooks and tests share one layout. Plain
dicts and lists rather than a graph library: 20,000 messages lay out in tens of milliseconds.
``SessionTree`` indexes a session's messages once; ``SessionTree.layout`` is cheap enough to run on
every rerun. Positions: x is the depth along the drawn chain; y is a lane. The newest branch runs
straight along lane 0 and every other branch takes the first lane that is free over its columns, so
200 short branches share a few lanes instead of stacking 200 deep.
"""
from bisect import bisect_left
from dataclasses import dataclass, field

from ..history.overlays import apply_overlays, visible_overlays
from ..history.tool_pairs import lint_tree
from ..messages import is_tool_part, message_text
from ..store import capabilities


@dataclass
class TreeNode:
    id: str
    role: str
    text: str
    tokens: int
    children: int
    on_active_path: bool
    pinned: bool = False
    members: list = field(default_factory=list)
    run: str | None = None
    """The id of the collapsible run this node is part of (``SessionTree.runs``), None outside one."""
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
    runs: dict
    """{run id: its message ids} for every run that can be collapsed; opened ones are drawn message by message."""
    lanes: int = 1
    width: int = 1
    """Columns from the root to the deepest drawn node."""


def preview(message, limit=280):
    """The message's text cut to ``limit`` characters, or the names of the tools it calls."""
    text = message_text(message)
    if not text:
        names = [p.get("toolName") or p["type"] for p in message["parts"] if is_tool_part(p)]
        text = f"[tool {', '.join(names)}]" if names else "[no text]"
    return text if len(text) <= limit else text[:limit] + "…"


class SessionTree:
    """Every message of a session indexed by id, parent and children: read once, laid out many times.

    ``messages`` come parents first (``Session.get_all_messages``); a message whose parent is not
    among them (a damaged row left out) starts a root of its own. Treat the tree as read-only: the lab
    caches one per session version and shares it between reruns.
    """

    def __init__(self, messages, pinned_ids=()):
        self.messages = {m["id"]: m for m in messages}
        self.pinned_ids = frozenset(pinned_ids)
        self.parents = {i: m.get("parent_id") for i, m in self.messages.items()}
        self.tokens = {i: m.get("tokens", 0) for i, m in self.messages.items()}
        self.children = {message_id: [] for message_id in self.messages}
        for message_id, parent in self.parents.items():
            if parent in self.children:
                self.children[parent].append(message_id)
        self._runs = {}

    @classmethod
    def of(cls, session):
        """The tree of ``session`` from its outline (``capabilities.outline``): what drawing needs,
        without decoding every message's stored parts."""
        with session.snapshot():
            return cls(capabilities.outline(session.storage), capabilities.pinned_ids(session.storage))

    def __len__(self):
        return len(self.messages)

    def tool_pair_findings(self, overlays=()):
        """``lint_tree`` of the messages the tree already holds (its outline keeps every tool part);
        a tree without a tool part has nothing to lint, which a pass over its parts tells."""
        messages = list(self.messages.values())
        if not any(is_tool_part(part) for message in messages for part in message["parts"]):
            return []
        return lint_tree(messages, overlays, self.pinned_ids)

    def leaves(self):
        """Every childless message id, newest first (one per branch)."""
        return [i for i in reversed(self.messages) if not self.children[i]]

    def path_to(self, message_id):
        """Message ids from the root down to ``message_id``; [] for an id the tree does not hold."""
        path, parents = [], self.parents
        while message_id in parents:
            path.append(message_id)
            message_id = parents[message_id]
        return path[::-1]

    def history(self, leaf_id, overlays=()):
        """The path ``Session.get_history`` reads for ``leaf_id`` (same ids, roles, tokens and summaries),
        built from the messages the tree holds: outlined ones for ``SessionTree.of``."""
        return apply_overlays([self.messages[i] for i in self.path_to(leaf_id)], overlays, self.pinned_ids)

    def runs(self, overlays=(), min_run=6):
        """{first message id: member ids} for each chain of single-child messages longer than ``min_run``.

        Roots, branch points, leaves, overlay ends and pinned messages never join a run, so collapsing
        hides no fork and no pin, and no overlay starts or ends inside a run. Worked out once per set of
        overlay ends.
        """
        ends = self.pinned_ids.union(end for overlay in overlays for end in (overlay["from_id"], overlay["to_id"]))
        if (ends, min_run) not in self._runs:
            runs, owner = {}, {}
            for message_id, parent in self.parents.items():
                if len(self.children[message_id]) != 1 or message_id in ends or parent not in self.messages:
                    continue
                head = owner.get(parent, message_id)  # a parent in a run has this message as its only child
                owner[message_id] = head
                runs.setdefault(head, []).append(message_id)
            self._runs[ends, min_run] = {head: members for head, members in runs.items() if len(members) > min_run}
        return self._runs[ends, min_run]

    def layout(self, overlays=(), *, active_leaf=None, collapse_over=400, min_run=6, opened=()):
        """Positions and groups for drawing the tree with ``active_leaf``'s path highlighted.

        When the tree has more than ``collapse_over`` messages, runs (``runs``) are drawn as one
        node each, except those whose id is in ``opened``. A collapsed run that holds the active leaf
        is split around it, so the selected message always has a node of its own.
        """
        active_path = self.path_to(active_leaf) if active_leaf is not None else []
        runs = self.runs(overlays, min_run) if len(self) > collapse_over else {}
        groups, run_of = self._groups(runs, set(opened), active_leaf)
        hidden = {member for members in groups.values() for member in members[1:]}
        drawn_by = {members[-1]: head for head, members in groups.items()}  # where a group's children hang
        active = set(active_path)
        nodes, edges = {}, []
        for message_id, message in self.messages.items():
            if message_id in hidden:
                continue
            members = groups.get(message_id)
            if members:
                node = TreeNode(id=message_id, role="group",
                                text=f"{len(members)} messages ({members[0]} … {members[-1]})",
                                tokens=sum(map(self.tokens.__getitem__, members)), members=members,
                                children=len(self.children[members[-1]]), on_active_path=message_id in active)
            else:
                node = TreeNode(id=message_id, role=message["role"], text=preview(message),
                                tokens=self.tokens[message_id], members=[message_id],
                                children=len(self.children[message_id]), on_active_path=message_id in active,
                                pinned=message_id in self.pinned_ids)
            node.run = run_of.get(message_id)
            nodes[message_id] = node
            parent = self.parents[message_id]
            if parent in self.messages:
                edges.append((drawn_by.get(parent, parent), message_id))
        lanes, width = self._place(nodes, edges)
        return TreeLayout(nodes=nodes, edges=edges, bands=self._bands(nodes, active_path, overlays),
                          active_path=active_path, message_count=len(self), runs=runs, lanes=lanes, width=width)

    def _groups(self, runs, opened, active_leaf):
        """{first member: members} of every collapsed part of a run, and {node id: run id} for the
        nodes that draw a run or a message of an opened one."""
        groups, run_of = {}, {}
        for head, members in runs.items():
            if head in opened:
                run_of.update(dict.fromkeys(members, head))
                continue
            parts = [members]
            if active_leaf in members:
                at = members.index(active_leaf)
                parts = [members[:at], [active_leaf], members[at + 1:]]
            for part in parts:
                if part:
                    run_of[part[0]] = head
                if len(part) > 1:
                    groups[part[0]] = part
        return groups, run_of

    def _place(self, nodes, edges):
        """x = depth; y = lane. The newest leaf's branch is lane 0; each other branch, newest first,
        is the chain from its leaf up to a node already placed, and takes the first lane free over
        its columns (one column of space on each side). Returns (lanes used, columns)."""
        parent_of = {child: parent for parent, child in edges}
        for head in nodes:  # parents come before children in ``nodes``
            parent = parent_of.get(head)
            nodes[head].x = nodes[parent].x + 1 if parent is not None else 0.0
        children = {head: [] for head in nodes}
        for parent, child in edges:
            children[parent].append(child)
        leaves = [head for head in reversed(nodes) if not children[head]]
        taken = []  # per lane: sorted, disjoint (start, end) column ranges
        placed = set()
        for leaf in leaves:
            chain = [leaf]
            while parent_of.get(chain[-1]) is not None and parent_of[chain[-1]] not in placed:
                chain.append(parent_of[chain[-1]])
            start, end = int(nodes[chain[-1]].x), int(nodes[leaf].x)
            lane = next((i for i, ranges in enumerate(taken) if _free(ranges, start - 1, end + 1)), len(taken))
            if lane == len(taken):
                taken.append([])
            taken[lane].insert(bisect_left(taken[lane], (start, end)), (start, end))
            for head in chain:
                nodes[head].y = float(lane)
                placed.add(head)
        return max(len(taken), 1), int(max((n.x for n in nodes.values()), default=0)) + 1

    def _bands(self, nodes, active_path, overlays):
        """One band per overlay that applies to the active path, around the nodes it covers (its
        ends are never inside a run, so they are drawn; a collapsed run between them is too)."""
        bands = []
        visible = visible_overlays([self.messages[i] for i in active_path], overlays) if overlays else {}
        for start, (overlay, end) in sorted(visible.items()):
            covered = [nodes[i] for i in active_path[start:end + 1] if i in nodes]
            bands.append({
                "overlay": overlay,
                "x0": min(n.x for n in covered) - 0.45, "x1": max(n.x for n in covered) + 0.45,
                "y0": min(n.y for n in covered) - 0.35, "y1": max(n.y for n in covered) + 0.35,
                "covered": end - start + 1,
            })
        return bands


def _free(ranges, start, end):
    """Whether no range of ``ranges`` (sorted, disjoint) overlaps ``start .. end``."""
    at = bisect_left(ranges, (start, start))
    return not ((at < len(ranges) and ranges[at][0] <= end) or (at > 0 and ranges[at - 1][1] >= start))
