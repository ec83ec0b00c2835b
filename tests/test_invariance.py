"""Presentation invariance on the boundary (docs/boundary.md, "Presentation invariance").

Rescaling a hidden neuron by a positive rational, permuting the hidden neurons
of a layer, permuting the samples or repeating a sample gives an equivalent
case: same function, same sample points.  The verdict and the fields
docs/boundary.md lists as invariant must come out identical, and the fields
that follow the presentation must follow it exactly: each tie resolution (in
the same position of ``patterns``) names the same (sample point, neuron, side)
triples once sample and neuron numbers are mapped back, the entering
certificate resolves the same ties, a straight-line certificate has the same
probe and the same direction once mapped back (up to a positive factor).

Cases are boundary cases by construction: samples are solved exactly (Fraction
arithmetic, independent of exactident) onto the zero set of a layer-1 neuron,
or of a layer-2 neuron inside one linear piece.  Every certificate is also
re-checked by the independent verifier.
"""

from __future__ import annotations

import re
from fractions import Fraction

import structural_cases as SC
from _gen import case_obj, forward, is_degenerate
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from structural_oracle import fractions_of

from exactident.check import check
from exactident.io.case import parse_case
from exactident.verify.certificate import verify_certificate

WIDTHS = [(1, 2, 1), (2, 2, 1), (1, 3, 1), (2, 3, 1), (1, 2, 2, 1), (2, 2, 2, 1), (1, 3, 2), (1, 2, 1, 1)]
small = st.integers(-2, 2)
coordinate = st.builds(Fraction, st.integers(-3, 3), st.sampled_from([1, 2]))
positive = st.builds(Fraction, st.integers(1, 9), st.integers(1, 9))


def _solve_layer1(W, b, v, x, j):
    """``x`` with coordinate ``j`` moved so that ``z_1(x)_v = 0`` (``W_1[v][j] != 0``)."""
    x = list(x)
    rest = sum((W[0][v][k] * x[k] for k in range(len(x)) if k != j), Fraction(0)) + b[0][v]
    x[j] = -rest / W[0][v][j]
    return x


def _solve_layer2(W, b, v, x0, d):
    """A point on the zero set of neuron (2, v) along ``x0 + t d``, assuming x0's layer-1 pattern holds."""
    active = [z > 0 for z in forward(W, b, x0)[0]]

    def z2(x):
        h = [z if a else Fraction(0) for z, a in zip(forward(W, b, x)[0], active)]  # frozen pattern
        return sum((W[1][v][u] * h[u] for u in range(len(h))), Fraction(0)) + b[1][v]

    A = z2(x0)
    B = z2([a + c for a, c in zip(x0, d)]) - A  # affine in t on the frozen pattern
    if B == 0:
        return None
    x = [a - A / B * c for a, c in zip(x0, d)]
    return x if forward(W, b, x)[1][v] == 0 else None  # the real pattern may differ there


@st.composite
def boundary_cases(draw):
    widths = list(draw(st.sampled_from(WIDTHS)))
    L = len(widths) - 1
    W = [[[Fraction(draw(small)) for _ in range(widths[l])] for _ in range(widths[l + 1])] for l in range(L)]
    b = [[Fraction(draw(small)) for _ in range(widths[l + 1])] for l in range(L)]
    assume(not is_degenerate(W, b))
    X = [[draw(coordinate) for _ in range(widths[0])] for _ in range(draw(st.integers(1, 8)))]
    for _ in range(draw(st.integers(1, 3))):
        base = [draw(coordinate) for _ in range(widths[0])]
        if L >= 3 and draw(st.booleans()):
            v = draw(st.integers(0, widths[2] - 1))
            d = [Fraction(draw(st.integers(-2, 2).filter(bool))) for _ in range(widths[0])]
            x = _solve_layer2(W, b, v, base, d)
        else:
            v = draw(st.integers(0, widths[1] - 1))
            js = [j for j in range(widths[0]) if W[0][v][j] != 0]
            x = _solve_layer1(W, b, v, base, draw(st.sampled_from(js))) if js else None
        if x is not None:
            X.insert(draw(st.integers(0, len(X))), x)
    assume(any(z == 0 for x in X for zl in forward(W, b, x)[:-1] for z in zl))
    return widths, W, b, X


class Presentation:
    """A transformed case and the maps back: sample -> original sample, neuron -> original neuron, scales."""

    def __init__(self, widths, W, b, X):
        self.widths, self.W, self.b, self.X = widths, [[r[:] for r in M] for M in W], [r[:] for r in b], \
            [x[:] for x in X]
        self.sample = list(range(len(X)))
        self.neuron = {l: list(range(widths[l])) for l in range(1, len(widths) - 1)}
        self.scale = {(l, v): Fraction(1) for l in self.neuron for v in self.neuron[l]}  # by original label

    def rescale(self, l, v, a):
        self.W[l - 1][v] = [w * a for w in self.W[l - 1][v]]
        self.b[l - 1][v] *= a
        for row in self.W[l]:
            row[v] /= a
        self.scale[(l, self.neuron[l][v])] *= a

    def permute(self, l, perm):  # new neuron k is old neuron perm[k]
        self.W[l - 1] = [self.W[l - 1][k] for k in perm]
        self.b[l - 1] = [self.b[l - 1][k] for k in perm]
        self.W[l] = [[row[k] for k in perm] for row in self.W[l]]
        self.neuron[l] = [self.neuron[l][k] for k in perm]

    def shuffle(self, perm):
        self.X = [self.X[k] for k in perm]
        self.sample = [self.sample[k] for k in perm]

    def duplicate(self, i, at):
        self.X.insert(at, list(self.X[i]))
        self.sample.insert(at, self.sample[i])

    def orig_neuron(self, l, v):
        return v if l not in self.neuron else self.neuron[l][v]

    def a(self, l, v_orig):
        return self.scale.get((l, v_orig), Fraction(1))


@st.composite
def presentations(draw, case):
    widths, W, b, X = case
    p = Presentation(widths, W, b, X)
    hidden = list(p.neuron)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["rescale", "permute", "shuffle", "duplicate"]))
        if op == "rescale":
            l = draw(st.sampled_from(hidden))
            p.rescale(l, draw(st.integers(0, widths[l] - 1)), draw(positive))
        elif op == "permute":
            l = draw(st.sampled_from(hidden))
            p.permute(l, draw(st.permutations(range(widths[l]))))
        elif op == "shuffle":
            p.shuffle(draw(st.permutations(range(len(p.X)))))
        else:
            p.duplicate(draw(st.integers(0, len(p.X) - 1)), draw(st.integers(0, len(p.X))))
    return p


def _report(widths, W, b, X, **options):
    case = parse_case(case_obj(widths, W, b, X))
    r = check(case, numeric=False, **options)
    if r.certificate:
        valid, msgs = verify_certificate(case, r.to_dict())
        assert valid, msgs
    return r


def _ties(p, X, ties):
    """Ties as (sample point, layer, original neuron, side) in the original labels."""
    return {(tuple(X[t["sample"]]), t["layer"], p.orig_neuron(t["layer"], t["neuron"]), t.get("active"))
            for t in ties}


_PARAM = re.compile(r"(W)_(\d+)\[(\d+),(\d+)\]|(b)_(\d+)\[(\d+)\]")


def _line_back(p, delta):
    """A line direction of the transformed case in the original case's parameters and scale."""
    L = len(p.widths) - 1
    out = {}
    for name, value in delta.items():
        m = _PARAM.fullmatch(name)
        if m[1]:
            l, i, j = int(m[2]), int(m[3]), int(m[4])
            oi = i if l == L else p.orig_neuron(l, i)
            oj = j if l == 1 else p.orig_neuron(l - 1, j)
            # theta'_W = a_{l,i} W / a_{l-1,j}, so delta = delta' a_{l-1,j} / a_{l,i}
            out[f"W_{l}[{oi},{oj}]"] = Fraction(value) * p.a(l - 1, oj) / p.a(l, oi)
        else:
            l, i = int(m[6]), int(m[7])
            oi = i if l == L else p.orig_neuron(l, i)
            out[f"b_{l}[{oi}]"] = Fraction(value) / p.a(l, oi)
    return {k: v for k, v in out.items() if v}


def _same_ray(u, v):
    if set(u) != set(v):
        return False
    k = next(iter(u))
    c = v[k] / u[k]
    return c > 0 and all(v[n] == c * u[n] for n in u)


def _shape(reason):
    reason = re.sub(r"\[[^\]]*\]", "[...]", reason)  # tie lists follow the numbering
    reason = re.sub(r"\((none excluded|only those splitting[^)]*)\)", "(...)", reason)
    # structural reasons name neurons (their labels follow the numbering) and count samples (repeats count)
    reason = re.sub(r"\(\d+,\d+\)", "(l,v)", reason)
    reason = re.sub(r"e_\d+ e_\d+\^T", "e_i e_j^T", reason)
    return re.sub(r"\d+ (of \d+ )?samples", "n samples", reason)


def has_twins(widths, W, b):
    """Two neurons of a hidden layer equal up to rescaling, in and out: swapping them is a symmetry.

    Such neurons cannot be told apart by anything intrinsic, so which one a certificate uses follows the
    input order (docs/boundary.md); the results then agree up to that swap, not label by label.
    """
    L = len(widths) - 1
    scale = [[Fraction(1)] * widths[0]]
    for l in range(1, L):
        rows = [[W[l - 1][v][u] / scale[l - 1][u] for u in range(widths[l - 1])] + [b[l - 1][v]]
                for v in range(widths[l])]
        m = [max(abs(x) for x in row) or Fraction(1) for row in rows]
        scale.append([1 / mv for mv in m])
        normal_in = [tuple(x / mv for x in row) for row, mv in zip(rows, m)]
        normal_out = [tuple(W[l][k][v] / scale[l][v] for k in range(widths[l + 1]))
                      for v in range(widths[l])]
        keys = list(zip(normal_in, normal_out))
        if len(set(keys)) < len(keys):
            return True
    return False


def assert_equivalent(r0, r1, p, X0, twins=False):
    for key in ("verdict", "rank_gamma", "rank_a", "cs", "cn", "dim", "degenerate", "on_boundary", "widths"):
        assert getattr(r0, key) == getattr(r1, key), key
    assert _shape(r0.reason) == _shape(r1.reason)
    assert (r0.patterns is None) == (r1.patterns is None)
    assert len(r0.patterns or []) == len(r1.patterns or [])
    ident = Presentation(r0.widths, [], [], [])
    for a, c in zip(r0.patterns or [], r1.patterns or []):
        for key in ("rank_gamma", "rank_a", "cs", "cn", "reachable"):
            assert a[key] == c[key], key
        if not twins:
            assert _ties(ident, X0, a["ties"]) == _ties(p, p.X, c["ties"])
    assert sorted(r0.certificate or {}) == sorted(r1.certificate or {})
    if twins:
        return
    if r0.certificate and "entering" in r0.certificate:
        e0, e1 = r0.certificate["entering"], r1.certificate["entering"]
        assert _ties(ident, X0, e0["resolution"]) == _ties(p, p.X, e1["resolution"])
        assert (e0["rank_gamma"], e0["rank_a"], e0["dim"]) == (e1["rank_gamma"], e1["rank_a"], e1["dim"])
    if r0.certificate and "line" in r0.certificate:
        l0, l1 = r0.certificate["line"], r1.certificate["line"]
        assert l0.get("probe") == l1.get("probe")  # a line may show non-equivalence by an invariant only
        d0 = {k: Fraction(v) for k, v in l0["delta"].items() if v != "0"}
        assert _same_ray(d0, _line_back(p, l1["delta"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(boundary_cases(), st.data(), st.sampled_from([4096, 4096, 4, 1]), st.booleans())
def test_equivalent_presentations_give_the_same_report(case, data, cap, all_ranks):
    # cap < 2^ties exercises the resolution cap (and the straight line sought past it).
    options = {"max_resolutions": cap, "all_ranks": all_ranks}
    r0 = _report(*case, **options)
    assume(r0.on_boundary and r0.verdict != "degenerate")
    p = data.draw(presentations(case), label="presentation")
    r1 = _report(p.widths, p.W, p.b, p.X, **options)
    assert_equivalent(r0, r1, p, case[3], twins=has_twins(*case[:3]))


def test_duplicated_kink_sample_keeps_verdict_and_ranks():
    # f = 3 relu(2x + 1), samples 0, 1, -1/2 (on the kink): not-identifiable with rank_gamma = rank_a = 2
    # (docs/boundary.md's worked example).  Repeating -1/2 adds a tie at the same point: the resolution
    # splitting the two copies is unreachable, so there are still 2 resolutions, not 4.
    W = [[[Fraction(2)]], [[Fraction(3)]]]
    b = [[Fraction(1)], [Fraction(0)]]
    X = [[Fraction(0)], [Fraction(1)], [Fraction(-1, 2)]]
    r0 = _report([1, 1, 1], W, b, X)
    r1 = _report([1, 1, 1], W, b, X + [[Fraction(-1, 2)]])
    assert (r0.verdict, r0.rank_gamma, r0.rank_a) == (r1.verdict, r1.rank_gamma, r1.rank_a) == \
        ("not-identifiable", 2, 2, )
    assert len(r0.patterns) == len(r1.patterns) == 2
    assert r1.n_ties == 2 and [len(p["ties"]) for p in r1.patterns] == [2, 2]
    assert all(len({t["active"] for t in p["ties"]}) == 1 for p in r1.patterns)


def test_entering_certificate_moves_onto_the_reports_own_slice():
    # Widths [1,1,2,1]: z_1 = x (tie at x = 0), layer 2 neurons h + 1 and 2h + 1 (active on the sample),
    # f = z_2[0] + z_2[1] = 3 relu(x) + 2.  By hand: delta = (db_1, db_2[1]) = (1, -3) keeps f on the
    # active side (3(x + eps) + 2 - 3 eps) and raises the tied z_1.  Presentation B rescales neuron (2,1)
    # by 1/4: its outgoing weight from (1,0) drops to 1/2 < 1, so B's own fixed edge for (1,0) is W_2[0,0]
    # while the canonical slice keeps W_2[1,0].  B's certificate is the same direction in B's scale
    # (db_2[1]' = db_2[1] / 4, i.e. (1, -3/4) ~ (4, -3)), on B's own slice, and verifies.
    from exactident.boundary.canonical import canonical_form
    from exactident.model.activation import activation_state
    from exactident.model.fixed_edges import fixed_edges

    X = [[Fraction(0)], [Fraction(1)], [Fraction(2)]]
    W1, b1, b3 = [[Fraction(1)]], [Fraction(0)], [Fraction(0)]
    a = ([1, 1, 2, 1], [W1, [[Fraction(1)], [Fraction(2)]], [[Fraction(1), Fraction(1)]]],
         [b1, [Fraction(1), Fraction(1)], b3], X)
    b = ([1, 1, 2, 1], [W1, [[Fraction(1)], [Fraction(1, 2)]], [[Fraction(1), Fraction(4)]]],
         [b1, [Fraction(1), Fraction(1, 4)], b3], X)
    case_b = parse_case(case_obj(*b))
    net, Xq = case_b.network, case_b.X
    own = fixed_edges(net).s_max[(1, 0)]
    canonical = canonical_form(net, Xq, activation_state(net, Xq).Z).fixed.s_max[(1, 0)]
    assert (own, canonical) == (0, 1)
    deltas = []
    for widths, W, bias, samples in (a, b):
        r = _report(widths, W, bias, samples)  # verified there
        ent = r.certificate["entering"]
        deltas.append({k: v for k, v in ent["delta"].items() if v != "0"})
    assert deltas == [{"b_1[0]": "1", "b_2[1]": "-3"}, {"b_1[0]": "4", "b_2[1]": "-3"}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SC.HAND), st.data())
def test_structural_certificates_follow_the_presentation(obj, data):
    # Off the boundary: the mechanism, its neurons (mapped back) and the line's ray do not depend on
    # how the network and the sample are written (docs/theory.md, "Structural certificates").
    widths, W, b, X = fractions_of(obj)
    # all_ranks: whether R_A is computed or only bounded below may follow the sample size (a cost rule)
    r0 = _report(widths, W, b, X, all_ranks=True)
    p = data.draw(presentations((widths, W, b, X)), label="presentation")
    r1 = _report(p.widths, p.W, p.b, p.X, all_ranks=True)
    twins = has_twins(widths, W, b)
    assert_equivalent(r0, r1, p, X, twins=twins)
    assert r0.decided_by == r1.decided_by == r0.certificate["structural"]["mechanism"]
    s0, s1 = r0.certificate["structural"], r1.certificate["structural"]
    if not twins:
        assert [[l, p.orig_neuron(l, v)] for l, v in s1["neurons"]] == s0["neurons"]
