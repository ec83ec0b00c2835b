"""Time ``Network`` construction (its validation and index checks) on an MNIST-sized CNN.

Input 1x28x28, conv 1->C channels 3x3 (no padding, + bias), ReLU, average pooling 2x2 (fixed 1/4, linear
units), flatten, linear -> 10 (+ bias): dense ``W_1`` of ``C*676 x 784`` entries (9 tied kernel entries per
row), ``W_2`` of ``C*169 x C*676`` (fixed), ``W_3`` of ``10 x C*169``.  Random small rational weights.

    python benchmarks/constrained_init.py [channels]

Prints the sizes and the seconds of the construction (``__post_init__``), of ``theta()`` and of
``with_theta(theta())``.
"""

from __future__ import annotations

import random
import sys
import time

import flint
import numpy as np
from constrained_engine import conv_prelude  # benchmarks/ is sys.path[0] when run as a script

from exactident.model.network import Network


def mnist_cnn_parts(channels: int, seed: int = 0) -> tuple:
    """The constructor's arguments for the CNN above (nothing validated yet)."""
    rng = random.Random(seed)
    S, K = 28, 3
    O = S - K + 1  # 26
    P = O // 2  # 13
    n_in, n_conv, n_pool, n_out = S * S, channels * O * O, channels * P * P, 10
    kern, cbias, k, vals, W1, I1, b1, bI1 = conv_prelude(channels, K, n_conv, n_in, rng)
    for c in range(channels):
        for y in range(O):
            for x in range(O):
                u = (c * O + y) * O + x
                for dy in range(K):
                    for dx in range(K):
                        j = int(kern[c, dy, dx])
                        W1[u, (y + dy) * S + x + dx] = vals[j]
                        I1[u, (y + dy) * S + x + dx] = j
                b1.append(vals[int(cbias[c])])
                bI1[u] = int(cbias[c])
    W2 = flint.fmpq_mat(n_pool, n_conv)
    quarter = flint.fmpq(1, 4)
    for c in range(channels):
        for py in range(P):
            for px in range(P):
                for dy in range(2):
                    for dx in range(2):
                        W2[(c * P + py) * P + px, (c * O + 2 * py + dy) * O + 2 * px + dx] = quarter
    I2 = np.full((n_pool, n_conv), -1, dtype=np.int64)
    b2, bI2 = [flint.fmpq(0)] * n_pool, np.full(n_pool, -1, dtype=np.int64)
    n_lin = n_out * n_pool + n_out
    lin = [flint.fmpq(rng.randint(-50, 50), 64) for _ in range(n_lin)]
    W3 = flint.fmpq_mat(n_out, n_pool, lin[:n_out * n_pool])
    I3 = np.arange(k, k + n_out * n_pool, dtype=np.int64).reshape(n_out, n_pool)
    b3, bI3 = lin[n_out * n_pool:], np.arange(k + n_out * n_pool, k + n_lin, dtype=np.int64)
    k += n_lin
    slopes = [[flint.fmpq(0)] * n_conv, [flint.fmpq(1)] * n_pool]
    slope_index = [np.full(n_conv, -1, dtype=np.int64), np.full(n_pool, -1, dtype=np.int64)]
    names = [f"theta_{j}" for j in range(k)]
    return ((n_in, n_conv, n_pool, n_out), [W1, W2, W3], [b1, b2, b3], [I1, I2, I3], [bI1, bI2, bI3], slopes,
            slope_index, k, ("convolution", "average pooling"), names)


def main() -> None:
    channels = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    parts = mnist_cnn_parts(channels)
    widths = parts[0]
    print(f"widths {widths}, {parts[7]} parameters, dense entries {sum(M.nrows() * M.ncols() for M in parts[1])}")
    t = time.perf_counter()
    cn = Network(*parts)
    print(f"construction (__post_init__): {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    theta = cn.theta()
    print(f"theta(): {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    cn.with_theta(theta)
    print(f"with_theta(theta()): {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
