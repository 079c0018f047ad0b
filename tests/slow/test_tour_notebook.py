"""The tour notebook executed headless, a real kernel and the embedded model, from the first cell to the last."""
import time

import nbformat
from nbclient import NotebookClient

from tests.helpers import ROOT, TableCells

TOUR = ROOT / "examples" / "memorylab_tour.ipynb"


def tagged_outputs(notebook, tag):
    cell = next(c for c in notebook.cells if tag in c.metadata.get("tags", []))
    return cell.outputs


def html_of(notebook, tag):
    return next(o["data"]["text/html"] for o in tagged_outputs(notebook, tag) if "text/html" in o.get("data", {}))


def test_the_tour_runs_top_to_bottom_offline():
    notebook = nbformat.read(TOUR, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the tour without outputs"
    started = time.perf_counter()
    NotebookClient(notebook, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(TOUR.parent)}}).execute()  # raises on any cell error
    print(f"the tour ran in {time.perf_counter() - started:.1f} s")
    errors = [o for c in notebook.cells for o in c.get("outputs", ()) if o.output_type == "error"]
    assert not errors
    assert 'class="memorylab-session"' in html_of(notebook, "session-summary")
    assert ["middle (summarized)", "5", "m004 … m008"] == TableCells(html_of(notebook, "plan")).rows[2][:3]
    assert html_of(notebook, "prompt").startswith("<pre")
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in tagged_outputs(notebook, "tree"))
    assert "overlay 1 covers m004..m008" in "".join(o.get("text", "") for o in tagged_outputs(notebook, "compact"))
    assert TableCells(html_of(notebook, "compare-plans")).rows[0][0] == "setting"
    assert "memorylab-diagnostics" in html_of(notebook, "recall")
    assert TableCells(html_of(notebook, "experiment-spec")).rows[0] == ["arm", "strategy", "settings"]
    leaderboard = TableCells(html_of(notebook, "experiment-results")).rows
    assert leaderboard[1][:3] == ["full-history", "none", "1.00"] and len(leaderboard) == 6  # a header, 5 arms
    pareto = tagged_outputs(notebook, "experiment-pareto")
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in pareto)
