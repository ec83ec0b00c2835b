"""Mechanisms that hold where one neuron is active: unseen weights and co-active neurons (docs/symmetries.md).

For a hidden neuron ``k`` of layer ``l - 1`` (``l >= 2``) and a neuron ``i`` of layer ``l``, the
column of ``W_l[i, k]`` in the Jacobian at ``x`` is ``dF/dz_{l,i}(x) h_k(x)``: zero wherever
``h_k = 0``.  So only the inputs where ``k`` is active matter:

- **unseen**: ``z_{l,i} <= 0`` wherever ``z_{l-1,k} > 0`` (on the domain): the column is zero at
  every input, ``W_l[i, k]`` is a unit direction;
- **co-active** (``l = L - 1``, the last hidden layer): the neurons ``T`` of layer ``l`` with
  ``z_{l,i} >= 0`` wherever ``z_{l-1,k} > 0``.  There ``dF/dz_{l,i} = W_L[:, i]``, so for ``c`` with
  ``W_L[:, T] c = 0``, ``dW_l[i, k] = c_i`` (``i`` in ``T``) gives ``h_k sum_i c_i W_L[:, i] = 0`` where
  ``k`` is active and ``0`` elsewhere: ``|T| - rank W_L[:, T]`` directions.

Candidates come from a sample (the relation holds at every sample point where ``k`` is active);
each is proved on every piece of a cover of the domain, that either ``z_{l-1,k} <= 0`` or the sign
of ``z_{l,i}`` holds (:func:`exactident.symmetry.hidden.holds_on_domain`).  Called by
:mod:`exactident.symmetry.fdim`.
"""

from __future__ import annotations

from collections.abc import Sequence

import flint

from exactident.linalg import exact
from exactident.model.activation import activation_state
from exactident.model.network import Network
from exactident.symmetry import hidden

__all__ = ["MAX_CANDIDATES", "conditional_mechanisms"]

#: Most (k, i) pairs tried per call (the best supported first).
MAX_CANDIDATES = 12

_ZERO = flint.fmpq(0)


def _proved(net: Network, box, l: int, i: int, k: int, sign: int, max_boxes: int) -> bool:
    def on_box(bnd) -> bool:
        return bnd[l - 2][k][1] <= _ZERO or (bnd[l - 1][i][1] <= _ZERO if sign < 0 else bnd[l - 1][i][0] >= _ZERO)

    def far(fb, R) -> bool:
        test = hidden.far_nonpositive if sign < 0 else hidden.far_nonnegative
        return hidden.far_nonpositive(fb[l - 2][k], R) or test(fb[l - 1][i], R)

    return hidden.holds_on_domain(net, box, l, on_box, far, max_boxes)


def conditional_mechanisms(net: Network, box, pts: Sequence[Sequence[flint.fmpq]], gone: set[tuple[int, int]],
                           max_boxes: int) -> list[hidden.Mechanism]:
    """The ``unseen`` and ``co-active`` mechanisms proved on the domain (module docstring).

    ``gone``: neurons already dead or blocked (skipped).
    """
    if not pts:
        return []
    Z = activation_state(net, pts).Z
    cands: list[tuple[int, int, int, int, int]] = []  # (support, l, i, k, sign)
    for l in range(2, net.L):
        Zk, Zi = Z[l - 2].table(), Z[l - 1].table()
        for k in range(net.widths[l - 1]):
            on = [r for r in range(len(pts)) if Zk[r][k] > _ZERO]
            if not on or (l - 1, k) in gone:
                continue
            for i in range(net.widths[l]):
                if (l, i) in gone:
                    continue
                if all(Zi[r][i] < _ZERO for r in on):
                    cands.append((len(on), l, i, k, -1))
                elif l == net.L - 1 and all(Zi[r][i] > _ZERO for r in on):
                    cands.append((len(on), l, i, k, 1))
    cands.sort(reverse=True)
    ix = hidden.full_index(net.widths)
    out: list[hidden.Mechanism] = []
    coactive: dict[tuple[int, int], list[int]] = {}
    for _, l, i, k, sign in cands[:MAX_CANDIDATES]:
        if not _proved(net, box, l, i, k, sign, max_boxes):
            continue
        if sign < 0:
            out.append(hidden.Mechanism("unseen", [(l, i), (l - 1, k)], [{ix(l, i, k): flint.fmpq(1)}],
                                        f"W_{l}[{i},{k}] is never seen: neuron ({l},{i}) is inactive wherever "
                                        f"({l - 1},{k}) is active (proved exactly)"))
        else:
            coactive.setdefault((l, k), []).append(i)
    for (l, k), T in sorted(coactive.items()):
        if len(T) <= 0:
            continue
        A = flint.fmpq_mat([[net.W[l][r, i] for i in T] for r in range(net.widths[l + 1])])
        N = exact.nullspace(A)
        dirs = [{ix(l, i, k): N[t, c] for t, i in enumerate(T) if N[t, c] != _ZERO} for c in range(N.ncols())]
        dirs = [d for d in dirs if d]
        if dirs:
            out.append(hidden.Mechanism("co-active", [(l, i) for i in T] + [(l - 1, k)], dirs,
                                        f"neurons {', '.join(f'({l},{i})' for i in T)} are active wherever "
                                        f"({l - 1},{k}) is (proved exactly): only W_{l + 1}[:,T] W_{l}[T,{k}] "
                                        "is seen"))
    return out
