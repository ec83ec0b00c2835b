"""Independent helpers for the importer tests: IEEE bit decoding, a float forward pass with its error bound,
and the CLI's bad-input check (exit 2, one line).

Nothing here calls exactident's converter: a float's exact value is decoded
from its sign, exponent and significand bits with ``Fraction`` arithmetic, the
way IEEE 754 defines it, so the tests do not check the converter against itself.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["FORMATS_BITS", "UNIT_ROUNDOFF", "assert_network_equals", "bad_input_error", "decode", "decode_array",
           "float_forward", "rows_of"]

# (exponent bits, significand bits, unsigned view dtype)
FORMATS_BITS = {"float16": (5, 10, np.uint16), "bfloat16": (8, 7, np.uint16),
                "float32": (8, 23, np.uint32), "float64": (11, 52, np.uint64)}
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}


def decode(bits: int, fmt: str) -> Fraction:
    """The exact value of one finite float given by its bit pattern (IEEE 754 binary formats)."""
    e_bits, m_bits, _ = FORMATS_BITS[fmt]
    sign = bits >> (e_bits + m_bits)
    e = (bits >> m_bits) & ((1 << e_bits) - 1)
    m = bits & ((1 << m_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    assert e != (1 << e_bits) - 1, "not finite"
    if e == 0:  # subnormal
        value = Fraction(m, 1 << m_bits) * Fraction(2) ** (1 - bias)
    else:
        value = (1 + Fraction(m, 1 << m_bits)) * Fraction(2) ** (e - bias)
    return -value if sign else value


def decode_array(bits: np.ndarray, fmt: str) -> list[list[Fraction]]:
    """A 2-D array of bit patterns (unsigned ints) as rows of Fractions (1-D -> one row)."""
    b = np.atleast_2d(np.asarray(bits))
    return [[decode(int(v), fmt) for v in row] for row in b]


def rows_of(M) -> list[list[Fraction]]:
    """An fmpq_mat as rows of Fractions."""
    return [[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())]


def assert_network_equals(net, W_expected, b_expected):
    """Every imported weight equals the expected Fraction (``W_expected[l]`` rows ``(N_l, N_{l-1})``)."""
    assert len(net.W) == len(W_expected)
    for l, (M, W) in enumerate(zip(net.W, W_expected)):
        assert rows_of(M) == W, f"W_{l + 1}"
    for l, (bl, b) in enumerate(zip(net.b, b_expected)):
        assert [Fraction(int(v.p), int(v.q)) for v in bl] == b, f"b_{l + 1}"


def float_forward(net, X: np.ndarray, u: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 forward pass of an imported network (last affine layer) and a rounding-error bound.

    The bound is the standard forward error of a dot product evaluated in a float format of
    unit roundoff ``u``: ``|fl(W h + b) - (W h + b)| <= gamma_{k+2} (|W| |h| + |b|)`` per layer,
    propagated through the next layers' ``|W|`` (ReLU is 1-Lipschitz); doubled for the float64
    side and rounded intermediate results.
    """
    h = np.asarray(X, dtype=np.float64)
    mag = np.abs(h)
    err = np.zeros_like(h)
    for l in range(net.L):
        W = np.array([[float(Fraction(int(q.p), int(q.q))) for q in row] for row in
                      [[net.W[l][i, j] for j in range(net.W[l].ncols())] for i in range(net.W[l].nrows())]])
        b = np.array([float(Fraction(int(q.p), int(q.q))) for q in net.b[l]])
        k = W.shape[1] + 2
        g = k * u / (1 - k * u)
        h = h @ W.T + b
        err = err @ np.abs(W).T + g * (mag @ np.abs(W).T + np.abs(b))
        mag = mag @ np.abs(W).T + np.abs(b)
        if l < net.L - 1:
            h = np.maximum(h, 0)
    return h, 2 * err


def bad_input_error(capsys, argv) -> str:
    """Run the CLI on ``argv`` and return its error, asserting bad input: exit 2 and a one-line error."""
    from exactident.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def write_weights_npz(folder, seed: int = 0) -> None:
    """``folder/m.npz`` (``W1, b1, W2, b2`` of a 2-3-1 ReLU MLP, float64, seeded) and its sample ``folder/X.npy``
    (6 x 2): a weight-only model file, read under ``--assume-relu-mlp``."""
    from pathlib import Path

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    np.savez(folder / "m.npz", W1=rng.standard_normal((3, 2)), b1=rng.standard_normal(3),
             W2=rng.standard_normal((1, 3)), b2=rng.standard_normal(1))
    np.save(folder / "X.npy", rng.standard_normal((6, 2)))
