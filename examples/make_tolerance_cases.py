"""Write the tolerance-validation cases to ``cases/tolerance/`` (seeded; re-run gives identical files).

Usage: ``python examples/make_tolerance_cases.py [OUTDIR]`` from the repository root.

Every number is an exact rational built from integers (no float on this path),
and every ``expected`` verdict is derived here without the float backend:

- ``rescale-kNN``: a [2,3,1] network whose hidden neuron 0 is rescaled by
  ``10^k`` (incoming weights and bias times ``10^k``, outgoing weight divided
  by ``10^k``).  The function, the activation pattern and the exact verdict are
  those of the unscaled network (positive homogeneity of ReLU, paper §2.2);
  that verdict is computed *exactly* on the unscaled network (k = 0).
- ``kink-*``: SPEC §2's network ``f = 3 relu(2x + 1)`` (or ``3 relu(10x - 1)``)
  with samples ``0, 1`` (resp. ``1, 2``) active and a third sample at or near the
  kink.  Derivation (``tau = (w_1, b_1, b_2)``, ``W_2`` fixed): an active sample
  ``x`` has Gamma row ``(3x, 3, 1)`` and alpha row ``(x, 1, 1)``; an inactive one
  ``(0, 0, 1)`` and ``(0, 0, 1)``.  Three active samples: both ranks 2 < 3,
  **not-identifiable** (Theorem 8).  Two active, one inactive: rank 3,
  **identifiable** (Theorem 9).  Exactly on the kink: the "active" resolution
  gives ranks 2 = 2 < 3 and ``delta = (0, 1, -3)`` spans its kernel and
  raises the tied pre-activation (``dz = x dw_1 + db_1 = 1 > 0``), so
  **not-identifiable** (SPEC §2).
- ``near-duplicate``: a [2,3,1] network (dim 10), 9 samples plus a copy of
  sample 0 moved by ``10^-10``; ``tiny-bias``: ``relu(x + 10^-10)`` and
  ``relu(x - 10^-10)`` with samples ``+-5*10^-11`` between the two kinks;
  ``all-active-f32``: every sample activates every neuron, so ``f`` is affine
  on the sample and ``rank Gamma = rank A = N_0 + 1 = 3 < dim``;
  ``wide``: 200 generic samples for dim 10.  Their verdicts come from
  the exact ranks, and the derivations are in ``tests/test_crosscheck.py``.
"""

from __future__ import annotations

import random
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exactident.check import check
from exactident.io.case import parse_case, write_case

SEED = 20221128
K_RANGE = range(0, 19)


def s(q: Fraction | int) -> str:
    q = Fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def case(name: str, description: str, widths, W, b, X, expected=None) -> dict:
    obj = {"format": "exactident-case/1", "name": name, "description": description,
           "widths": widths, "weights": [[[s(v) for v in row] for row in Wl] for Wl in W],
           "biases": [[s(v) for v in bl] for bl in b], "sample": [[s(v) for v in row] for row in X]}
    if expected is not None:
        obj["expected"] = expected
    return obj


def base_231(rng: random.Random, n: int):
    """A [2,3,1] network with quarter-integer weights and a sample of ``n`` tenths in [-3, 3]."""
    W1 = [[Fraction(rng.randint(-8, 8) or 1, 4) for _ in range(2)] for _ in range(3)]
    b1 = [Fraction(rng.randint(-4, 4), 4) for _ in range(3)]
    W2 = [[Fraction(rng.choice([-3, -2, -1, 1, 2, 3]), 2) for _ in range(3)]]
    b2 = [Fraction(1, 2)]
    X = [[Fraction(rng.randint(-30, 30), 10) for _ in range(2)] for _ in range(n)]
    return W1, b1, W2, b2, X


def no_ties(W1, b1, X) -> bool:
    return all(sum(w * x for w, x in zip(row, xs)) + bv != 0 for xs in X for row, bv in zip(W1, b1))


def main(outdir: str = "cases/tolerance") -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    cases = []

    # Rescaling family: pick the first seeded base that is identifiable, tie-free, with a
    # sample active and one inactive for neuron 0 (so its columns matter).
    while True:
        W1, b1, W2, b2, X = base_231(rng, 12)
        if not no_ties(W1, b1, X):
            continue
        base = parse_case(case("base", "", [2, 3, 1], [W1, W2], [b1, b2], X))
        rep = check(base, numeric=False, all_ranks=True)
        if rep.verdict == "identifiable":
            break
    base_verdict = rep.verdict
    for k in K_RANGE:
        c = Fraction(10) ** k
        W1k = [[w * c for w in W1[0]]] + W1[1:]
        b1k = [b1[0] * c] + b1[1:]
        W2k = [[W2[0][0] / c] + W2[0][1:]]
        cases.append(case(
            f"rescale-k{k:02d}",
            f"[2,3,1] network, hidden neuron 0 rescaled by 10^{k} (in: x10^{k}, out: /10^{k}); "
            f"same function and exact verdict as k=0 (positive homogeneity). "
            f"examples/make_tolerance_cases.py seed {SEED}.",
            [2, 3, 1], [W1k, W2k], [b1k, b2], X,
            {"verdict": base_verdict, "on_boundary": False}))

    # Kinks of f = 3 relu(2x + 1) at x = -1/2 and of f = 3 relu(10x - 1) at x = 1/10.
    half = Fraction(-1, 2)
    for name, x3, verdict in [("kink-plus-1e-12", half + Fraction(1, 10**12), "not-identifiable"),
                              ("kink-minus-1e-12", half - Fraction(1, 10**12), "identifiable"),
                              ("kink-minus-1e-17", half - Fraction(1, 10**17), "identifiable")]:
        cases.append(case(name, f"f = 3 relu(2x+1), samples 0, 1 and {s(x3)} (kink at -1/2): "
                          f"exact verdict {verdict} by hand (see the script's docstring).",
                          [1, 1, 1], [[[2]], [[3]]], [[1], [0]], [[0], [1], [x3]],
                          {"verdict": verdict, "on_boundary": False}))
    tenth = Fraction(1, 10)
    for name, x3, verdict, boundary in [
            ("kink-decimal-at", tenth, "not-identifiable", True),
            ("kink-decimal-plus-1e-12", tenth + Fraction(1, 10**12), "not-identifiable", False),
            ("kink-decimal-minus-1e-12", tenth - Fraction(1, 10**12), "identifiable", False)]:
        cases.append(case(name, f"f = 3 relu(10x-1), samples 1, 2 and {s(x3)} (kink at the decimal 1/10, "
                          f"not a binary float): exact verdict {verdict} by hand.",
                          [1, 1, 1], [[[10]], [[3]]], [[-1], [0]], [[1], [2], [x3]],
                          {"verdict": verdict, "on_boundary": boundary}))

    # Nearly duplicate samples.
    rng2 = random.Random(SEED + 1)
    while True:
        W1, b1, W2, b2, X = base_231(rng2, 9)
        X = X + [[X[0][0] + Fraction(1, 10**10), X[0][1]]]
        if not no_ties(W1, b1, X):
            continue
        c = parse_case(case("nd", "", [2, 3, 1], [W1, W2], [b1, b2], X))
        if check(c, numeric=False).verdict == "identifiable":
            break
    cases.append(case("near-duplicate", "[2,3,1] (dim 10), 9 samples plus sample 0 moved by 10^-10 in x_1; "
                      f"exact rank 10 = dim. examples/make_tolerance_cases.py seed {SEED + 1}.",
                      [2, 3, 1], [W1, W2], [b1, b2], X, {"verdict": "identifiable", "on_boundary": False}))

    tiny = Fraction(1, 10**10)
    cases.append(case("tiny-bias", "relu(x + 1e-10) and relu(x - 1e-10), outgoing 1 and 2; samples -1, "
                      "+-5e-11 (between the kinks), 1, 2, 3: exact rank 5 = dim (hand derivation in "
                      "tests/test_crosscheck.py).",
                      [1, 2, 1], [[[1], [1]], [[1, 2]]], [[tiny, -tiny], [0]],
                      [[-1], [-tiny / 2], [tiny / 2], [1], [2], [3]],
                      {"verdict": "identifiable", "on_boundary": False}))

    # All-active: f affine on the sample, ranks 3 = 3 < dim 10 (non-dyadic weights 1/3, 2/7, ...).
    W1 = [[Fraction(1, 3), Fraction(2, 7)], [Fraction(3, 5), Fraction(1, 9)], [Fraction(5, 11), Fraction(4, 13)]]
    b1 = [Fraction(1, 7), Fraction(2, 3), Fraction(1, 5)]
    W2 = [[Fraction(1, 3), Fraction(-5, 7), Fraction(2, 9)]]
    rng3 = random.Random(SEED + 2)
    X = [[Fraction(rng3.randint(1, 99), 37), Fraction(rng3.randint(1, 99), 41)] for _ in range(12)]
    cases.append(case("all-active-f32", "every sample activates every neuron (positive weights, biases, "
                      "inputs), so f is affine on the sample: rank Gamma = rank A = 3 < dim 10. Float32 "
                      "rounding noise sits far above float64's eps: the float64-eps pitfall over-counts.",
                      [2, 3, 1], [W1, W2], [b1, [Fraction(1, 3)]], X,
                      {"verdict": "not-identifiable", "on_boundary": False}))

    rng4 = random.Random(SEED + 3)
    while True:
        W1, b1, W2, b2, X = base_231(rng4, 200)
        if no_ties(W1, b1, X):
            break
    cases.append(case("wide", "[2,3,1] (dim 10) with 200 samples (n N_L = 200 >> dim): well conditioned, "
                      f"every float policy should agree. examples/make_tolerance_cases.py seed {SEED + 3}.",
                      [2, 3, 1], [W1, W2], [b1, b2], X, {"verdict": "identifiable", "on_boundary": False}))

    for obj in cases:
        c = parse_case(obj)
        # Guard: the exact engine must confirm each derivation off the boundary.
        if not obj["expected"]["on_boundary"]:
            got = check(c, numeric=False).verdict
            if got != obj["expected"]["verdict"]:
                raise SystemExit(f"{obj['name']}: exact verdict {got} != derived {obj['expected']['verdict']}")
        write_case(c, out / f"{obj['name']}.json")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
