"""``exactident crosscheck`` and :mod:`exactident.crosscheck.core`: situations with exact answers.

Each expected verdict or count is derived in the test (hand rows of Gamma, the
rescaling invariance, bounds on singular values), not read off the float code.

SPEC §2's network ``f = 3 relu(2x + 1) + b_2`` recurs: with ``W_2`` fixed,
``tau = (w_1, b_1, b_2)``; an active sample ``x`` has Gamma row ``(3x, 3, 1)`` and
alpha row ``(x, 1, 1)``, an inactive one ``(0, 0, 1)`` for both.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from exactident.check import check
from exactident.cli import main
from exactident.crosscheck.command import expand_paths
from exactident.crosscheck.core import crosscheck_case, summarize
from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.case import load_case, parse_case, write_case
from exactident.numeric.tolerance import Policy, default_policies

ROOT = Path(__file__).resolve().parents[1]
TOL = ROOT / "cases" / "tolerance"
EPS64 = np.finfo(np.float64).eps


def _s(q) -> str:
    q = Fraction(q)
    return f"{q.numerator}/{q.denominator}"


def _spec_case(name, sample):
    return parse_case({"format": "exactident-case/1", "name": name, "widths": [1, 1, 1],
                       "weights": [[["2"]], [["3"]]], "biases": [["1"], ["0"]],
                       "sample": [[_s(x)] for x in sample]})


def _svd(rows):
    return np.linalg.svd(np.array(rows, dtype=np.float64), compute_uv=False)


# --- rescaling invariance ---------------------------------------------------------------------


def _rescale(case, k):
    """Hidden neuron 0: incoming weights and bias times 10^k, outgoing weights over 10^k."""
    obj = {"format": "exactident-case/1", "name": f"k{k}", "widths": list(case.widths)}
    net = case.network
    c = Fraction(10) ** k
    W = [[[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())]
         for M in net.W]
    b = [[Fraction(int(v.p), int(v.q)) for v in bl] for bl in net.b]
    W[0][0] = [w * c for w in W[0][0]]
    b[0][0] *= c
    for row in W[1]:
        row[0] /= c
    obj["weights"] = [[[_s(v) for v in row] for row in Wl] for Wl in W]
    obj["biases"] = [[_s(v) for v in bl] for bl in b]
    obj["sample"] = [[_s(Fraction(int(v.p), int(v.q))) for v in row] for row in case.X]
    return parse_case(obj)


def test_rescaled_cases_have_the_unscaled_exact_verdict():
    """Positive homogeneity: relu(c z) = c relu(z) for c > 0, so f and the verdict do not change."""
    base = _rescale(load_case(TOL / "rescale-k00.json"), 0)
    ref = check(base, numeric=False, all_ranks=True)
    assert ref.verdict == "identifiable"
    for k in (3, 13, 18):
        shipped = load_case(TOL / f"rescale-k{k:02d}.json")
        assert shipped.network == _rescale(base, k).network  # the file is the rescaling it claims
        r = check(shipped, numeric=False, all_ranks=True)
        assert (r.verdict, r.rank_gamma, r.rank_a) == (ref.verdict, ref.rank_gamma, ref.rank_a)
        assert shipped.expected["verdict"] == ref.verdict


def test_numpy_default_flips_once_and_for_good():
    """Gamma_k = Gamma_0 D_k with D_k scaling neuron 0's 3 incoming columns by 10^-k.

    So sigma_min(Gamma_k) <= 10^-k ||Gamma_0||_F while sigma_max(Gamma_k) >= ||b_2 column|| =
    sqrt(12): numpy's cut 12 eps sigma_max must drop a singular value once
    10^-k ||Gamma_0||_F / sqrt(12) < 12 eps.  Before the flip it is right, after it wrong.
    """
    results = [crosscheck_case(load_case(TOL / f"rescale-k{k:02d}.json"), [Policy("float64", "numpy-default")])
               for k in range(19)]
    right = [r.outcomes[0].right_verdict for r in results]
    first = right.index(False)
    assert all(right[:first]) and not any(right[first:])
    g0 = np.array(results[0].spectra["float64"].gamma_sv)
    bound_k = next(k for k in range(40) if 10.0 ** -k * np.sqrt((g0 ** 2).sum()) / np.sqrt(12) < 12 * EPS64)
    assert first <= bound_k
    assert results[0].outcome("float64/numpy-default").right_ranks


# --- kinks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,verdict", [
    # x3 active: three rows (3x, 3, 1) span 2 dims, alpha rows (x, 1, 1) too: 2 = 2 < 3.
    ("kink-plus-1e-12", "not-identifiable"),
    # x3 inactive: rows (0,3,1), (3,3,1), (0,0,1) are independent: rank 3 = dim.
    ("kink-minus-1e-12", "identifiable"),
    ("kink-minus-1e-17", "identifiable"),
    ("kink-decimal-plus-1e-12", "not-identifiable"),
    ("kink-decimal-minus-1e-12", "identifiable"),
])
def test_near_kink_exact_verdicts(name, verdict):
    case = load_case(TOL / f"{name}.json")
    assert check(case, numeric=False).verdict == verdict == case.expected["verdict"]


def test_kink_rounding_makes_float_wrong_beyond_any_tolerance():
    """-1/2 - 1e-17 rounds to -1/2 in binary64: z = 0 counts active, so the float rows are
    (0,3,1), (3,3,1), (-3/2,3,1) -- rank 2 -- and the float verdict is not-identifiable for
    every tolerance above the round-off, while the exact one is identifiable."""
    r = crosscheck_case(load_case(TOL / "kink-minus-1e-17.json"))
    assert float(Fraction(-1, 2) - Fraction(1, 10**17)) == -0.5
    assert r.verdict == "identifiable" and r.spectra["float64"].n_pattern_flips == 1
    for pol in ("float64/numpy-default", "float64/rtol=1e-06", "float64/rtol=1e-09"):
        assert r.outcome(pol).verdict == "not-identifiable" and not r.outcome(pol).right_verdict
    # -1e-12 survives binary64 (spacing 2^-53 near 1/2) but not binary32 (spacing 2^-25).
    r12 = crosscheck_case(load_case(TOL / "kink-minus-1e-12.json"))
    assert r12.spectra["float64"].n_pattern_flips == 0 and r12.spectra["float32"].n_pattern_flips == 1
    assert not r12.outcome("float32/numpy-default").right_verdict


# --- near duplicates and tiny biases ----------------------------------------------------------


def test_near_duplicate_sample():
    """Two samples 1e-10 apart with the same pattern: their Gamma rows differ by at most
    1e-10 * max|W_2| * sqrt(3) <= 2.6e-10, so sigma_10 <= 2.6e-10, while sigma_1 >= 1 (the
    b_2 column is all ones, norm sqrt(10)).  rtol = 1e-9 (and 1e-6) must cut it: wrong."""
    case = load_case(TOL / "near-duplicate.json")
    r = crosscheck_case(case)
    assert r.verdict == "identifiable" and r.rank_gamma == r.dim == 10
    assert not r.outcome("float64/rtol=1e-09").right_ranks
    assert not r.outcome("float64/rtol=1e-06").right_ranks
    lo, hi = r.spectra["float64"].band(10, r.pattern_rank_a)["gamma_rel"]
    assert lo == 0.0 and hi <= 2.6e-10 / np.sqrt(10)
    x0, x9 = (float(Fraction(int(v.p), int(v.q))) for v in (case.X[0][0], case.X[9][0]))
    assert np.float32(x0) == np.float32(x9)  # float32 cannot tell the two samples apart


def test_tiny_bias_rank_by_hand():
    """relu(x + t), relu(x - t), t = 1e-10, W_2 = (1, 2) fixed: tau = (w_1, w_2, b_1, b_2', b_out),
    row (a_1 x, 2 a_2 x, a_1, 2 a_2, 1).  Samples -1, -t/2, t/2, 1, 2, 3 have a_1 = 0,1,1,1,1,1
    and a_2 = 0,0,0,1,1,1.  The rows below have rank 5 = dim (checked over Q by sympy), so
    identifiable.  Replacing row t/2 by row -t/2 (a change of norm t) drops the rank, so
    sigma_5 <= t while sigma_1 >= ||(3,6,1,2,1)|| = sqrt(51): rtol = 1e-9 is wrong."""
    from sympy import Matrix, Rational

    t = Rational(1, 10**10)
    rows = [(0, 0, 0, 0, 1), (-t / 2, 0, 1, 0, 1), (t / 2, 0, 1, 0, 1),
            (1, 2, 1, 2, 1), (2, 4, 1, 2, 1), (3, 6, 1, 2, 1)]
    assert Matrix(rows).to_DM().rank() == 5
    r = crosscheck_case(load_case(TOL / "tiny-bias.json"))
    assert (r.rank_gamma, r.dim, r.verdict) == (5, 5, "identifiable")
    assert not r.outcome("float64/rtol=1e-09").right_verdict
    assert r.spectra["float64"].band(5, r.pattern_rank_a)["gamma_rel"][1] <= 1e-10 / np.sqrt(51)


def test_wide_sample_agrees():
    """200 samples for dim 10: exact identifiable; the float64 default must agree."""
    r = check(load_case(TOL / "wide.json"))
    assert r.verdict == "identifiable" and r.numeric["agrees"] is True


def test_all_active_float32_with_float64_eps_is_wrong():
    """Derivation in tests/test_numeric.py::_all_active_case: exact ranks 3 = 3 < 10."""
    r = crosscheck_case(load_case(TOL / "all-active-f32.json"))
    assert (r.verdict, r.rank_gamma, r.rank_a) == ("not-identifiable", 3, 3)
    assert r.outcome("float32/float64-eps").rank_gamma > 3
    assert r.outcome("float32/numpy-default").right_ranks


# --- suite summary on a hand-built folder -----------------------------------------------------


@pytest.fixture
def folder(tmp_path):
    write_case(_spec_case("a-all-active", [0, 1, 2]), tmp_path / "a.json")
    write_case(_spec_case("b-one-inactive", [0, 1, -1]), tmp_path / "b.json")
    write_case(_spec_case("c-kink-1e-17", [0, 1, Fraction(-1, 2) - Fraction(1, 10**17)]), tmp_path / "c.json")
    return tmp_path


def test_suite_summary_counts(folder):
    """a: rows (0,3,1),(3,3,1),(6,3,1), exactly singular in floats too: rank 2, not-identifiable,
    right.  b: (0,3,1),(3,3,1),(0,0,1), sigma_3/sigma_1 far above 1e-6: right.  c: exact
    identifiable, float rows of rank 2 (pattern flip): wrong under every float64 policy."""
    results = [crosscheck_case(load_case(p)) for p in expand_paths([str(folder)])]
    s = summarize(results)
    pol = "float64/rtol=1e-06"
    assert s.wrong_verdicts[pol] == ["c-kink-1e-17"] and s.wrong_ranks[pol] == ["c-kink-1e-17"]
    assert s.confusion[pol] == {"identifiable": {"identifiable": 1, "not-identifiable": 1},
                                "not-identifiable": {"not-identifiable": 1}}
    # Common float64 band: c is left out (pattern differs); a and b from hand-built matrices.
    ga, aa = _svd([[0, 3, 1], [3, 3, 1], [6, 3, 1]]), _svd([[0, 1, 1], [1, 1, 1], [2, 1, 1]])
    gb, ab = _svd([[0, 3, 1], [3, 3, 1], [0, 0, 1]]), _svd([[0, 1, 1], [1, 1, 1], [0, 0, 1]])
    lo = max(ga[2] / ga[0], aa[2] / aa[0])
    hi = min(ga[1] / ga[0], aa[1] / aa[0], gb[2] / gb[0], ab[2] / ab[0])
    band = s.bands["float64"]
    assert band["excluded_pattern_differs"] == ["c-kink-1e-17"]
    assert band["exists"] and band["rel"][0] == pytest.approx(lo, abs=1e-15)
    assert band["rel"][1] == pytest.approx(hi, rel=1e-12)
    assert band["rel"][0] < band["chosen"] < band["rel"][1]


def test_suite_without_common_band_names_the_conflict():
    results = [crosscheck_case(load_case(TOL / n)) for n in ("all-active-f32.json", "rescale-k18.json")]
    band = summarize(results).bands["float64"]
    # all-active needs rtol above its round-off sigma_4 > 0; k18's smallest sigma is ~1e-18 sigma_1.
    assert not band["exists"]
    assert band["conflict"]["needs_rtol_at_least"]["case"] == "all-active-f32"
    assert band["conflict"]["needs_rtol_below"]["case"] == "rescale-k18"


# --- CLI --------------------------------------------------------------------------------------


def test_cli_json_and_csv(folder, tmp_path, capsys):
    out = tmp_path / "out" / "table.csv"
    out.parent.mkdir()
    assert main(["crosscheck", str(folder), "--json", "--csv", str(out), "--rtol", "1e-3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in data["cases"]] == ["a-all-active", "b-one-inactive", "c-kink-1e-17"]
    assert data["summary"]["n_wrong_verdicts"]["float64/rtol=1e-06"] == 1
    assert "float64/rtol=0.001" in data["summary"]["policies"]
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 3 * len(default_policies(rtol=1e-3))
    assert {r["case"] for r in rows if r["right_verdict"] == "False" and r["policy"] == "float64/rtol=1e-06"} \
        == {"c-kink-1e-17"}


def test_cli_text_single_and_suite(folder, capsys):
    assert main(["crosscheck", str(folder / "a.json")]) == 0
    assert "band abs" in capsys.readouterr().out
    assert main(["crosscheck", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "common band float64: rtol in" in text and "left out (float pattern differs): c-kink-1e-17" in text


def test_cli_bad_case_names_file_and_field(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "exactident-case/1", "name": "x", "widths": [1, 1],
                               "weights": [[["oops"]]], "biases": [["0"]], "sample": [[1]]}))
    assert main(["crosscheck", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "weights[0][0][0]" in err and err[-1] == "\n" and err.count("\n") == 1


@pytest.mark.parametrize("make,match", [
    (lambda p: str(p / "missing.json"), "no such file or directory"),
    (lambda p: (p / "empty").mkdir() or str(p / "empty"), "no case files"),
])
def test_expand_paths_errors(tmp_path, make, match):
    path = make(tmp_path)
    with pytest.raises(CaseFormatError, match=match):
        expand_paths([path])
    assert main(["crosscheck", path]) == 2


def test_cli_duplicate_names_and_bad_outputs(folder, tmp_path, capsys):
    write_case(_spec_case("a-all-active", [0, 1]), tmp_path / "dup.json")
    assert main(["crosscheck", str(folder / "a.json"), str(tmp_path / "dup.json")]) == 2
    assert "appears twice" in capsys.readouterr().err
    target = tmp_path / "nodir" / "x.csv"
    assert main(["crosscheck", str(folder / "a.json"), "--csv", str(target)]) == 2
    assert "--csv" in capsys.readouterr().err and not target.exists()
    assert main(["crosscheck", str(folder / "a.json"), "--rtol", "-1"]) == 2
    assert main(["crosscheck", str(folder / "a.json"), "--tol", "abc"]) == 2


def test_cli_missing_optional_extras(folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    png = tmp_path / "p.png"
    assert main(["crosscheck", str(folder / "a.json"), "--plot", str(png)]) == 2
    assert "needs matplotlib" in capsys.readouterr().err and not png.exists()
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["crosscheck", str(folder / "a.json"), "--torch"]) == 2
    assert "needs PyTorch" in capsys.readouterr().err
    from exactident.crosscheck.plot import require_matplotlib

    with pytest.raises(UnsupportedCaseError, match="needs matplotlib"):
        require_matplotlib()


def test_cli_plots(folder, tmp_path):
    pytest.importorskip("matplotlib")
    for args, name in (([str(folder / "a.json")], "one.png"), ([str(folder)], "suite.png")):
        png = tmp_path / name
        assert main(["crosscheck", *args, "--plot", str(png)]) == 0
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left behind


def test_cli_torch_backend(folder, capsys):
    pytest.importorskip("torch")
    assert main(["crosscheck", str(folder / "b.json"), "--torch", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["cases"][0]
    # b has no tie and a well-conditioned 3x3 Gamma: torch's default gives the exact rank 3.
    pol = {p["policy"]: p for p in data["policies"]}
    assert pol["torch-float64/torch-default"]["rank_gamma"] == 3
    assert data["spectra"]["torch-float64"]["native_default_ranks"] == [3, 3]


def test_edge_cases_empty_sample_and_affine(tmp_path):
    """Empty sample: Gamma is 0 x 3, rank 0 = rank A < dim 3, not-identifiable (SPEC §2 rules).
    L = 1, rows (x_1, x_2, 1) of (1,2), (3,1/3), (0,0): determinant 1/3 - 6 != 0, identifiable."""
    empty = _spec_case("empty", [])
    affine = parse_case({"format": "exactident-case/1", "name": "affine", "widths": [2, 1],
                         "weights": [[["2", "1"]]], "biases": [["1"]],
                         "sample": [["1", "2"], ["3", "1/3"], ["0", "0"]]})
    for case, verdict, rank in ((empty, "not-identifiable", 0), (affine, "identifiable", 3)):
        r = crosscheck_case(case)
        assert (r.verdict, r.rank_gamma) == (verdict, rank)
        assert all(o.right_verdict and o.right_ranks for o in r.outcomes)
        write_case(case, tmp_path / f"{case.name}.json")
    assert main(["crosscheck", str(tmp_path)]) == 0
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        assert main(["crosscheck", str(tmp_path / "empty.json"), "--plot", str(tmp_path / "e.png")]) == 0


def test_cli_plot_unwritable_is_bad_input(folder, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "nodir" / "p.png"
    assert main(["crosscheck", str(folder / "a.json"), "--plot", str(target)]) == 2
    assert "--plot" in capsys.readouterr().err and not target.exists()


def test_layer_graph_float_rank_above_dim_free_reads_full_rank(tmp_path):
    """Regression: on a layer graph a float rank above dim_free was read as not-identifiable (compared with
    ``==``), and marked right when the exact answer was a rank deficit.

    f(x) = c + v leaky_{1/10}(w x + b) with w = 2, b = -1, v = 3, c = 0 on x = 1..4: every sample is on the
    active side, so by hand the rows of Gamma_free over (w, b, v, c) are (v x, v, w x + b, 1) = (3x, 3, 2x - 1, 1),
    all in the span of (x, 1): rank 2.  One positive rescaling: dim_free = 4 - 1 = 3, so the exact answer to
    "does rank Gamma_free reach dim_free?" is no.  An absolute tolerance of -1 counts every singular value of
    the 4 x 4 float matrix: rank 4 >= dim_free, which a float tool reads as identifiable, wrongly.  With
    rtol = 1e-8 the float matrix (exact in binary: small integers) has rank 2: not-identifiable, right."""
    obj = {"format": "exactident-case/2", "name": "leaky-affine", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"]], "bias": ["-1"]},
                      {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                      {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["3"]], "bias": ["0"]}],
           "output": "fc2", "sample": [[str(x)] for x in range(1, 5)]}
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(obj))
    every, cut = Policy("float64", "atol", -1.0), Policy("float64", "rtol", 1e-8)
    c = crosscheck_case(load_case(path), [every, cut])
    assert (c.dim, c.pattern_rank_gamma) == (3, 2) and c.verdict != "identifiable"
    above = c.outcome(every.name)
    assert (above.rank_gamma, above.verdict, above.right_verdict, above.right_ranks) == (4, "identifiable", False,
                                                                                       False)
    below = c.outcome(cut.name)
    assert (below.rank_gamma, below.verdict, below.right_verdict, below.right_ranks) == (2, "not-identifiable", True,
                                                                                       True)
