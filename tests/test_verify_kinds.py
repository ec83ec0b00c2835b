"""The verifier on the fast pipeline's certificates and report fields.

Certificate kinds: the ``semi-local`` kernel of ``Gamma``, ``rank_a`` by rows of
``alpha`` (``lower.matrix``/``lower.rows``), the ``column-blocks`` kernel of ``alpha``,
``rank_a`` as a lower bound only (``rank_a_lower``); the caps on the verifier's own
primes (past them one exact product, or not verified).  Report fields:
``rank_a_lower_bound``, ``certified_by``, ``provenance``, and the uncertified reports
(Monte Carlo ``certified: false``, ``timed_out``), which never verify.

Right values: the dead-neuron case's ranks by hand (neuron (1,0) is inactive on every
sample, so its 2 incoming parameters give kernel vectors of ``Gamma`` and its 2 outgoing
weights are zero columns: ``R_Gamma = 11 - 4 = 7``; ``alpha`` has rank 4 on the 5
samples, so ``R_A = 2 x 4 = 8 > 7``), and the column-block network's ``alpha`` by hand
(neuron 0 active on every sample: its path column equals ``beta``).
"""

import copy
import json
import random
import re

import flint
import pytest
from kernel_cases import CRT_LOWER
from structural_cases import DEAD as DEAD_NEURON

from exactident.check import check, timed_out_report
from exactident.cli import main
from exactident.io.case import Case, parse_case
from exactident.io.report import reports_to_json
from exactident.model.activation import activation_state
from exactident.model.fixed_edges import fixed_edges
from exactident.model.network import Network
from exactident.ranks.certify import certify_ranks
from exactident.verify.certificate import verify_certificate
from exactident.verify.rank import verify_rank_certificate

RA = ["certificate", "rank", "rank_a"]



@pytest.fixture(autouse=True)
def _no_active_blocks(monkeypatch):
    """The kinds under test here are kernels and eliminations: the ``active-blocks`` count (which closes
    the dead-neuron cases before any kernel is built) is off; tests/test_active_blocks.py covers it."""
    import exactident.ranks.certify as certify_mod

    monkeypatch.setattr(certify_mod, "active_block_bound", lambda net, *a: net.dim)


def _report(obj, **kw):
    # The rank rules' verdicts (inconclusive backed by R_A >= lower bound): these tests are about the rank
    # certificates; the structural certificate that settles DEAD_NEURON is checked below and in
    # tests/test_structural.py.
    kw.setdefault("structural", False)
    case = parse_case(obj)
    return case, json.loads(reports_to_json([check(case, numeric=False, **kw)], as_list=False))


def _verify(case, rep):
    return verify_certificate(case, rep, "r.json", require_claims=True)


def _at(d, path):
    for k in path:
        d = d[k]
    return d


def test_rank_a_lower_bound_report_verifies_with_its_values_by_hand():
    case, rep = _report(DEAD_NEURON)
    assert (rep["verdict"], rep["rank_gamma"], rep["rank_a"], rep["rank_a_lower_bound"], rep["cn"]) == \
        ("inconclusive", 7, None, 8, True)
    part = _at(rep, RA)
    assert set(part) == {"shape", "lower", "rank_a_lower"} and part["shape"] == [5, 7] and part["rank_a_lower"] == 8
    assert rep["certified_by"] == {"rank_gamma": "kernel:semi-local", "rank_a": "lower-bound"}
    valid, msgs = _verify(case, rep)
    assert valid, msgs
    assert "rank part valid: at the >= 0 pattern R_Gamma = 7, R_A >= 8" in msgs


def test_settled_by_its_dead_neuron_the_lower_bound_report_still_verifies():
    # With the structural search (the default) the dead neuron (1,0) settles the verdict; R_A is still
    # only bounded below (8 > R_Gamma = 7, so C_N holds) and that claim is still checked.
    case, rep = _report(DEAD_NEURON, structural=True)
    assert (rep["verdict"], rep["decided_by"], rep["rank_a"], rep["rank_a_lower_bound"], rep["cn"]) == \
        ("not-identifiable", "dead-neuron", None, 8, True)
    assert _verify(case, rep)[0]
    assert not _verify(case, dict(rep, rank_a_lower_bound=9))[0]


def _mutated(obj, path, value):
    case, rep = _report(obj)
    bad = copy.deepcopy(rep)
    if value is KeyError:
        del _at(bad, path[:-1])[path[-1]]
    else:
        _at(bad, path[:-1])[path[-1]] = value
    return case, bad


@pytest.mark.parametrize("path, value, message", [
    (["rank_a_lower_bound"], 9, "rank_a_lower_bound: report says 9, the certificate certifies R_A >= 8"),
    (["rank_a_lower_bound"], 7, "rank_a_lower_bound: report says 7, the certificate certifies R_A >= 8"),
    ([*RA, "rank_a_lower"], 9,
     "certificate.rank.rank_a.rank_a_lower: certificate says 9, but N_L rank_p alpha = 2 x 4 = 8"),
    ([*RA, "lower", "rank_mod_p"], 5,
     "certificate.rank.rank_a.lower.rank_mod_p: certificate says 5, recomputed rank mod"),
    ([*RA, "lower", "rows"], [0, 0],
     "certificate.rank.rank_a.lower.rows: expected distinct sample indices in [0, 5), found [0, 0]"),
    ([*RA, "lower", "rows"], [5], "certificate.rank.rank_a.lower.rows: expected distinct sample indices in [0, 5)"),
    ([*RA, "lower", "matrix"], "beta",
     "certificate.rank.rank_a.lower.matrix: expected 'alpha' or 'gram', found 'beta'"),
    ([*RA, "lower", "prime"], 4, "certificate.rank.rank_a.lower.prime: 4 is not a prime in [3, 2^31)"),
    ([*RA, "shape"], [5, 6], "certificate.rank.rank_a.shape: certificate says [5, 6], the matrix is [5, 7]"),
    ([*RA, "upper"], {"kind": "shape", "bound": 4}, "certificate.rank.rank_a.upper: unknown field, not verified"),
    ([*RA, "zzz"], 1, "certificate.rank.rank_a.zzz: unknown field, not verified"),
    (["certified_by"], {"rank_gamma": "shape"},
     "certified_by: report says {'rank_gamma': 'shape'}, the verified rank part's bounds are "
     "{'rank_gamma': 'kernel:semi-local', 'rank_a': 'lower-bound'}"),
    (["certificate", "rank", "rank_gamma", "upper", "source"], "column-blocks",
     "certificate.rank.rank_gamma.upper.source: 'column-blocks' is not a kernel construction for this matrix"),
    (["certificate", "rank", "rank_gamma", "upper", "nullity"], 3,
     "certificate.rank.rank_gamma.upper.nullity: certificate says 3, the semi-local kernel rebuilt from the case "
     "has 4 vectors"),
    (["provenance"], {"importer": "x"}, "provenance: report says {'importer': 'x'}, the case's is None"),
])
def test_tampered_lower_bound_reports_are_rejected(path, value, message):
    case, bad = _mutated(DEAD_NEURON, path, value)
    valid, msgs = _verify(case, bad)
    assert not valid and any(m.startswith(message) for m in msgs), msgs


def test_without_its_lower_bound_the_inconclusive_verdict_is_not_backed():
    case, bad = _mutated(DEAD_NEURON, RA, KeyError)
    valid, msgs = _verify(case, bad)
    assert not valid
    assert "cn: report says True, but R_A is not certified, so C_N cannot be checked" in msgs
    assert any(m.startswith("verdict: report says inconclusive, but the certificate does not certify") for m in msgs)
    assert any(m.startswith("rank_a_lower_bound: report says 8, but the certificate certifies no lower bound")
               for m in msgs)


@pytest.mark.parametrize("path, value, match", [
    ([*RA, "lower", "rows"], "some", r"rank_a\.lower\.rows: expected 'all' or list, found 'some'"),
    ([*RA, "lower", "rows"], [True], r"rank_a\.lower\.rows\[0\]: expected int, found bool"),
    ([*RA, "lower", "matrix"], 1, r"rank_a\.lower\.matrix: expected str, found int"),
    ([*RA, "rank_a_lower"], "8", r"rank_a\.rank_a_lower: expected int, found str"),
    (["rank_a_lower_bound"], "8", r"rank_a_lower_bound: expected int, found str"),
    (["certified_by"], "shape", r"certified_by: expected dict, found str"),
])
def test_malformed_new_fields_are_invalid(path, value, match):
    case, bad = _mutated(DEAD_NEURON, path, value)
    valid, msgs = _verify(case, bad)
    assert not valid and len(msgs) == 1 and re.search(match, msgs[0]), msgs


def test_lower_rows_field_is_required():
    case, bad = _mutated(DEAD_NEURON, [*RA, "lower", "rows"], KeyError)
    assert _verify(case, bad) == (False, ["certificate.rank.rank_a.lower.rows: missing"])


def test_column_block_kernel_of_alpha_verifies_and_is_rebuilt_from_the_case():
    # widths 1-3-1, z = (3x + 4, 3x + 3, -2x + 3) at x = 0, -2, 1, 2, 2, 4, -3.  Neurons 0 and 1 are active on
    # the same samples (x >= 0), so alpha's columns x a_0 = x a_1 and a_0 = a_1: two kernel vectors, rank
    # 7 - 2 = 5 (the other five columns: rows (0,0,1,1,1), (1,1,1,1,1), (0,-2,0,1,1), (0,-3,0,1,1),
    # (2,0,1,0,1), (4,0,1,0,1) of [x a_0, x a_2, a_0, a_2, 1] have rank 5 by hand).  The pattern-group
    # bound is 2 + 2 + 2 = 6 (three patterns, two distinct x each), n = |P| = 7: only column blocks close it.
    net = Network((1, 3, 1), [flint.fmpq_mat([[3], [3], [-2]]), flint.fmpq_mat([[-1, 1, -2]])],
                  [[flint.fmpq(4), flint.fmpq(3), flint.fmpq(3)], [flint.fmpq(-1)]])
    X = [[flint.fmpq(k)] for k in (0, -2, 1, 2, 2, 4, -3)]
    pattern = activation_state(net, X).pattern
    res = certify_ranks(net, X, pattern, fixed_edges(net), need_rank_a=True, rng=random.Random(1))
    part = res.certificate["rank_a"]
    assert res.rank_a == 5 and part["upper"] == {"kind": "kernel", "bound": 5, "source": "column-blocks", "nullity": 2}
    case = Case("blocks", net, X)
    assert verify_rank_certificate(case, res.certificate) == []
    bad = copy.deepcopy(res.certificate)
    bad["rank_a"]["upper"]["nullity"] = 3
    assert verify_rank_certificate(case, bad)[:1] == [
        "rank.rank_a.upper.nullity: certificate says 3, the column-blocks kernel rebuilt from the case has 2 vectors"]
    bad = copy.deepcopy(res.certificate)
    bad["rank_a"]["upper"]["source"] = "semi-local"
    assert verify_rank_certificate(case, bad)[0].startswith(
        "rank.rank_a.upper.source: 'semi-local' is not a kernel construction for this matrix")
    bad = copy.deepcopy(res.certificate)
    bad["rank_a"]["rank_a"] = 6
    assert verify_rank_certificate(case, bad)[:1] == [
        "rank.rank_a.rank_a: certificate says 6, but N_L rank alpha = 1 x 5 = 5"]


# --- the caps on the verifier's primes ----------------------------------------------------------------


def test_too_many_certificate_primes_are_refused():
    case, rep = _report(CRT_LOWER)
    up = rep["certificate"]["rank"]["rank_gamma"]["upper"]
    assert rep["certified_by"]["rank_gamma"] == "kernel:crt" and up["primes"]
    bad = copy.deepcopy(rep)
    _at(bad, ["certificate", "rank", "rank_gamma", "upper"])["primes"] = list(range(121))
    valid, msgs = _verify(case, bad)
    assert not valid and "certificate.rank.rank_gamma.upper.primes: 121 primes, more than the verifier checks (120)" \
        in msgs


def test_past_the_prime_cap_the_kernel_is_checked_by_one_exact_product(monkeypatch):
    import exactident.verify.rank as vr

    case, rep = _report(CRT_LOWER)
    del rep["certificate"]["rank"]["rank_gamma"]["upper"]["primes"]  # the verifier draws its own
    assert _verify(case, rep)[0]
    monkeypatch.setattr(vr, "MAX_VERIFY_PRIMES", 0)  # every check goes past the cap
    assert _verify(case, rep)[0]
    col = rep["certificate"]["rank"]["rank_gamma"]["upper"]["kernel"][-1]
    assert len(col) > 1  # changing one entry of a column with several is not a rescaling
    col[0][1] = str(int(col[0][1]) + 1)
    valid, msgs = _verify(case, rep)
    assert not valid and "certificate.rank.rank_gamma.upper.kernel: M K is not 0 (the certificate claims it is)" \
        in msgs
    monkeypatch.setattr(vr, "MAX_EXACT_CHECK_ENTRIES", 1)
    valid, msgs = _verify(case, rep)
    assert not valid and any(m.startswith("certificate.rank.rank_gamma.upper: M K = 0 would need") and
                             m.endswith("for an exact product: not verified") for m in msgs), msgs


# --- reports that are not certified --------------------------------------------------------------------


def test_monte_carlo_report_is_never_valid(tmp_path, capsys):
    case, rep = _report(DEAD_NEURON, certify="none")
    assert rep["certified"] is False and "certificate" not in rep
    valid, msgs = _verify(case, rep)
    assert not valid and msgs == [
        f"certified: the report says its ranks are Monte Carlo ranks, not certified, error probability <= "
        f"{rep['error_probability']}: nothing backs its ranks or verdict"]
    # with a genuine certificate added, still not valid: the report says it is not certified
    _, full = _report(DEAD_NEURON)
    assert not _verify(case, dict(rep, certificate=full["certificate"]))[0]
    case_path, rep_path = tmp_path / "case.json", tmp_path / "r.json"
    case_path.write_text(json.dumps(DEAD_NEURON))
    assert main(["check", "--json", "--no-numeric", "--certify", "none", str(case_path)]) == 0
    rep_path.write_text(capsys.readouterr().out)
    assert main(["verify-certificate", str(case_path), str(rep_path)]) == 3
    out = capsys.readouterr().out
    assert out.startswith("certified: the report says its ranks are Monte Carlo ranks") and \
        out.endswith("certificate INVALID\n")


def test_timed_out_report_is_never_valid():
    case = parse_case(DEAD_NEURON)
    rep = timed_out_report(case, "ranks mod p", 2.0).to_dict()
    assert rep["timed_out"] is True and rep["rank_gamma"] is None
    valid, msgs = _verify(case, rep)
    assert not valid and msgs == ["timed_out: the report says its analysis ran out of time (at ranks mod p): "
                                  "it decides nothing and certifies nothing"]
    assert _verify(case, dict(rep, timed_out="yes")) == (False, ["timed_out: expected bool, found str"])


def test_report_provenance_must_be_the_case_files():
    obj = dict(DEAD_NEURON, provenance={"importer": "exactident 0", "format": "npz"})
    case, rep = _report(obj)
    assert rep["provenance"] == {"importer": "exactident 0", "format": "npz"}
    assert _verify(case, rep)[0]
    valid, msgs = _verify(case, dict(rep, provenance={"importer": "exactident 0", "format": "onnx"}))
    assert not valid and "provenance.format: report says 'onnx', the case's is 'npz'" in msgs
    # the importer's version is about the run that imported, not the files: another version verifies
    assert _verify(case, dict(rep, provenance={"importer": "exactident 9", "format": "npz"}))[0]


def _huge_dead_neuron():
    # DEAD_NEURON with layer 1 scaled by c1 > 0 and layer 2 by c2 > 0 (thousands of digits): the
    # activation pattern is the same, each column of Gamma is multiplied by a nonzero constant and alpha
    # is unchanged, so the ranks are those by hand above (R_Gamma = 7, R_A = 8).
    from fractions import Fraction as F

    c1, c2 = F(3**4000 + 2, 7**1500), F(5**3000 + 1, 11**2000)
    W, b = DEAD_NEURON["weights"], DEAD_NEURON["biases"]
    return dict(DEAD_NEURON, name="dead-neuron-huge",
                weights=[[[str(F(v) * c) for v in row] for row in M] for M, c in zip(W, (c1, c2))],
                biases=[[str(F(v) * c) for v in vec] for vec, c in zip(b, (c1, c2))])


def test_huge_entries_kernel_is_checked_by_one_exact_product(monkeypatch):
    import exactident.verify.rank as vr

    case, rep = _report(_huge_dead_neuron())
    assert (rep["verdict"], rep["rank_gamma"], rep["rank_a_lower_bound"]) == ("inconclusive", 7, 8)
    assert rep["certified_by"]["rank_gamma"] == "kernel:semi-local"
    from exactident.verify.row_support import GammaRowSupport

    exact_products, exact_columns = [], []
    product, columns = vr._product_is_zero, GammaRowSupport.exactly_zero
    monkeypatch.setattr(vr, "_product_is_zero", lambda M, K: exact_products.append(len(K)) or product(M, K))
    monkeypatch.setattr(GammaRowSupport, "exactly_zero",
                        lambda self, cols: exact_columns.append(len(cols)) or columns(self, cols))
    assert _verify(case, rep)[0]
    # more than 120 primes would be needed: Gamma's columns are checked exactly, in integers, column by column
    # (no exact Gamma over Q is built); a matrix without the column route takes one exact product instead
    assert exact_columns == [4] and exact_products == []


def test_engine_uses_only_kernels_the_verifier_can_check(monkeypatch):
    import exactident.linalg.certified as lc
    import exactident.verify.rank as vr

    monkeypatch.setattr(lc, "MAX_EXACT_CHECK_ENTRIES", 1)
    monkeypatch.setattr(vr, "MAX_EXACT_CHECK_ENTRIES", 1)
    case, rep = _report(_huge_dead_neuron())
    assert rep["rank_gamma"] == 7 and rep["certified_by"]["rank_gamma"] == "exact-elimination"
    assert _verify(case, rep)[0]


def test_verifier_caps_are_the_engines():
    import exactident.linalg.certified as lc
    import exactident.ranks.certify as rc
    import exactident.verify.rank as vr

    assert vr.MAX_VERIFY_PRIMES == lc.MAX_CHECK_PRIMES and vr.MAX_ALPHA_ENTRIES == rc.MAX_EXPLICIT_ALPHA_MOD_P


def test_alpha_too_large_to_reduce_is_not_verified(monkeypatch):
    import exactident.verify.alpha_image as va
    import exactident.verify.rank as vr

    case, rep = _report(DEAD_NEURON)
    monkeypatch.setattr(vr, "MAX_ALPHA_ENTRIES", 10)  # alpha here is 5 x 7
    monkeypatch.setattr(va, "MAX_ALPHA_ENTRIES", 10)
    valid, msgs = _verify(case, rep)
    assert not valid and "certificate.rank.rank_a.lower.matrix: alpha on 5 rows has 5 x 7 entries, more than 10 " \
        "to reduce mod p: not verified (the engine uses 'gram' then)" in msgs
    net = Network((1, 3, 1), [flint.fmpq_mat([[3], [3], [-2]]), flint.fmpq_mat([[-1, 1, -2]])],
                  [[flint.fmpq(4), flint.fmpq(3), flint.fmpq(3)], [flint.fmpq(-1)]])
    X = [[flint.fmpq(k)] for k in (0, -2, 1, 2, 2, 4, -3)]
    res = certify_ranks(net, X, activation_state(net, X).pattern, fixed_edges(net), need_rank_a=True,
                        rng=random.Random(1))
    res.certificate["rank_a"]["lower"]["matrix"] = "gram"  # a Gram lower bound needs no explicit alpha
    res.certificate["rank_a"]["lower"]["rank_mod_p"] = 5
    monkeypatch.setattr(vr, "MAX_ALPHA_ENTRIES", 40)  # alpha is 7 x 7: 40 // 7 + 1 = 6 < 7 columns
    assert verify_rank_certificate(Case("blocks", net, X), res.certificate)[:1] == [
        "rank.rank_a.upper: alpha has 7 x 7 entries, more than 40 to reduce mod p for the kernel check: not verified"]
