"""examples/notebook.ipynb executed as ``jupyter nbconvert --execute`` does (nbclient), when installed.

The optional extra ``notebook`` (nbconvert, nbclient, ipykernel), torch and matplotlib (the notebook's
eighth cell plots the crosscheck) are needed; the test is skipped without them.  Checked: every cell
runs; ``check``'s progress is one display output updated in place (one line in the saved notebook and
in its static HTML export, naming the terminal's stage names), never a stream of redraws on stderr;
the report, explanation, design and crosscheck are shown as HTML (not only ``text/plain``) with the
verdict; the crosscheck says which verdict it compares with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")
pytest.importorskip("matplotlib")  # the plot cell; without it the run stops there (docs/notebook.md)

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "notebook.ipynb"


def _outputs(cell, kind):
    out = []
    for o in cell.get("outputs", []):
        if kind == "stderr" and o.get("output_type") == "stream" and o.get("name") == "stderr":
            out.append(o["text"])
        elif kind in o.get("data", {}):
            out.append(o["data"][kind])
    return "".join(out)


def test_notebook_runs_with_progress_and_html(monkeypatch):
    import os

    # the kernel imports the tree under test, not an installed copy
    monkeypatch.setenv("PYTHONPATH", str(NOTEBOOK.parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_source = {c.source.splitlines()[0]: c for c in code}
    checked = by_source["report = exactident.check(case, progress=True)"]
    # the progress: one display output, its last state "NAME: done (stages...) [mm:ss]", nothing on stderr
    lines = [o["data"]["text/plain"] for o in checked["outputs"] if o.get("output_type") == "display_data"
             and "text/plain" in o.get("data", {}) and ": done" in o["data"]["text/plain"]]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert "forward pass" in lines[0] and "ranks mod p" in lines[0]
    assert _outputs(checked, "stderr") == ""
    for source in ("ex = exactident.explain(case, report=report, progress=True)",
                   "exactident.design(case, report=report, progress=True)"):
        done = [o for o in by_source[source]["outputs"] if ": done" in o.get("data", {}).get("text/plain", "")]
        assert len(done) == 1 and _outputs(by_source[source], "stderr") == "", source
    # exported to static HTML, as nbconvert does: the progress is one line, not one per redraw
    nbconvert = pytest.importorskip("nbconvert")
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert html.count(lines[0].split(" [")[0]) == 1
    html = _outputs(checked, "text/html")
    assert "<table>" in html and "verdict" in html and "rank Gamma" in html
    assert "Explanation" in _outputs(by_source["ex = exactident.explain(case, report=report, progress=True)"],
                                     "text/html")
    assert "Design" in _outputs(by_source["exactident.design(case, report=report, progress=True)"], "text/html")
    cc = _outputs(by_source["cc = exactident.crosscheck(case, progress=True)"], "text/html")
    assert "rank rules:" in cc and "check&#x27;s verdict" in cc
    assert _outputs(by_source["from IPython.display import Image"], "image/png")
