"""An independent exact oracle for the tests of exactident.testing: the Jacobian of the outputs on the sample in
every weight and bias, by hand-written backpropagation in ``Fraction`` arithmetic, and its rank by Gaussian
elimination.  Shares no code with exactident (the case is read back from its JSON strings)."""

from __future__ import annotations

from fractions import Fraction


def network_from_json(obj):
    W = [[[Fraction(v) for v in row] for row in Wl] for Wl in obj["weights"]]
    b = [[Fraction(v) for v in bl] for bl in obj["biases"]]
    X = [[Fraction(v) for v in x] for x in obj["sample"]]
    return W, b, X


def full_jacobian(W, b, X, relu_prime_at_zero):
    """Rows (sample i, output k), columns W_1, b_1, ..., W_L, b_L (row-major): d f_k(x^i) / d theta."""
    L = len(W)
    rows = []
    for x in X:
        hs, ds = [list(x)], []
        for l in range(L):
            z = [sum((W[l][i][j] * hs[-1][j] for j in range(len(hs[-1]))), Fraction(0)) + b[l][i]
                 for i in range(len(W[l]))]
            if l < L - 1:  # hidden layer: ReLU; the derivative at a tie (z = 0) is the convention's
                ds.append([Fraction(1) if v > 0 else (Fraction(relu_prime_at_zero) if v == 0 else Fraction(0))
                           for v in z])
                hs.append([max(v, Fraction(0)) for v in z])
        for k in range(len(W[-1])):
            g = [Fraction(int(i == k)) for i in range(len(W[-1]))]
            blocks = []
            for l in range(L - 1, -1, -1):
                blocks.append([gi * hj for gi in g for hj in hs[l]] + list(g))
                if l:
                    g = [sum((W[l][i][j] * g[i] for i in range(len(g))), Fraction(0)) * ds[l - 1][j]
                         for j in range(len(hs[l]))]
            rows.append([v for block in reversed(blocks) for v in block])
    return rows


def rank(rows):
    M = [list(r) for r in rows]
    r = 0
    ncols = len(M[0]) if M else 0
    for c in range(ncols):
        p = next((i for i in range(r, len(M)) if M[i][c] != 0), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        for i in range(len(M)):
            if i != r and M[i][c] != 0:
                f = M[i][c] / M[r][c]
                M[i] = [a - f * bb for a, bb in zip(M[i], M[r])]
        r += 1
    return r
