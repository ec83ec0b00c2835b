"""Hostile input files: HDF5 data stored outside the file, decompression bombs, non-regular files.

Each test builds the smallest hostile file itself and checks the CLI's refusal (exit 2, one line,
no traceback) or the library's ``CaseFormatError``.  The right answer is that nothing outside the
model file reaches the case: where a file points at bytes elsewhere, the test first shows with h5py
alone that those bytes are really reachable through the file, then that the import refuses it.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest
from _importers import bad_input_error

from exactident import CaseFormatError, import_model

# The bytes an attacker wants in the case: six float64 values nobody would guess.
SECRET = np.array([1.5, -2.25, 3.125, 7.0, -0.5, 11.75], dtype="<f8")
INPUT = {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 2]}}
DENSE = {"class_name": "Dense", "config": {"name": "d1", "units": 3, "activation": None, "use_bias": True}}
CONFIG = {"class_name": "Sequential", "config": {"name": "s", "layers": [INPUT, DENSE]}}


def _legacy_h5(path, make_kernel):
    """A legacy Keras .h5 of one Dense(2 -> 3) layer; ``make_kernel(group)`` creates ``d1/kernel``."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        f.attrs["model_config"] = json.dumps(CONFIG)
        g = f.create_group("model_weights/d1")
        g.attrs["weight_names"] = [b"d1/kernel:0", b"d1/bias:0"]
        make_kernel(g, f)
        g.create_dataset("d1/bias:0", data=np.zeros(3))
    return str(path)


def _plain(g, f):
    g.create_dataset("d1/kernel:0", data=np.ones((2, 3)))


def test_plain_legacy_h5_imports(tmp_path):
    """The control: the same file with its kernel stored inside it imports."""
    case = import_model(_legacy_h5(tmp_path / "ok.h5", _plain))
    assert case.widths == (2, 3)


def _external_storage(relative):
    def make(g, f):
        g.create_dataset("d1/kernel:0", shape=(2, 3), dtype="<f8", external=[(relative, 0, SECRET.nbytes)])
    return make


@pytest.mark.parametrize("where", ["secret.bin", "../secret.bin"])
def test_external_raw_storage_refused(tmp_path, capsys, where):
    h5py = pytest.importorskip("h5py")
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / where).resolve().write_bytes(SECRET.tobytes())
    path = _legacy_h5(folder / "m.h5", _external_storage(where))
    cwd = os.getcwd()
    os.chdir(folder)  # HDF5 resolves external storage from the working directory
    try:
        with h5py.File(path, "r") as f:  # the threat is real: h5py alone reads the secret through the file
            assert f["model_weights/d1/d1/kernel:0"][()].ravel().tolist() == SECRET.tolist()
        err = bad_input_error(capsys, ["import", path])
    finally:
        os.chdir(cwd)
    assert "model_weights/d1/d1/kernel:0: dataset stored in external file" in err
    assert "Traceback" not in err and "1.5" not in err


def test_virtual_dataset_refused(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=SECRET.reshape(2, 3))

    def make(g, f):
        layout = h5py.VirtualLayout(shape=(2, 3), dtype="<f8")
        layout[:] = h5py.VirtualSource(str(src), "x", shape=(2, 3))
        g.create_virtual_dataset("d1/kernel:0", layout)

    path = _legacy_h5(tmp_path / "v.h5", make)
    with h5py.File(path, "r") as f:
        assert f["model_weights/d1/d1/kernel:0"][()].ravel().tolist() == SECRET.tolist()
    err = bad_input_error(capsys, ["import", path])
    assert "model_weights/d1/d1/kernel:0: virtual dataset" in err


@pytest.mark.parametrize("target", ["other.h5", "../other.h5"])
def test_external_link_refused(tmp_path, capsys, target):
    h5py = pytest.importorskip("h5py")
    folder = tmp_path / "models"
    folder.mkdir()
    with h5py.File((folder / target).resolve(), "w") as f:
        f.create_dataset("k", data=SECRET.reshape(2, 3))

    def make(g, f):
        g["d1/kernel:0"] = h5py.ExternalLink(target, "/k")

    path = _legacy_h5(folder / "l.h5", make)
    err = bad_input_error(capsys, ["import", path])
    assert "model_weights/d1/d1/kernel:0: external link to" in err


def test_soft_link_and_plugin_filter_refused(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")

    def soft(g, f):
        f.create_dataset("elsewhere", data=np.ones((2, 3)))
        g["d1/kernel:0"] = h5py.SoftLink("/elsewhere")

    assert "model_weights/d1/d1/kernel:0: soft link" in bad_input_error(
        capsys, ["import", _legacy_h5(tmp_path / "s.h5", soft)])

    def plugin(g, f):  # filter 31999 is registered nowhere: reading it would search the plugin folders
        g.create_dataset("d1/kernel:0", data=np.ones((2, 3)), chunks=(2, 3), compression=31999,
                         allow_unknown_filter=True)

    assert "HDF5 filter 31999 is not built in" in bad_input_error(
        capsys, ["import", _legacy_h5(tmp_path / "p.h5", plugin)])


def test_keras_zip_weights_with_external_storage_refused(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    (tmp_path / "secret.bin").write_bytes(SECRET.tobytes())
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        f.create_dataset("layers/d1/vars/0", shape=(2, 3), dtype="<f8",
                         external=[(str(tmp_path / "secret.bin"), 0, SECRET.nbytes)])
        f.create_dataset("layers/d1/vars/1", data=np.zeros(3))
    with zipfile.ZipFile(tmp_path / "m.keras", "w") as z:
        z.writestr("config.json", json.dumps(CONFIG))
        z.writestr("model.weights.h5", buf.getvalue())
    with pytest.raises(CaseFormatError, match=r"model\.weights\.h5: layers/d1/vars/0: dataset stored in external"):
        import_model(tmp_path / "m.keras")
