"""Sessions at the size long-running agents reach, on both backends: a 10,000-deep path read back
whole and in order, a 2,000-message branched tree drawn readably and fast, and a 20,000-message tree
with 200 branches read, laid out and drawn in a few hundred milliseconds."""
import time

from memorylab import import_session
from memorylab.display.treeview import SessionTree
from memorylab.display.viz import tree_figure, tree_layout_figure
from memorylab.io import EXPORT_FORMAT, EXPORT_VERSION
from tests.contract.test_tree_scale import forking_conversation
from tests.helpers import text_message


def test_ten_thousand_deep_path_reads_in_order(session):
    store = session.store
    with store.transaction():
        for i in range(10_000):
            session.append_message(text_message(f"m{i}", f"message number {i}"))
    history = session.get_history()
    assert len(history) == 10_000
    assert history[0]["id"] == "m0" and history[-1]["id"] == "m9999"
    assert session.get_path_length() == 10_000


def test_two_thousand_messages_collapse_into_a_readable_tree(session):
    parent = None
    with session.store.transaction():
        for i in range(2000):
            fork = i in (500, 1200, 1700)
            message = session.append_message(text_message(f"n{i}", f"message {i}"),
                                              parent_id=f"n{i - 300}" if fork else parent)
            parent = message["id"]
    started = time.perf_counter()
    figure = tree_figure(session)
    elapsed = time.perf_counter() - started
    layout = SessionTree.of(session).layout(active_leaf="n1999")
    assert len(layout.nodes) < 100
    assert sum(len(node.members) for node in layout.nodes.values()) == 2000
    branch_points = {"n200", "n900", "n1400"}
    assert branch_points <= set(layout.nodes)
    assert all(not layout.nodes[b].is_group for b in branch_points)
    assert "n1999" in layout.nodes and layout.nodes["n1999"].on_active_path
    drawn = sum(len(trace.x) for trace in figure.data if trace.customdata is not None)  # nodes, not legend keys
    assert drawn == len(layout.nodes)
    assert elapsed < 5, f"tree figure for 2,000 messages took {elapsed:.2f}s"
    print(f"tree figure for 2,000 messages: {elapsed * 1000:.0f} ms, {len(layout.nodes)} nodes drawn")



def test_twenty_thousand_messages_and_two_hundred_branches_lay_out_fast(store):
    session = import_session(store, {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "session": {"id": "long"},
                                     "messages": forking_conversation(20_000)})
    started = time.perf_counter()
    tree = SessionTree.of(session)
    read = time.perf_counter() - started
    started = time.perf_counter()
    layout = tree.layout(active_leaf=session.get_latest_leaf_id())
    tree_layout_figure(layout)
    drawn = time.perf_counter() - started
    assert len(layout.nodes) < 700 and layout.lanes == 2
    assert read < 5 and drawn < 2, f"read {read:.2f}s, layout and figure {drawn:.2f}s"
    print(f"20,000 messages: read {read * 1000:.0f} ms, layout and figure {drawn * 1000:.0f} ms, "
          f"{len(layout.nodes)} nodes drawn")
