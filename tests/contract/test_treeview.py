
import pytest

from memorylab import Session, load_samples, message_text
from memorylab.display.treeview import SessionTree, preview
from memorylab.display.viz import budget_figure, context_window_figure, tree_figure
from tests.helpers import text_message


@pytest.fixture
def trip(store):
    load_samples(store)
    return Session.open(store, "trip-planning-branches", agent_id="travel-planner")


def test_layout_of_a_branching_tree(trip):
    messages = trip.get_all_messages()
    leaf = trip.get_latest_leaf()["id"]
    layout = SessionTree(messages).layout(active_leaf=leaf)
    assert len(layout.nodes) == len(messages)  # small trees are never collapsed
    assert layout.active_path == [m["id"] for m in trip.get_history(leaf, apply_compactions=False)]
    assert all(layout.nodes[i].y == 0 for i in layout.active_path)  # the newest branch runs straight
    positions = {(node.x, node.y) for node in layout.nodes.values()}
    assert len(positions) == len(messages)  # no two messages drawn on one spot
    assert layout.lanes == 1 + max(node.y for node in layout.nodes.values())
    for parent, child in layout.edges:
        assert layout.nodes[child].x == layout.nodes[parent].x + 1


def test_the_tree_reads_what_the_session_reads(trip):
    tree = SessionTree.of(trip)
    assert tree.leaves() == [m["id"] for m in trip.get_leaves()]
    for leaf in tree.leaves():
        outlined, read = tree.history(leaf, trip.get_compactions()), trip.get_history(leaf)
        assert [(m["id"], m["role"], m["tokens"], message_text(m)) for m in outlined] == \
            [(m["id"], m["role"], m["tokens"], message_text(m)) for m in read]
    assert {i: len(c) for i, c in tree.children.items() if c} == trip.get_child_counts()


def test_the_outline_decodes_only_messages_without_text_or_with_a_tool_part(session):
    session.append_message({"role": "user", "content": "look this up"})
    call = {"type": "tool-search", "toolCallId": "c1", "state": "output-available", "input": {"q": "x"},
            "output": "found"}
    session.append_message({"role": "assistant", "parts": [call]})
    session.append_message({"role": "assistant", "parts": [{"type": "reasoning", "text": "hm"},
                                                           {"type": "text", "text": "Found it."}]})
    said_and_called = [{"type": "text", "text": "Checking again."}, {**call, "toolCallId": "c2"}]
    session.append_message({"role": "assistant", "parts": said_and_called})
    outline = session.storage.outline()
    assert [m["parts"] for m in outline] == [[{"type": "text", "text": "look this up"}], [call],
                                             [{"type": "text", "text": "Found it."}], said_and_called]
    assert [preview(m) for m in outline] == ["look this up", "[tool tool-search]", "Found it.", "Checking again."]


def test_overlay_band_covers_its_range_and_hover_is_escaped(session):
    for i in range(8):
        session.append_message(text_message(f"m{i}", f"<img src=x onerror=alert({i})> turn {i}"))
    overlay = session.add_compaction("<script>alert('s')</script> summary", "m2", "m5")
    layout = SessionTree.of(session).layout(session.get_compactions(), active_leaf="m7")
    (band,) = layout.bands
    assert band["overlay"]["id"] == overlay["id"] and band["covered"] == 4
    assert band["x0"] < layout.nodes["m2"].x and band["x1"] > layout.nodes["m5"].x
    figure = tree_figure(session, "m7")
    hover = " ".join(str(h) for trace in figure.data for h in (trace.hovertext or ()))
    assert "<img" not in hover and "<script>" not in hover
    assert "&lt;img" in hover and "&lt;script&gt;" in hover
    points = {c for trace in figure.data if trace.customdata is not None for c in trace.customdata}
    assert points == {f"m{i}" for i in range(8)} | {f"compaction_{overlay['id']}"}  # a band's label picks it


def test_sibling_branch_shows_no_band_of_the_other_branch(session):
    for i in range(6):
        session.append_message(text_message(f"m{i}", f"turn {i}"))
    session.append_message(text_message("b3", "other"), parent_id="m2")
    session.add_compaction("main only", "m1", "m4")
    tree = SessionTree.of(session)
    assert tree.layout(session.get_compactions(), active_leaf="b3").bands == []
    assert len(tree.layout(session.get_compactions(), active_leaf="m5").bands) == 1


def test_budget_and_window_figures_carry_the_numbers():
    blocks = [{"label": "memory", "tokens": 40, "max_tokens": 100}, {"label": "soul", "tokens": 12, "max_tokens": None}]
    figure = budget_figure(blocks)
    assert list(figure.data[0].x) == [40, 12] and list(figure.data[1].x) == [60, 0]
    rows = [{"part": "system prompt", "item": "soul", "tokens": 100},
            {"part": "messages", "item": "user messages", "tokens": 250}]
    window = context_window_figure(rows, context_limit=8192, threshold=300)
    assert [trace.x[0] for trace in window.data] == [100, 250]
    assert {shape.x0 for shape in window.layout.shapes} == {8192, 300}
