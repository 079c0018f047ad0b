"""The tree of a 20,000-message session with 200 branches stays readable: long runs of single-child
messages collapse into one node each, short side branches share a lane, a run opens on demand, and
the active leaf always has a node of its own. Pure layout, no store: the shapes are what is tested."""
from memorylab.display.treeview import SessionTree
from memorylab.display.viz import VIEW_COLUMNS, tree_layout_figure
from memorylab.history.overlays import apply_overlays
from tests.helpers import text_message

FORK_EVERY = 100


def forking_conversation(count):
    """``count`` messages in one conversation whose every hundredth answer is regenerated: the one
    before stays behind as a one-message branch (as ``benchmarks/scale.py`` builds the long session)."""
    messages = []
    for i in range(count):
        parent = i - 2 if i % FORK_EVERY == FORK_EVERY - 1 else i - 1
        message = text_message(f"m{i}", f"message {i}", role="user" if i % 2 == 0 else "assistant")
        messages.append({**message, "parent_id": f"m{parent}" if parent >= 0 else None, "tokens": 10,
                         "created_at": "2026-01-01T00:00:00.000Z"})
    return messages


def test_twenty_thousand_messages_draw_as_a_few_hundred_nodes_on_two_lanes():
    tree = SessionTree(forking_conversation(20_000))
    layout = tree.layout(active_leaf="m19999")
    assert len(tree.leaves()) == 201
    assert len(layout.nodes) < 700
    assert sum(len(node.members) for node in layout.nodes.values()) == 20_000
    branch_points = {f"m{i}" for i in range(FORK_EVERY - 3, 20_000, FORK_EVERY)}
    assert branch_points <= set(layout.nodes) and not any(layout.nodes[b].is_group for b in branch_points)
    assert layout.lanes == 2  # the side branches never overlap, so they share one lane
    assert {layout.nodes[i].y for i in layout.active_path if i in layout.nodes} == {0}
    assert len({(node.x, node.y) for node in layout.nodes.values()}) == len(layout.nodes)
    for parent, child in layout.edges:
        assert layout.nodes[child].x == layout.nodes[parent].x + 1
    assert set(layout.runs) == {node.id for node in layout.nodes.values() if node.is_group}


def test_an_opened_run_draws_its_messages_and_the_others_stay_collapsed():
    tree = SessionTree(forking_conversation(20_000))
    closed = tree.layout(active_leaf="m19999")
    run, members = next(iter(closed.runs.items()))
    opened = tree.layout(active_leaf="m19999", opened=[run])
    assert len(opened.nodes) == len(closed.nodes) + len(members) - 1
    assert all(member in opened.nodes and opened.nodes[member].run == run for member in members)
    assert sum(node.is_group for node in opened.nodes.values()) == len(closed.runs) - 1


def test_a_selected_message_inside_a_run_gets_its_own_node():
    tree = SessionTree(forking_conversation(2_000))
    middle = "m1050"
    layout = tree.layout(active_leaf=middle)
    assert not layout.nodes[middle].is_group and layout.nodes[middle].on_active_path
    before, after = [node for node in layout.nodes.values() if node.run == layout.nodes[middle].run and node.is_group]
    assert before.members[-1] == "m1049" and after.members[0] == "m1051"
    assert layout.active_path[-1] == middle and len(layout.active_path) == 1051 - 1050 // FORK_EVERY


def test_overlay_ends_stay_visible_and_the_history_matches_the_overlaid_path():
    messages = forking_conversation(5_000)
    tree = SessionTree(messages)
    path = tree.path_to("m4999")
    overlay = {"id": 1, "from_id": path[10], "to_id": path[2000], "summary": "earlier work", "created_at": "now"}
    layout = tree.layout([overlay], active_leaf="m4999")
    assert not layout.nodes[path[10]].is_group and not layout.nodes[path[2000]].is_group
    (band,) = layout.bands
    assert band["covered"] == 1991
    history = tree.history("m4999", [overlay])
    by_id = {m["id"]: m for m in messages}
    assert history == apply_overlays([by_id[i] for i in path], [overlay])
    assert len(history) == len(path) - 1990


def test_a_wide_tree_opens_on_its_newest_columns_with_a_range_slider():
    layout = SessionTree(forking_conversation(20_000)).layout(active_leaf="m19999")
    figure = tree_layout_figure(layout)
    nodes = [trace for trace in figure.data if trace.customdata is not None]  # not the legend's keys
    drawn = sum(len(trace.x) for trace in nodes)
    assert drawn == len(layout.nodes)
    low, high = figure.layout.xaxis.range
    assert high - low == VIEW_COLUMNS and high >= layout.nodes["m19999"].x
    assert figure.layout.xaxis.rangeslider.visible
    groups = [trace for trace in nodes if trace.name == "group"][0]
    assert set(groups.text) == {"96", "98"}  # each square says how many messages it holds (the first run: m1-m96)
