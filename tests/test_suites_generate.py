"""``exactident generate``: every family's promise on generated cases, determinism, refusals.

The promised properties are checked by ``suite_props`` (Fractions, the sympy
oracle, numpy's float32), not by exactident.suites' own checks.  The
``expected`` block is compared with a fresh ``check()`` of the written file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from suite_props import PROPERTIES, load_fractions

from exactident.check import check
from exactident.cli import main
from exactident.errors import UnsupportedCaseError
from exactident.io.case import dump_case, load_case
from exactident.suites.families import FAMILIES
from exactident.suites.generate import plan_requests
from exactident.suites.rng import HashRng, derive_key

ROOT = Path(__file__).resolve().parent.parent
ARCHS = {"generic": ["2,2,2", "1,2,2,1"], "boundary": ["2,2,1", "2,2,2,1", "1,3,2,1"], "degenerate": ["2,2,2"],
         "dead-neuron": ["2,2,2,1"], "all-active": ["1,3,2"], "twins": ["2,3,2,1"], "gap": ["2,2,2"],
         "rescaled": ["2,2,1", "1,2,2,1"], "near-kink": ["2,3,1", "1,2,2,1"], "float32-trap": ["1,2,1", "2,2,2"],
         "trained": ["2,3,2"]}


def _generate(tmp_path, family, widths, count=3, seed=7, extra=()):
    out = tmp_path / "suite"
    assert main(["generate", "--family", family, "--widths", widths, "--count", str(count), "--seed", str(seed),
                 "--out", str(out), *extra]) == 0
    return sorted((out / family).glob("*.json"))


#: Families writing format-2 layer graphs: exercised by tests/test_suites_architectures.py.
GRAPH_FAMILIES = {"residual-mlp", "leaky-mlp", "prelu-mlp", "conv1d-pool"}


def test_every_family_is_exercised():
    assert set(ARCHS) | GRAPH_FAMILIES == set(FAMILIES)
    assert set(ARCHS) == set(PROPERTIES)


@pytest.mark.parametrize("family", sorted(ARCHS))
def test_family_promise_holds_and_expected_is_the_engines(tmp_path, family, capsys):
    if FAMILIES[family].needs:
        pytest.importorskip(FAMILIES[family].needs)
    for widths in ARCHS[family]:
        paths = _generate(tmp_path / widths.replace(",", "x"), family, widths)
        assert len(paths) == 3
        for path in paths:
            obj, w, W, b, X = load_fractions(path)
            assert obj["generator"]["family"] == family and w == [int(t) for t in widths.split(",")]
            assert PROPERTIES[family](obj, w, W, b, X) == [], path.name
            report = check(load_case(path), numeric=False, all_ranks=True).to_dict()
            assert all(report[k] == v for k, v in obj["expected"].items()), path.name
    capsys.readouterr()


def test_boundary_covers_its_variants(tmp_path):
    paths = _generate(tmp_path, "boundary", "2,2,2,1", count=6)
    variants = [json.loads(p.read_text())["generator"]["parameters"]["variant"] for p in paths]
    assert variants == ["layer-1", "deep", "fn-preserving"] * 2
    layers = [json.loads(p.read_text())["generator"]["parameters"]["tie"]["layer"] for p in paths]
    assert layers[:3] == [1, 2, 2]


def test_generic_cycles_below_at_above(tmp_path):
    paths = _generate(tmp_path, "generic", "2,3,1", count=3)
    # dim = 2*3 + 3*1 + 1 = 10, N_L = 1: n = 9, 10, 15 by hand (below, at, above = 10 + max(2, 10 // 2))
    assert [len(json.loads(p.read_text())["sample"]) for p in paths] == [9, 10, 15]


def test_n_samples_option(tmp_path):
    paths = _generate(tmp_path, "generic", "2,2,1", count=2, extra=["--n-samples", "4"])
    assert all(len(json.loads(p.read_text())["sample"]) == 4 for p in paths)
    assert all("-n4-" in p.name for p in paths)


def _run_generate(cwd: Path, hashseed: str) -> dict[str, str]:
    code = ("from exactident.cli import main\n"
            "for fam, w in [('generic', '2,2,1'), ('boundary', '2,2,2,1'), ('gap', '2,2,2'), ('rescaled', '1,2,1'),"
            " ('near-kink', '2,2,1'), ('float32-trap', '2,2,2'), ('twins', '1,2,1'), ('dead-neuron', '2,2,1'),"
            " ('degenerate', '1,2,1'), ('all-active', '2,2,1')]:\n"
            "    assert main(['generate', '--family', fam, '--widths', w, '--count', '2', '--seed', '3',"
            " '--out', 'out']) == 0\n")
    env = dict(os.environ, PYTHONHASHSEED=hashseed, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True, capture_output=True)
    return {p.relative_to(cwd).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((cwd / "out").rglob("*.json"))}


def test_same_arguments_same_bytes_across_processes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _run_generate(tmp_path / "a", "1"), _run_generate(tmp_path / "b", "2")
    assert len(first) == 21  # 10 families x 2 cases + the manifest
    assert first == second


def test_a_case_does_not_depend_on_how_many_were_asked_for(tmp_path):
    one = _generate(tmp_path / "one", "generic", "2,2,1", count=1)[0].read_bytes()
    three = _generate(tmp_path / "three", "generic", "2,2,1", count=3)[0].read_bytes()
    assert one == three


def test_written_cases_are_canonical(tmp_path):
    for path in _generate(tmp_path, "boundary", "2,2,1", count=2):
        assert dump_case(load_case(path)) == path.read_text(encoding="utf-8")


def test_hash_rng_is_sha256_counter_mode():
    # Recomputed here with hashlib alone: the stream is SHA-256(key || counter), the key SHA-256 of canonical JSON.
    key = hashlib.sha256(b'["x",1]').digest()
    assert derive_key("x", 1) == key
    first = int.from_bytes(hashlib.sha256(key + (0).to_bytes(8, "big")).digest(), "big")
    assert HashRng("x", 1).below(2**256) == first
    assert HashRng("x", 1).below(2**8) == first >> 248  # 8 bits, always accepted


def test_list_prints_every_family(capsys):
    assert main(["generate", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}" in out for name in FAMILIES) and out.count("promise:") == len(FAMILIES)


@pytest.mark.parametrize(("family", "widths", "match"), [
    ("gap", "2,3,1", r"L = 2 and N_L = 1"),
    ("gap", "3,2", r"L = 1"),
    ("twins", "2,1,1,1", r"one neuron"),
    ("boundary", "2,1", r"no hidden neuron"),
    ("trained", "20,3,1", r"no bundled data set"),
])
def test_impossible_requests_are_refused_before_writing(tmp_path, capsys, family, widths, match):
    out = tmp_path / "s"
    assert main(["generate", "--family", family, "--widths", widths, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot produce" in err and __import__("re").search(match, err)
    assert not out.exists() or not any(out.rglob("*.json"))
    with pytest.raises(UnsupportedCaseError, match=match):
        plan_requests(family, [int(t) for t in widths.split(",")], 1, 0, None)


@pytest.mark.parametrize(("argv", "match"), [
    (["generate", "--family", "colour", "--widths", "2,1", "--out", "X"], r"unknown family 'colour'"),
    (["generate", "--family", "generic", "--out", "X"], r"--widths is required"),
    (["generate", "--family", "generic", "--widths", "2,1"], r"--out DIR is required"),
    (["generate", "--suite", "suite-v9", "--out", "X"], r"unknown suite 'suite-v9'"),
    (["generate", "--family", "generic", "--widths", "2", "--out", "X"], r"at least two positive integers"),
    (["generate", "--family", "generic", "--widths", "2,x", "--out", "X"], r"comma-separated"),
    (["generate", "--family", "generic", "--widths", "2,1", "--count", "0", "--out", "X"], r"positive integer"),
    (["generate", "--family", "generic", "--widths", "2,1", "--seed", "-1", "--out", "X"], r"non-negative"),
    (["generate", "--family", "generic", "--list"], r"not allowed with"),
])
def test_bad_generate_usage_exits_2(tmp_path, capsys, monkeypatch, argv, match):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert __import__("re").search(match, capsys.readouterr().err)


def test_out_must_be_a_folder(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["generate", "--family", "generic", "--widths", "2,1", "--out", str(tmp_path / "f")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_search_exhaustion_says_so(monkeypatch):
    from exactident.suites.families import common
    from exactident.suites.generate import Request, generate_case

    monkeypatch.setattr(common.search, "__defaults__", (0,))  # no draw allowed
    with pytest.raises(UnsupportedCaseError, match=r"family 'generic', widths \[2, 2, 1\], case 0: no clean random "
                                                   r"network found in 0 draws"):
        generate_case(Request("generic", (2, 2, 1), 0, 0))


def test_clean_keeps_hand_written_files_and_manifest_counts(tmp_path, capsys):
    out = tmp_path / "suite"
    _generate(tmp_path, "generic", "2,2,1", count=2)
    hand = out / "hand.json"
    hand.write_text((ROOT / "cases" / "tiny-111-kink.json").read_text())
    assert main(["generate", "--family", "twins", "--widths", "1,2,1", "--count", "1", "--out", str(out),
                 "--clean"]) == 0
    assert "removed 2 old cases" in capsys.readouterr().out
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json"))
    assert files == ["hand.json", "manifest.json", "twins/twins-1x2x1-s0-000.json"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["family"] == {"(hand-written)": 1, "twins": 1}
    assert manifest["regenerate"] == [
        f"exactident generate --family twins --widths 1,2,1 --count 1 --seed 0 --out {out}"]
