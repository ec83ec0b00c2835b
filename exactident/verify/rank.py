"""Re-check a rank certificate (``report["certificate"]["rank"]``) from the case alone.

Everything is recomputed from the case: the exact activation pattern, the
images mod the certificate's primes, the entry bounds, the structural
bounds and (for ``source: local`` kernels) the kernel vectors themselves.
The ranks it certifies are then compared with the report's claims by
:mod:`exactident.verify.certificate`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from math import prod
from typing import Any

import flint

from exactident.errors import InvariantViolation
from exactident.linalg import exact
from exactident.linalg.certified import kernel_is_zero_mod
from exactident.linalg.modular import random_primes, rank_mod_p, require_prime
from exactident.model.activation import alpha_gram, n_paths
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact
from exactident.model.gamma_modular import gamma_entry_bound, gamma_mod_p, gram_entry_bound, gram_mod_p
from exactident.model.integer_forward import common_denominator, data_denominator
from exactident.ranks.bounds import pattern_rank_bound
from exactident.ranks.kernels import neuron_local_kernel

__all__ = ["verify_rank_certificate"]


def _check_one(problems: list[str], what: str, c: Mapping[str, Any], image, shape, avoid, bound_fn,
               structural: Mapping[str, int], exact_rank, local_kernel=None) -> int | None:
    """Check one matrix's certificate; returns the certified rank or None."""
    try:
        r = int(c["rank"])
        if list(c["shape"]) != list(shape):
            problems.append(f"{what}: shape {c['shape']} != {list(shape)}")
            return None
        up = c["upper"]
        kind = up["kind"]
        if kind == "exact-elimination":
            true = exact_rank()
            if true != r:
                problems.append(f"{what}: exact rank is {true}, certificate says {r}")
                return None
            return r
        p = require_prime(int(c["lower"]["prime"]), avoid)
        rp = rank_mod_p(image(p), p)
        if rp != r or int(c["lower"]["rank_mod_p"]) != r:
            problems.append(f"{what}: rank mod {p} is {rp}, certificate says {r}")
            return None
        if kind in structural:
            if int(up["bound"]) != structural[kind] or structural[kind] != r:
                problems.append(f"{what}: upper bound {kind} is {structural[kind]}, not {r}")
                return None
            return r
        if kind != "kernel":
            problems.append(f"{what}: unknown upper bound kind {kind!r}")
            return None
        from exactident.linalg.certified import has_full_column_rank, kernel_to_integer_columns

        if up.get("source") == "semi-local" and "kernel" not in up and isinstance(local_kernel, _LocalKernel):
            from exactident.ranks.kernels import semi_local_kernel

            K = semi_local_kernel(*local_kernel.args)  # rebuilt from the case
            if len(K) != int(up["nullity"]):
                problems.append(f"{what}: semi-local kernel has {len(K)} vectors, certificate says {up['nullity']}")
                return None
        elif up.get("source") == "local" and "kernel" not in up:
            if local_kernel is None:
                problems.append(f"{what}: no local kernel construction for this matrix")
                return None
            K = local_kernel()  # rebuilt from the case, then checked like any other K
            if len(K) != int(up["nullity"]):
                problems.append(f"{what}: local kernel has {len(K)} vectors, certificate says {up['nullity']}")
                return None
        else:
            K = [{int(i): flint.fmpq(*(int(t) for t in str(v).split("/"))) for i, v in col}
                 for col in up["kernel"]]
        n = shape[1]
        if any(not 0 <= i < n for col in K for i in col) or shape[1] - len(K) != r:
            problems.append(f"{what}: kernel has {len(K)} columns or bad indices; rank {r} needs {n - r}")
            return None
        K_int = kernel_to_integer_columns(K)
        bound = n * bound_fn() * max((abs(v) for col in K_int for v in col.values()), default=0)
        if "primes" in up:
            primes = [require_prime(int(q), avoid) for q in up["primes"]]
        else:  # no primes given: draw our own, enough of them
            primes = []
            while prod(primes) <= bound:
                primes += random_primes(1, avoid, random.Random(len(primes)), exclude=primes)
        if len(set(primes)) != len(primes) or not primes:
            problems.append(f"{what}: kernel check primes must be distinct and nonempty")
            return None
        if prod(primes) <= bound:
            problems.append(f"{what}: product of check primes does not exceed the bound on |M K|")
            return None
        if not has_full_column_rank(K_int, n, primes[0]):
            problems.append(f"{what}: kernel basis is not of full column rank")
            return None
        if not kernel_is_zero_mod(image, n, K_int, primes, avoid):
            problems.append(f"{what}: M K != 0")
            return None
        return r
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        problems.append(f"{what}: malformed certificate ({exc!r})")
    except InvariantViolation as exc:
        problems.append(f"{what}: {exc}")
    return None


def verify_rank_certificate(case: Any, rank_certificate: Mapping[str, Any]) -> list[str]:
    """Re-check ``certificate["rank"]`` from the case alone; list of problems (empty = valid).

    Recomputes the exact activation pattern, the images mod the certificate's
    primes, the entry bounds, and checks every claim: primes are primes not
    dividing a denominator, the ranks mod p, the structural bounds, and for
    kernel bounds ``M K = 0`` (mod primes whose product exceeds the bound on
    ``|M K|``) with ``K`` of full column rank.
    """
    from exactident.model.activation import activation_state

    problems: list[str] = []
    net, X = case.network, case.X
    try:
        default = fixed_edges(net).s_max
        choice = {(int(l), int(v)): int(k) for l, v, k in rank_certificate.get("fixed_edges", [])}
        fixed = fixed_edges(net, {key: k for key, k in choice.items() if default.get(key) != k})
    except Exception as exc:  # malformed input: report, do not raise
        return [f"fixed_edges: malformed ({exc!r})"]
    state = activation_state(net, X)
    pattern = state.pattern
    avoid = data_denominator(net, X)
    n, N_L, dim = len(X), net.widths[-1], net.dim
    rank_a = None
    if "rank_a" in rank_certificate and isinstance(rank_certificate["rank_a"], Mapping) \
            and isinstance(rank_certificate["rank_a"].get("lower"), Mapping) \
            and "matrix" in rank_certificate["rank_a"]["lower"]:
        c = rank_certificate["rank_a"]
        r = _check_alpha_rows(problems, c, pattern, X, net.widths)
        if r is not None:
            rank_a = N_L * r
            if c.get("rank_a") != rank_a:
                problems.append(f"rank_a: R_A = N_L rank alpha = {rank_a}, certificate says {c.get('rank_a')}")
    elif "rank_a" in rank_certificate:
        c = rank_certificate["rank_a"]
        avoid_x = common_denominator(v for row in X for v in row)
        r = _check_one(problems, "rank_a", c, lambda q: gram_mod_p(pattern, X, q, avoid_x), (n, n), avoid_x,
                       lambda: gram_entry_bound(X, net.widths),
                       {"shape": n, "paths": n_paths(net.widths), "patterns": pattern_rank_bound(pattern, X)},
                       lambda: exact.rank(alpha_gram(pattern, X)) if n else 0)
        if r is not None:
            rank_a = N_L * r
            if c.get("rank_a") != rank_a:
                problems.append(f"rank_a: R_A = N_L rank alpha = {rank_a}, certificate says {c.get('rank_a')}")
    if "rank_gamma" not in rank_certificate:
        problems.append("rank_gamma: missing")
        return problems
    structural = {"shape": min(n * N_L, dim)}
    if rank_a is not None:
        structural["rank_a"] = rank_a
    _check_one(problems, "rank_gamma", rank_certificate["rank_gamma"],
               lambda q: gamma_mod_p(net, X, pattern, fixed, q, avoid), (n * N_L, dim), avoid,
               lambda: gamma_entry_bound(net, X), structural,
               lambda: exact.rank(gamma_exact(net, X, state.Z, pattern, fixed)),
               _LocalKernel(net, X, pattern, fixed))
    return problems


class _LocalKernel:
    """``neuron_local_kernel`` of the case when called; its arguments serve the semi-local kernel too."""

    def __init__(self, *args: Any) -> None:
        self.args = args

    def __call__(self) -> list:
        return neuron_local_kernel(*self.args)


def _check_alpha_rows(problems: list[str], c: Mapping[str, Any], pattern, X, widths) -> int | None:
    """``rank_a`` certificates whose lower bound is a rank mod p of rows of ``alpha`` (or of their Gram matrix).

    Any set of rows gives a lower bound, so the rows named in the certificate need no
    trust; the rank mod p is recomputed with FLINT.  Upper bounds: ``shape`` (``n``),
    ``paths`` (``|P|``), ``patterns`` (recomputed), or the column-block kernel, rebuilt from the case and checked
    exactly (``alpha K = 0`` over Q, ``K`` of full column rank mod a prime).
    """
    from exactident.linalg.certified import has_full_column_rank, kernel_to_integer_columns
    from exactident.model.activation import alpha_exact
    from exactident.model.gamma_modular import Scaled, alpha_mod_p
    from exactident.ranks.bounds import alpha_column_kernel

    what = "rank_a"
    n, P = len(X), n_paths(widths)
    try:
        r = int(c["rank"])
        low, up = c["lower"], c["upper"]
        if list(c["shape"]) != [n, P]:
            problems.append(f"{what}: shape {c['shape']} != {[n, P]}")
            return None
        avoid = common_denominator(v for row in X for v in row)
        p = require_prime(int(low["prime"]), avoid)
        rows = list(range(n)) if low.get("rows", "all") == "all" else [int(i) for i in low["rows"]]
        if any(not 0 <= i < n for i in rows) or len(set(rows)) != len(rows):
            problems.append(f"{what}: bad row indices")
            return None
        Xs = Scaled([v for row in X for v in row], (n, widths[0]))
        sub = [a[rows] for a in pattern]
        if low["matrix"] == "alpha":
            image = alpha_mod_p(sub, Xs.mod(p)[rows], p)
        elif low["matrix"] == "gram":
            image = gram_mod_p(sub, [X[i] for i in rows], p, avoid)
        else:
            problems.append(f"{what}: unknown lower-bound matrix {low['matrix']!r}")
            return None
        rp = rank_mod_p(image, p)
        if rp != r or int(low["rank_mod_p"]) != r:
            problems.append(f"{what}: rank mod {p} is {rp}, certificate says {r}")
            return None
        kind = up["kind"]
        if kind in ("shape", "paths", "patterns"):
            bound = n if kind == "shape" else P if kind == "paths" else pattern_rank_bound(pattern, X)
            if int(up["bound"]) != bound or bound != r:
                problems.append(f"{what}: upper bound {kind} is {bound}, not {r}")
                return None
            return r
        if kind == "kernel" and up.get("source") == "column-blocks":
            K = alpha_column_kernel(pattern, X, widths)
            if len(K) != int(up["nullity"]) or P - len(K) != r:
                problems.append(f"{what}: column-block kernel has {len(K)} vectors; rank {r} needs {P - r}")
                return None
            q = random_primes(1, avoid, random.Random(0))[0]
            if not has_full_column_rank(kernel_to_integer_columns(K), P, q):
                problems.append(f"{what}: column-block kernel is not of full column rank")
                return None
            Kmat = flint.fmpq_mat(P, len(K), [col.get(i, 0) for i in range(P) for col in K])
            if K and alpha_exact(pattern, X) * Kmat != flint.fmpq_mat(n, len(K)):
                problems.append(f"{what}: alpha K != 0")
                return None
            return r
        problems.append(f"{what}: unknown upper bound kind {kind!r}")
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        problems.append(f"{what}: malformed certificate ({exc!r})")
    except InvariantViolation as exc:
        problems.append(f"{what}: {exc}")
    return None
