"""examples/notebook.ipynb executed as ``jupyter nbconvert --execute`` does (nbclient), when installed.

The optional extra ``notebook`` (nbconvert, nbclient, ipykernel) and torch are needed; the test is
skipped without them.  Checked: every cell runs; ``check``'s progress reaches the cell's stderr with
the terminal's stage names; the report, explanation, design and crosscheck are shown as HTML (not
only ``text/plain``) with the verdict; the crosscheck says which verdict it compares with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "notebook.ipynb"


def _outputs(cell, kind):
    out = []
    for o in cell.get("outputs", []):
        if kind == "stderr" and o.get("output_type") == "stream" and o.get("name") == "stderr":
            out.append(o["text"])
        elif kind in o.get("data", {}):
            out.append(o["data"][kind])
    return "".join(out)


def test_notebook_runs_with_progress_and_html():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_source = {c.source.splitlines()[0]: c for c in code}
    checked = by_source["report = exactident.check(case, progress=True)"]
    assert "forward pass" in _outputs(checked, "stderr") and "ranks mod p" in _outputs(checked, "stderr")
    html = _outputs(checked, "text/html")
    assert "<table>" in html and "verdict" in html and "rank Gamma" in html
    assert "Explanation" in _outputs(by_source["ex = exactident.explain(case, report=report, progress=True)"],
                                     "text/html")
    assert "Design" in _outputs(by_source["exactident.design(case, report=report, progress=True)"], "text/html")
    cc = _outputs(by_source["cc = exactident.crosscheck(case, progress=True)"], "text/html")
    assert "rank rules:" in cc and "check&#x27;s verdict" in cc
    assert _outputs(by_source["from IPython.display import Image"], "image/png")
