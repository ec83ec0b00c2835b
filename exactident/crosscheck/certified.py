"""Certified conditioning of a case: proved tolerance bands and activation robustness.

``exactident crosscheck --certified-bands`` adds, per case (docs/tolerances.md,
"Certified conditioning"):

- ``gamma`` (and ``alpha`` when the verdict uses it, i.e. ``rank_gamma < dim``):
  certified ``sigma_r`` / ``sigma_1`` bounds of the exact matrix at the
  ``>= 0`` pattern (:func:`exactident.linalg.sigma_bounds.certified_sigma_bounds`),
  so every absolute tolerance in ``[0, sigma_r_lo)`` and every relative one in
  ``[0, sigma_r_lo / sigma_1_hi)`` gives the exact rank for the exact matrix
  (``sigma_{r+1} = 0`` exactly);
- ``rounding``: per float dtype, ``delta >= ||Gamma_hat - Gamma||_2`` (the
  exact Frobenius norm of the difference between the float ``Gamma`` of the
  numpy backend and the exact one, rounded up), and by Weyl's inequality
  (``|sigma_k(Gamma_hat) - sigma_k(Gamma)| <= ||Gamma_hat - Gamma||_2``) the
  band ``[delta, sigma_r_lo - delta)`` that gives rank ``r`` on the float
  matrix, when it is not empty (``resolvable``), and that band shrunk by an
  estimate of the float SVD's own error (``band_with_svd_error``);
- ``boundary_distance``: ``min |z_v(x^i)| / ||[h_{l-1}(x^i), 1]||`` over
  samples and hidden neurons (the smallest change of one neuron's weights
  and bias that moves a sample onto its kink), and for the first layer
  ``min |z_v(x^i)| / ||W_1[v]||`` (the Euclidean distance of a sample to a
  first-layer hyperplane).

Above ``max_size`` (Gram size ``min(m, n)``) a matrix is "not computed (size)".
Called by :mod:`exactident.crosscheck.core`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np

from exactident.io.case import Case
from exactident.linalg.sigma_bounds import certified_sigma_bounds, float_below, perturbation_bound
from exactident.model.activation import activation_state, alpha_exact
from exactident.model.fixed_edges import fixed_edges
from exactident.model.gamma import gamma_exact, hidden_values
from exactident.numeric.guard import FloatPipelineError
from exactident.numeric.numpy_backend import float_operators

__all__ = ["boundary_distance", "certified_conditioning", "perturbation_bound", "render_certified"]

#: Largest Gram size (``min(m, n)``) whose bounds are computed.
MAX_SIZE = 300


def _bands(b: Any) -> dict[str, Any]:
    d = b.as_dict()
    lo, hi1 = d["sigma_r_lo"], d["sigma_1_hi"]
    d["abs_band"] = [0.0, lo] if lo is not None else None
    d["rel_band"] = [0.0, lo / hi1] if lo is not None and hi1 else None
    return d


def boundary_distance(case: Case) -> dict[str, Any] | None:
    """Smallest ``|z| / ||[h, 1]||`` over samples and hidden neurons, certified (rounded down).

    Returns ``None`` for a network without hidden layers.
    """
    net, X = case.network, case.X
    if net.L < 2 or not X:
        return None
    Z = activation_state(net, X).Z
    H = hidden_values(net, X, Z)
    best: tuple[flint.fmpq, int, int, int] | None = None
    best_in: flint.fmpq | None = None
    w1 = [sum((v * v for v in net.W[0].table()[j]), flint.fmpq(0)) for j in range(net.widths[1])]
    for l in net.hidden_layers():
        Zt, Ht = Z[l - 1].table(), H[l - 1].table()
        for i in range(len(X)):
            n2 = sum((h * h for h in Ht[i]), flint.fmpq(1))
            for v, z in enumerate(Zt[i]):
                q = z * z / n2
                if best is None or q < best[0]:
                    best = (q, i, l, v)
                if l == 1 and w1[v] != 0:
                    qi = z * z / w1[v]
                    best_in = qi if best_in is None or qi < best_in else best_in
    assert best is not None
    return {"parameter_distance": float_below(best[0]), "sample": best[1], "layer": best[2], "neuron": best[3],
            "on_kink": best[0] == 0,
            "input_distance_layer1": None if best_in is None else float_below(best_in)}


def certified_conditioning(case: Case, rank_gamma: int, rank_alpha: int, dim: int,
                           dtypes: Sequence[str] = ("float64", "float32"),
                           max_size: int = MAX_SIZE) -> dict[str, Any]:
    """Certified bands, rounding perturbations and boundary distance of ``case`` (see the module doc).

    Parameters
    ----------
    case : Case
    rank_gamma, rank_alpha : int
        Exact ranks of ``Gamma`` and ``alpha`` at the ``>= 0`` pattern.
    dim : int
    dtypes : float formats whose rounding is bounded (numpy backend).
    max_size : int

    Returns
    -------
    dict with ``gamma``, ``alpha``, ``rounding``, ``boundary_distance`` and
    ``stored_dtype`` (the imported model's ``provenance.weight_dtype``, or None), JSON-ready.
    """
    net, X = case.network, case.X
    state = activation_state(net, X)
    fixed = fixed_edges(net)
    G = gamma_exact(net, X, state.Z, state.pattern, fixed)
    out: dict[str, Any] = {"max_size": max_size}
    bg = certified_sigma_bounds(G, rank_gamma, max_size)
    out["gamma"] = _bands(bg) if bg is not None else {"not_computed": "size" if rank_gamma else "rank 0"}
    if rank_gamma < dim and len(X) <= max_size:
        A = alpha_exact(state.pattern, X)
        ba = certified_sigma_bounds(A, rank_alpha, max_size)
        out["alpha"] = _bands(ba) if ba is not None else {"not_computed": "size" if rank_alpha else "rank 0"}
    elif rank_gamma < dim:
        out["alpha"] = {"not_computed": "size"}
    else:
        out["alpha"] = {"not_computed": "not used (rank_gamma = dim)"}
    lo = out["gamma"].get("sigma_r_lo")
    rounding: dict[str, Any] = {}
    for dt in dtypes:
        try:
            ops = float_operators(net, X, fixed, state.pattern, dt, with_alpha=False)
        except FloatPipelineError as exc:
            rounding[dt] = {"failed": exc.failure.as_dict()}
            continue
        delta = perturbation_bound(G, ops.gamma)
        entry: dict[str, Any] = {"delta": delta, "pattern_differs": ops.n_pattern_flips > 0}
        if lo is not None:
            entry["resolvable"] = lo - delta > delta
            entry["float_band_abs"] = [delta, lo - delta] if lo - delta > delta else None
            # What a float tool sees also carries its SVD's error, ~ max(m, n) eps sigma_1 for
            # LAPACK in the dtype (an estimate: the constant of the backward error is not rigorous).
            s1 = out["gamma"].get("sigma_1_hi") or 0.0
            est = max(G.nrows(), G.ncols()) * float(np.finfo(np.dtype(dt)).eps) * (s1 + delta)
            a, b = delta + est, lo - delta - est
            entry["svd_error_estimate"] = est
            entry["band_with_svd_error"] = [a, b] if a < b else None
        rounding[dt] = entry
    out["rounding"] = rounding
    stored = str((case.provenance or {}).get("weight_dtype", ""))
    out["stored_dtype"] = stored or None  # the imported model's own weight dtype(s), e.g. "float32"
    out["boundary_distance"] = boundary_distance(case)
    return out


def _g(v: float | None) -> str:
    return "?" if v is None else f"{v:.3g}"


def render_certified(d: dict[str, Any]) -> list[str]:
    """Text lines for :func:`certified_conditioning`'s result (indented, for crosscheck's text output)."""
    lines = []
    for key in ("gamma", "alpha"):
        e = d.get(key)
        if not e:
            continue
        if "not_computed" in e:
            lines.append(f"  certified {key}: not computed ({e['not_computed']})")
            continue
        r = e["rank"]
        if e["sigma_r_lo"] is None:
            lines.append(f"  certified {key}: sigma_{r} not certified ({e['reason']}); float {_g(e['sigma_r_float'])}")
            continue
        lines.append(f"  certified {key}: sigma_{r} in [{_g(e['sigma_r_lo'])}, {_g(e['sigma_r_hi'])}], "
                     f"sigma_1 in [{_g(e['sigma_1_lo'])}, {_g(e['sigma_1_hi'])}], sigma_{r + 1} = 0: "
                     f"every tol in [0, {_g(e['sigma_r_lo'])}) (rtol in [0, {_g(e['rel_band'][1])})) "
                     f"gives rank {r} on the exact matrix")
    stored = set(str(d.get("stored_dtype") or "").split("+"))
    for dt, e in d.get("rounding", {}).items():
        label = f"{dt} (the model's stored dtype)" if dt in stored else dt
        if "failed" in e:
            lines.append(f"  {label} rounding: the float pipeline failed ({e['failed'].get('status')})")
            continue
        note = " (float pattern differs)" if e["pattern_differs"] else ""
        if "resolvable" not in e:
            lines.append(f"  {label} rounding: ||Gamma_hat - Gamma|| <= {_g(e['delta'])}{note}")
        elif e["resolvable"]:
            a, b = e["float_band_abs"]
            w = e.get("band_with_svd_error")
            lines.append(f"  {label} rounding: ||Gamma_hat - Gamma|| <= {_g(e['delta'])}{note}: every tol in "
                         f"[{_g(a)}, {_g(b)}) gives the exact rank on the float Gamma (Weyl); with the "
                         f"{dt} SVD's error (~{_g(e['svd_error_estimate'])}): "
                         + (f"[{_g(w[0])}, {_g(w[1])})" if w else "none left"))
        else:
            lines.append(f"  {label} rounding: ||Gamma_hat - Gamma|| <= {_g(e['delta'])}{note} >= sigma_r_lo / 2: "
                         f"{dt} cannot be proved to resolve this rank")
    bd = d.get("boundary_distance")
    if bd:
        lines.append(f"  activation robustness: min |z|/||[h,1]|| >= {_g(bd['parameter_distance'])} "
                     f"(sample {bd['sample']}, layer {bd['layer']}, neuron {bd['neuron']})"
                     + (f"; input distance to a layer-1 hyperplane >= {_g(bd['input_distance_layer1'])}"
                        if bd["input_distance_layer1"] is not None else ""))
    return lines
