"""A report about a model file verifies wherever the file is named from; its content is what is compared.

The report of ``check sub/tiny.keras --sample sub/tiny_X.npy`` records the paths as typed.  The same bytes
named ``./sub/tiny.keras``, by an absolute path, from inside ``sub/`` or through the case file ``import``
writes must verify (a new user's report, made in a notebook, re-checked from another folder, was refused:
the paths were compared as text).  What identifies the files, their SHA-256 digests, is still compared, and so
is the file name.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import pytest

from exactident.cli import main

DATA = Path(__file__).resolve().parent / "data" / "keras"


@contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """``(folder, report)``: the model and its sample in ``folder/sub``, the report made from ``folder``."""
    pytest.importorskip("h5py")
    folder = tmp_path_factory.mktemp("provenance")
    (folder / "sub").mkdir()
    for name in ("tiny.keras", "tiny_X.npy"):
        shutil.copy(DATA / name, folder / "sub" / name)
    out = io.StringIO()
    with _cwd(folder), redirect_stdout(out):
        assert main(["check", "sub/tiny.keras", "--sample", "sub/tiny_X.npy", "--json", "--no-numeric"]) == 0
    rep = json.loads(out.getvalue())
    assert rep["provenance"]["source_file"] == "sub/tiny.keras"  # as typed: the premise of the test
    return folder, rep


def _verify(where: Path, model: str, rep: dict, sample: str | None, monkeypatch, capsys) -> tuple[int, str]:
    path = where.parent / "report.json" if where.name == "sub" else where / "report.json"
    path.write_text(json.dumps(rep))
    monkeypatch.chdir(where)
    capsys.readouterr()
    code = main(["verify-certificate", model, str(path)] + (["--sample", sample] if sample else []))
    return code, capsys.readouterr().out


@pytest.mark.parametrize("inside, model, sample", [
    (False, "sub/tiny.keras", "sub/tiny_X.npy"),
    (False, "./sub/tiny.keras", "sub/tiny_X.npy"),
    (False, "ABS", "ABS"),
    (True, "tiny.keras", "tiny_X.npy"),
])
def test_the_same_files_named_otherwise_verify(report, inside, model, sample, monkeypatch, capsys):
    folder, rep = report
    if model == "ABS":
        model, sample = str(folder / "sub" / "tiny.keras"), str(folder / "sub" / "tiny_X.npy")
    code, out = _verify(folder / "sub" if inside else folder, model, rep, sample, monkeypatch, capsys)
    assert code == 0, out


def test_through_the_imported_case_file(report, monkeypatch, capsys):
    folder, rep = report
    monkeypatch.chdir(folder)
    assert main(["import", "./sub/tiny.keras", "--sample", "sub/tiny_X.npy", "-o", "case.json"]) == 0
    code, out = _verify(folder, "case.json", rep, None, monkeypatch, capsys)
    assert code == 0, out


def test_the_run_that_imported_is_not_a_claim_about_the_files(report, monkeypatch, capsys):
    folder, rep = report
    prov = dict(rep["provenance"], importer="exactident 99.0", forward_check="not run: no framework here")
    code, out = _verify(folder, "sub/tiny.keras", dict(rep, provenance=prov), "sub/tiny_X.npy", monkeypatch, capsys)
    assert code == 0, out


@pytest.mark.parametrize("field, value, message", [
    ("sha256", "0" * 64, "provenance.sha256: report says"),
    ("sample_sha256", "0" * 64, "provenance.sample_sha256: report says"),
    ("source_file", "sub/other.keras", "(file names differ)"),
    ("source_file", None, "provenance.source_file: the report has no"),
    ("weight_dtype", "float64", "provenance.weight_dtype: report says"),
])
def test_what_identifies_the_files_is_compared(report, field, value, message, monkeypatch, capsys):
    folder, rep = report
    prov = dict(rep["provenance"], **{field: value})
    if value is None:
        del prov[field]
    code, out = _verify(folder, "sub/tiny.keras", dict(rep, provenance=prov), "sub/tiny_X.npy", monkeypatch, capsys)
    assert code == 3 and message in out, out


def test_a_sample_given_in_memory_names_no_file(report, monkeypatch, capsys):
    """A report made in a notebook from the sample as an array names no sample file: verified with the same
    rows from the file, it is the same case (its claims are recomputed from those rows)."""
    folder, rep = report
    prov = {k: v for k, v in rep["provenance"].items() if k not in ("sample_file", "sample_sha256")}
    code, out = _verify(folder, "sub/tiny.keras", dict(rep, provenance=prov), "sub/tiny_X.npy", monkeypatch, capsys)
    assert code == 0, out


@pytest.mark.parametrize("field", ["forward_check", "crosscheck"])
def test_a_check_the_import_never_had_is_refused(field, monkeypatch, capsys, tmp_path):
    """The importing run's fields are not compared as text, but claimed where the case has none (an .npz read
    under --assume-relu-mlp has no forward check) they are refused."""
    from _importers import write_weights_npz

    write_weights_npz(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "m.npz", "--sample", "X.npy", "--assume-relu-mlp", "--json", "--no-numeric"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert field not in rep["provenance"]
    forged = dict(rep, provenance=dict(rep["provenance"], **{field: "torch forward: max |difference| 0"}))
    (tmp_path / "r.json").write_text(json.dumps(forged))
    code = main(["verify-certificate", "m.npz", "r.json", "--sample", "X.npy", "--assume-relu-mlp"])
    out = capsys.readouterr().out
    assert code == 3 and f"provenance.{field}: the case's has no" in out, out


def test_a_layer_graph_case_without_provenance_refuses_one_in_the_report(tmp_path, capsys):
    """As for a plain case: the report of a format-2 case file that has no provenance claims none."""
    case = str(Path(__file__).resolve().parent.parent / "cases" / "architectures" / "leaky-mlp.json")
    assert main(["check", case, "--json", "--no-numeric"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert "provenance" not in rep
    forged = dict(rep, provenance={"source_file": "resnet50.onnx", "sha256": "0" * 64, "format": "onnx"})
    (tmp_path / "r.json").write_text(json.dumps(forged))
    code = main(["verify-certificate", case, str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 3 and "provenance: report says" in out, out
