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
from pathlib import Path

import numpy as np
import pytest
from _importers import bad_input_error

from exactident import CaseFormatError, import_model

# The bytes an attacker wants in the case: six float64 values nobody would guess.
SECRET = np.array([1.5, -2.25, 3.125, 7.0, -0.5, 11.75], dtype="<f8")
INPUT = {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 2]}}
DENSE = {"class_name": "Dense", "config": {"name": "d1", "units": 3, "activation": None, "use_bias": True}}
CONFIG = {"class_name": "Sequential", "config": {"name": "s", "layers": [INPUT, DENSE]}}


@pytest.fixture(autouse=True)
def _no_keras(monkeypatch):
    """The Keras files here are hand-built with h5py (Keras itself would not load them): the reader's
    refusals are what is tested, as without Keras (tests/test_import_keras.py runs Keras' forward check)."""
    from exactident.io.importers import keras_forward

    monkeypatch.setattr(keras_forward, "_import_keras", lambda: None)


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
    """A soft link (only plain members are read) and a filter HDF5 does not know (it would search its plugin
    folders for a library to load)."""
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


def test_hdf5_chunk_bomb_refused_without_inflating(tmp_path, capsys, monkeypatch):
    """A (2, 3) kernel declared as one deflate chunk of 48 bytes whose stored chunk inflates to 4 MiB: HDF5's
    deflate filter would grow its buffer to the whole 4 MiB (h5py shows it reads the dataset); any compressed
    dataset is refused before a chunk is read."""
    h5py = pytest.importorskip("h5py")
    import zlib

    bomb = zlib.compress(bytes(4 * 2**20), 9)

    def make(g, f):
        d = g.create_dataset("d1/kernel:0", shape=(2, 3), dtype="<f8", chunks=(2, 3), compression="gzip")
        d.id.write_direct_chunk((0, 0), bomb, 0)

    path = _legacy_h5(tmp_path / "bomb.h5", make)
    assert len(bomb) < 10_000
    with h5py.File(path, "r") as f:  # the chunk really inflates past its 48 bytes: HDF5 keeps the first 48
        assert f["model_weights/d1/d1/kernel:0"][()].tolist() == [[0.0] * 3] * 2
    reads = []
    monkeypatch.setattr(h5py.Dataset, "__getitem__", lambda self, key: reads.append(self.name))
    err = bad_input_error(capsys, ["import", path])
    assert "model_weights/d1/d1/kernel:0: compressed dataset (deflate): refused" in err
    assert reads == []


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


# -- decompression bombs ---------------------------------------------------------------------------------

MiB = 2**20


def _zero_npy(n_bytes):
    """An .npy of ``n_bytes`` zero bytes (float64 zeros), as bytes."""
    buf = io.BytesIO()
    np.save(buf, np.zeros(n_bytes // 8))
    return buf.getvalue()


def _bomb(path, members, n_bytes, extra=()):
    """A zip of ``members`` deflated .npy members of ``n_bytes`` zeros each (plus ``extra`` (name, bytes))."""
    one = _zero_npy(n_bytes)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in extra:
            z.writestr(name, data)
        for k in range(members):
            z.writestr(f"Z{k}.npy", one)
    return str(path)


def _model_npz(path):
    np.savez(path, W1=np.ones((3, 2)), b1=np.zeros(3), W2=np.ones((1, 3)), b2=np.zeros(1))
    return str(path)


def test_npz_bomb_refused_as_model_and_as_sample(tmp_path, capsys):
    """70 members of 1 MiB of zeros: each under the 64 MiB limit, 70 MiB in all, from a file of ~70 KB."""
    bomb = _bomb(tmp_path / "bomb.npz", 70, MiB)
    assert (tmp_path / "bomb.npz").stat().st_size < MiB
    err = bad_input_error(capsys, ["import", bomb])
    assert "bomb.npz: archive expands to 70.0 MiB, more than the limit 64.0 MiB" in err
    model = _model_npz(tmp_path / "m.npz")
    err = bad_input_error(capsys, ["import", model, "--sample", bomb])
    assert "bomb.npz: archive expands to 70.0 MiB" in err
    err = bad_input_error(capsys, ["check", model, "--sample", bomb])
    assert "bomb.npz: archive expands to 70.0 MiB" in err


def test_zip_ratio_bound(tmp_path, capsys):
    """2 MiB of zeros in a few KB: within the size limit, but more than 100 times the archive's size."""
    bomb = _bomb(tmp_path / "r.npz", 2, MiB)
    ratio = 2 * MiB // (tmp_path / "r.npz").stat().st_size
    assert ratio > 100
    err = bad_input_error(capsys, ["import", bomb])
    assert f"r.npz: archive expands {ratio} times its size (2.0 MiB): refused as a decompression bomb" in err


def test_keras_zip_bomb_refused(tmp_path, capsys):
    bomb = _bomb(tmp_path / "b.keras", 3, MiB, extra=[("config.json", json.dumps(CONFIG)),
                                                      ("model.weights.h5", b"")])
    err = bad_input_error(capsys, ["import", bomb, "--max-bytes", "2M"])
    assert "b.keras: archive expands to 3.0 MiB, more than the limit 2.0 MiB" in err


def test_torch_zip_with_compressed_member_refused(tmp_path, capsys):
    """torch.save never compresses and PyTorch would inflate a member on its own: a deflated member is refused
    before torch is imported."""
    path = tmp_path / "m.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("m/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("m/data/0", bytes(MiB))
    err = bad_input_error(capsys, ["import", str(path)])
    assert "m.pt: m/data.pkl: zip compression method 8 refused (only stored members are read)" in err


def test_zip_of_too_many_members_refused_before_parsing(tmp_path, capsys, monkeypatch):
    """25,000 empty members: a 2 MB file whose directory zipfile would parse into 25,000 objects; refused from
    the directory's size read in the end record, before the directory is parsed."""
    path = tmp_path / "many.npz"
    with zipfile.ZipFile(path, "w") as z:
        for k in range(25_000):
            z.writestr(f"{k:05d}.npy", b"")
    parsed = []
    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", lambda self: parsed.append(1))
    err = bad_input_error(capsys, ["import", str(path)])
    directory = 25_000 * (46 + len("00000.npy"))  # a central directory entry: 46 bytes and the name
    assert f"many.npz: zip directory of {directory / MiB:.1f} MiB (more than about 10,000 members): refused" in err
    assert parsed == []


def _lie_about_size(path, member, declared):
    """Rewrite ``member``'s uncompressed size in its local header and central directory entry."""
    raw = bytearray(Path(path).read_bytes())
    name = member.encode()
    for sig, offset, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = raw.find(sig)
        while at >= 0:
            if raw[at + name_at:at + name_at + len(name)] == name:
                raw[at + offset:at + offset + 4] = declared.to_bytes(4, "little")
            at = raw.find(sig, at + 1)
    Path(path).write_bytes(bytes(raw))


def test_member_whose_declared_size_lies(tmp_path, capsys):
    """A member declaring 200 bytes that inflates to 1 MiB: never more than the 200 bytes is produced (the
    read stops there and the CRC fails): refused as damaged, one line."""
    bomb = _bomb(tmp_path / "lie.npz", 1, MiB)
    _lie_about_size(bomb, "Z0.npy", 200)
    with zipfile.ZipFile(bomb) as z:
        assert z.getinfo("Z0.npy").file_size == 200
    err = bad_input_error(capsys, ["import", bomb])
    assert "lie.npz" in err and ("corrupted" in err or "not a valid .npy" in err)


def test_streaming_budget_does_not_trust_declared_sizes(tmp_path):
    """The streaming count stops at its limit whatever the directory says (here the directory check is
    bypassed: the budget alone stops a 1 MiB member at 64 KiB)."""
    from exactident.io.importers.common import ZipBudget

    bomb = _bomb(tmp_path / "s.npz", 1, MiB)
    with zipfile.ZipFile(bomb) as z, pytest.raises(CaseFormatError, match=r"Z0\.npy: decompressed data passes "
                                                                            r"the limit 65536 bytes"):
        ZipBudget(bomb, 65536).read(z, "Z0.npy")


# -- dependency floors -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "ok"), [("2.10.0", True), ("2.10.0+cpu", True), ("2.13.1+cu126", True),
                                             ("3.0", True), ("2.11.0.dev20260101", True), ("2.9.1", False),
                                             ("2.5.1+cu121", False), ("2.0.0", False), ("2.10.0a0+git1234", False),
                                             ("2.10.0rc3", False), ("garbage", False)])
def test_torch_version_floor(version, ok):
    """torch.load(weights_only=True) has known bypasses before 2.10.0 (CVE-2025-32434 before 2.6,
    CVE-2026-24747 before 2.10): older versions, and pre-releases of 2.10.0, are refused."""
    from exactident.errors import UnsupportedCaseError
    from exactident.io.importers.torch_state_dict import check_torch_version

    if ok:
        check_torch_version(version)
    else:
        with pytest.raises(UnsupportedCaseError, match="too old to load model files safely"):
            check_torch_version(version)


def test_old_torch_refused_before_loading(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    path = tmp_path / "m.pt"
    torch.save({"0.weight": torch.ones(2, 2), "0.bias": torch.zeros(2)}, path)
    loads = []
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a))
    err = bad_input_error(capsys, ["import", str(path)])
    assert f"error: {path}: torch 2.5.1 is too old to load model files safely" in err
    assert loads == []


# -- case and report text: one BOM rule, gzip-compressed files ------------------------------------------

CASE = {"format": "exactident-case/1", "name": "t", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
        "biases": [["1"], ["0"]], "sample": [["0"], ["1"], ["-1/2"]]}


def _run(capsys, argv):
    from exactident.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gzip_case_reads_as_its_text(tmp_path, capsys):
    import gzip

    plain = tmp_path / "c.json"
    plain.write_text(json.dumps(CASE))
    packed = tmp_path / "c.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    code, out_plain, _ = _run(capsys, ["check", "--json", "--no-numeric", str(plain)])
    assert code == 0
    code, out_packed, err = _run(capsys, ["check", "--json", "--no-numeric", str(packed)])
    assert code == 0, err
    a, b = json.loads(out_plain), json.loads(out_packed)
    assert a["verdict"] == b["verdict"] and a["rank_gamma"] == b["rank_gamma"]
    from exactident import check

    assert check(str(packed), numeric=False).verdict == check(str(plain), numeric=False).verdict


def test_gzip_bomb_and_limits_apply_to_the_decompressed_text(tmp_path, capsys):
    import gzip

    # 9 MiB of JSON whitespace in ~9 KB: the decompressed text passes the 8 MiB case limit
    text = json.dumps(CASE)[:-1] + " " * (9 * MiB) + "}"
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(text.encode()))
    assert bomb.stat().st_size < 100_000
    err = bad_input_error(capsys, ["check", str(bomb)])
    assert "bomb.json.gz: decompressed text is larger than the limit of 8 MiB" in err
    # one number of 5000 digits: refused by --max-number-digits as in a plain file, naming the field
    big = tmp_path / "big.json.gz"
    big.write_bytes(gzip.compress(json.dumps(dict(CASE, sample=[["1" * 5000], ["1"], ["2"]])).encode()))
    err = bad_input_error(capsys, ["check", str(big)])
    assert "big.json.gz: sample[0][0]" in err
    # truncated and damaged streams
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(json.dumps(CASE).encode())[:30])
    assert "cut.json.gz: gzip data is truncated" in bad_input_error(capsys, ["check", str(cut)])
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    assert "bad.json.gz: damaged gzip data" in bad_input_error(capsys, ["check", str(bad)])


def test_one_bom_rule_for_cases_and_reports(tmp_path, capsys):
    """A leading UTF-8 byte order mark is dropped from case files and reports alike."""
    import gzip

    case = tmp_path / "c.json"
    case.write_bytes(b"\xef\xbb\xbf" + json.dumps(CASE).encode())
    code, out, err = _run(capsys, ["check", "--json", str(case)])
    assert code == 0, err
    report = tmp_path / "r.json"
    report.write_bytes(b"\xef\xbb\xbf" + out.encode())
    code, _, err = _run(capsys, ["verify-certificate", str(case), str(report)])
    assert code == 0, err
    packed = tmp_path / "r.json.gz"  # and a gzip-compressed report, as a case
    packed.write_bytes(gzip.compress(out.encode()))
    code, _, err = _run(capsys, ["verify-certificate", str(case), str(packed)])
    assert code == 0, err


# -- output: one writer per result file, write failures ----------------------------------------------------

@pytest.fixture
def small_suite(tmp_path):
    from exactident.cli import main

    out = tmp_path / "suite"
    assert main(["generate", "--family", "generic", "--widths", "1,2,1", "--count", "3", "--out", str(out)]) == 0
    return out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only (flock)")
def test_second_suite_run_on_a_locked_output_is_refused(small_suite, tmp_path, capsys):
    """While one run holds the result file (its flock), a second run (resumed or not) writes nothing, exit 2."""
    import fcntl

    from exactident.cli import main

    out = tmp_path / "results.jsonl"
    first = out.open("a")  # the first run, as another process would hold it
    fcntl.flock(first.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        for extra in (["--resume"], []):
            err = bad_input_error(capsys, ["suite", "run", str(small_suite), "--jobs", "1", "--out", str(out), *extra])
            assert "results.jsonl: --out: another exactident suite run is writing this file" in err
            assert out.read_bytes() == b""
    finally:
        first.close()
    # once the first run ends, the file is free: a run writes one line per case, a resumed run none
    assert main(["suite", "run", str(small_suite), "--jobs", "1", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    assert main(["suite", "run", str(small_suite), "--jobs", "1", "--out", str(out), "--resume"]) == 0
    assert out.read_text().splitlines() == lines
    capsys.readouterr()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_disk_full_during_suite_run(small_suite, capsys):
    """A write that fails mid-run (ENOSPC) is "cannot write PATH: reason", one line, exit 1, never an
    internal error (the buffered line must not fail again when the file is closed).  Exit 2: the output
    named cannot be written (docs/cli.md, "Exit status"); 70 is for bugs only."""
    from exactident.cli import main

    assert main(["suite", "run", str(small_suite), "--jobs", "1", "--out", "/dev/full"]) == 2
    err = capsys.readouterr().err
    assert err == "error: cannot write /dev/full: No space left on device\n"


def test_import_checks_its_destination_first(tmp_path, capsys, monkeypatch):
    from exactident.cli import main

    model = _model_npz(tmp_path / "m.npz")
    # a missing folder: refused before the model is read (the model here does not even exist)
    err = bad_input_error(capsys, ["import", str(tmp_path / "absent.npz"), "-o", str(tmp_path / "no" / "c.json")])
    assert f"{tmp_path / 'no' / 'c.json'}: -o: cannot write (no such directory)" in err
    if os.geteuid() != 0:  # root may write into a read-only folder
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            err = bad_input_error(capsys, ["import", model, "-o", str(ro / "c.json")])
            assert "-o: cannot write (no permission to create files in" in err
        finally:
            ro.chmod(0o755)
    # a failure while writing (a full disk): one line naming the file, nothing left behind, exit 2
    from exactident.io import atomic

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "_new_temp", full)
    assert main(["import", model, "-o", str(tmp_path / "c.json"), "--assume-relu-mlp"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot write {tmp_path / 'c.json'}: No space left on device\n"
    assert not (tmp_path / "c.json").exists()
