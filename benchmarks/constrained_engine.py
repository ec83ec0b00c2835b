"""Time the constrained engine on a digits-sized CNN built by hand (no importer, no compiler needed).

Input 1x8x8, conv 1->C channels 3x3 padding 1 (+ bias), ReLU, average pooling 2x2 (fixed 1/4, linear units),
flatten, linear -> 10 (+ bias); random small rational weights; the sample: the first n images of
scikit-learn's digits (integers 0..16), or random integers when scikit-learn is absent.

    python benchmarks/constrained_engine.py [n] [channels]

Prints the sizes, dim_free, the verdict, rank Gamma_free and the seconds of each stage.
"""

from __future__ import annotations

import random
import sys
import time

import flint
import numpy as np

from exactident.check import check_constrained
from exactident.model.gamma_free import free_state
from exactident.model.network import Network
from exactident.model.symmetry import rescaling_symmetry


def conv_prelude(channels: int, K: int, n_conv: int, n_in: int, rng: random.Random) -> tuple:
    """A conv layer's tied parameters: kernel and bias indices, their random values, empty ``W_1``/index arrays."""
    kern = np.arange(channels * K * K).reshape(channels, K, K)
    k = channels * K * K
    cbias = np.arange(k, k + channels)
    k += channels
    vals = [flint.fmpq(rng.choice([-1, 1]) * rng.randint(1, 99), rng.choice([7, 11, 13, 17])) for _ in range(k)]
    W1 = flint.fmpq_mat(n_conv, n_in)
    I1 = np.full((n_conv, n_in), -1, dtype=np.int64)
    return kern, cbias, k, vals, W1, I1, [], np.zeros(n_conv, dtype=np.int64)


def digits_cnn(channels: int, seed: int = 0) -> Network:
    rng = random.Random(seed)
    H = Wd = 8
    n_in, n_conv, n_pool, n_out = H * Wd, channels * H * Wd, channels * 16, 10
    kern, cbias, k, vals, W1, I1, b1, bI1 = conv_prelude(channels, 3, n_conv, n_in, rng)
    for c in range(channels):
        for y in range(H):
            for x in range(Wd):
                u = c * 64 + y * 8 + x
                for dy in range(3):
                    for dx in range(3):
                        yy, xx = y + dy - 1, x + dx - 1
                        if 0 <= yy < H and 0 <= xx < Wd:
                            j = int(kern[c, dy, dx])
                            W1[u, yy * 8 + xx] = vals[j]
                            I1[u, yy * 8 + xx] = j
                b1.append(vals[int(cbias[c])])
                bI1[u] = int(cbias[c])
    W2 = flint.fmpq_mat(n_pool, n_conv)
    for c in range(channels):
        for py in range(4):
            for px in range(4):
                for dy in range(2):
                    for dx in range(2):
                        W2[c * 16 + py * 4 + px, c * 64 + (2 * py + dy) * 8 + 2 * px + dx] = flint.fmpq(1, 4)
    I2 = np.full((n_pool, n_conv), -1, dtype=np.int64)
    W3 = flint.fmpq_mat(n_out, n_pool)
    I3 = np.zeros((n_out, n_pool), dtype=np.int64)
    for i in range(n_out):
        for j in range(n_pool):
            W3[i, j] = flint.fmpq(rng.randint(-5, 5) or 1, 4)
            I3[i, j] = k
            k += 1
    b3 = [flint.fmpq(rng.randint(-3, 3)) for _ in range(n_out)]
    bI3 = np.arange(k, k + n_out, dtype=np.int64)
    k += n_out
    zero, one = flint.fmpq(0), flint.fmpq(1)
    return Network((n_in, n_conv, n_pool, n_out), [W1, W2, W3],
                              [b1, [zero] * n_pool, b3], [I1, I2, I3],
                              [bI1, np.full(n_pool, -1, dtype=np.int64), bI3],
                              [[zero] * n_conv, [one] * n_pool],
                              [np.full(n_conv, -1, dtype=np.int64), np.full(n_pool, -1, dtype=np.int64)],
                              k, ("convolution", "average pooling"))


def sample(n: int) -> list[list[flint.fmpq]]:
    try:
        from sklearn.datasets import load_digits

        data = load_digits().data[:n].astype(int)
    except ImportError:
        data = np.random.default_rng(0).integers(0, 17, (n, 64))
    return [[flint.fmpq(int(v)) for v in row] for row in data]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    channels = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    cn = digits_cnn(channels)
    X = sample(n)
    t = time.perf_counter()
    st = free_state(cn, X)
    t_fw = time.perf_counter() - t
    t = time.perf_counter()
    sym = rescaling_symmetry(cn)
    t_sym = time.perf_counter() - t
    t = time.perf_counter()
    r = check_constrained(cn, X)
    t_all = time.perf_counter() - t
    print(f"widths {cn.widths} n={n} params={cn.n_params} ties={len(st.ties)} dim_free={sym.dim_free} "
          f"(S_H {sym.symmetry_dim}); forward {t_fw:.2f}s, S_H {t_sym:.2f}s, check {t_all:.2f}s: "
          f"{r.verdict} rank {r.rank_gamma} [{r.decided_by}]")


if __name__ == "__main__":
    main()
