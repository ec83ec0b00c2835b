"""``assert_rank_agrees``: compare a tool's rank with the exact one, and explain a disagreement.

The explanation states only what is proved about the case
(:mod:`exactident.crosscheck.certified`): the exact rank, the nearest kink to
the sample (the smallest ``|z| / ||[h_{l-1}(x), 1]||`` over samples and hidden
neurons, rounded down), the certified band of tolerances that give the exact
rank on the exact matrix (``sigma_r`` and ``sigma_1`` bounds), and how far
float64/float32 rounding of the parameters moves ``Gamma``.
"""

from __future__ import annotations

from exactident.io.case import Case
from exactident.testing.strategies import KnownCase, _from_case

__all__ = ["acceptable_ranks", "assert_rank_agrees"]

_CONVENTIONS = (None, "inactive", "active")


def _known(case: KnownCase | Case) -> KnownCase:
    if isinstance(case, KnownCase):
        return case
    if case.expected is None or "rank_gamma" not in case.expected:
        from exactident.check import check
        from exactident.suites.compare import expected_from_report

        case.expected = expected_from_report(check(case, numeric=False, all_ranks=True).to_dict())
    return _from_case(case, str((case.generator or {}).get("family", "")))


def acceptable_ranks(case: KnownCase | Case, matrix: str = "gamma", tie_convention: str | None = None) -> set[int]:
    """The exact ranks a correct tool may report for ``case``.

    Off a boundary: the one exact rank.  On a boundary the Jacobian depends on how the tool
    differentiates ``relu`` at 0: ``tie_convention="inactive"`` (``relu'(0) = 0``: PyTorch, JAX,
    TensorFlow) and ``"active"`` (``relu'(0) = 1``) select the resolution with every tie on that
    side; None accepts the rank of any tie resolution.

    Parameters
    ----------
    case : KnownCase or exactident.io.case.Case
        A :class:`~exactident.io.case.Case` without exact ranks in ``expected`` is analysed by
        :func:`exactident.check` first.
    matrix : {"gamma", "a"}
        ``Gamma`` (the Jacobian of the outputs on the sample in the parameters, rescalings removed)
        or ``A`` (the activation-pattern matrix of Theorem 9).
    tie_convention : {None, "inactive", "active"}

    Raises
    ------
    ValueError
        Unknown ``matrix`` or ``tie_convention``; or ``matrix="gamma"`` on a degenerate case (a hidden
        neuron in ``S``): the paper's ``Gamma`` then leaves out an edge that is not a rescaling chart, so
        its rank is not that of a Jacobian in every parameter, and no tool rank can be judged by it.
    """
    if matrix not in ("gamma", "a"):
        raise ValueError(f"matrix must be 'gamma' or 'a', not {matrix!r}")
    if tie_convention not in _CONVENTIONS:
        raise ValueError(f"tie_convention must be None, 'inactive' or 'active', not {tie_convention!r}")
    k = _known(case)
    if matrix == "gamma" and k.degenerate:
        raise ValueError(f"{k.case.name} is degenerate (a hidden neuron in S): rank Gamma of the paper, with one "
                         "edge per hidden neuron left out, is not the rank of a Jacobian in every parameter here")
    field = "rank_gamma" if matrix == "gamma" else "rank_a"
    if not k.resolutions:
        return {getattr(k, field)}
    chosen = [r for r in k.resolutions if tie_convention is None
              or (r.all_inactive if tie_convention == "inactive" else r.all_active)]
    return {getattr(r, field) for r in (chosen or k.resolutions)}


def _g(v: float | None) -> str:
    return "?" if v is None else f"{v:.3g}"


def _explain(k: KnownCase, matrix: str, tolerance: float | None, rtol: float | None) -> list[str]:
    from exactident.crosscheck.certified import certified_conditioning

    try:
        cc = certified_conditioning(k.case, k.rank_gamma, k.rank_a, k.dim)
    except Exception as exc:  # an explanation must not hide the disagreement it explains
        return [f"certified conditioning not available: {type(exc).__name__}: {exc}"]
    out = []
    bd = cc.get("boundary_distance")
    if bd:
        where = f"sample {bd['sample']}, hidden neuron (layer {bd['layer']}, unit {bd['neuron']})"
        if bd["on_kink"]:
            out.append(f"nearest kink: {where} is exactly on its kink (z = 0)")
        else:
            out.append(f"nearest kink: {where}: |z| / ||[h, 1]|| >= {_g(bd['parameter_distance'])} "
                       f"(no smaller change of that neuron's weights and bias puts the sample on its kink)")
    bands = cc.get("gamma" if matrix == "gamma" else "alpha") or {}
    name = "Gamma" if matrix == "gamma" else "A"
    if "sigma_r_lo" in bands:
        lo, hi, hi1 = bands["sigma_r_lo"], bands["sigma_r_hi"], bands["sigma_1_hi"]
        out.append(f"certified singular values of exactident's exact {name}"
                   + (" (one fixed edge per hidden neuron left out; a Jacobian in every parameter has the same "
                      "rank, other singular values)" if matrix == "gamma" else "")
                   + f": sigma_r in [{_g(lo)}, {_g(hi)}], sigma_1 <= {_g(hi1)}, sigma_(r+1) = 0 exactly")
        if lo is not None:
            rel = f", relative in [0, {_g(lo / hi1)})" if hi1 else ""
            out.append(f"tolerances giving the exact rank on the exact {name}: absolute in [0, {_g(lo)}){rel}")
        for tol, kind in ((tolerance, "absolute"), (rtol, "relative")):
            if tol is None or lo is None:
                continue
            cut = tol if kind == "absolute" else tol * (hi1 or 0.0)
            if tol < 0:
                continue
            if kind == "absolute" and hi is not None and cut >= hi:
                out.append(f"the {kind} tolerance {tol:.3g} is >= sigma_r: at it even the exact {name} has a "
                           "smaller numerical rank")
            elif cut < lo:
                out.append(f"the {kind} tolerance {tol:.3g} is inside the band: at it the exact {name} has the exact "
                           "rank, so look at the tool's matrix (rounding, activation pattern) before the tolerance")
    elif bands.get("not_computed"):
        out.append(f"certified singular values of {name}: not computed ({bands['not_computed']})")
    if matrix == "gamma":
        for dt, r in (cc.get("rounding") or {}).items():
            if "delta" in r:
                band = r.get("float_band_abs")
                out.append(f"{dt} rounding of the parameters and sample moves exactident's float Gamma by "
                           f"||dGamma||_2 <= {_g(r['delta'])}"
                           + ("; the activation pattern changes" if r.get("pattern_differs") else "")
                           + (f"; absolute tolerances in [{_g(band[0])}, {_g(band[1])}) give rank r on that "
                              "float Gamma" if band else "; no tolerance is certified to resolve its rank"))
    return out


def assert_rank_agrees(tool_rank: int, case: KnownCase | Case, tolerance: float | None = None, *,
                       rtol: float | None = None, matrix: str = "gamma", tie_convention: str | None = None) -> None:
    """Check a tool's rank of ``Gamma`` (or ``A``) against the exact one; explain a disagreement.

    Parameters
    ----------
    tool_rank : int
        The rank the tool under test computed (e.g. ``torch.linalg.matrix_rank`` of its Jacobian).
        A Jacobian in every weight and bias has the rank of ``Gamma`` (rescaling directions are in
        its kernel).
    case : KnownCase or exactident.io.case.Case
        What the tool was run on (a :class:`~exactident.io.case.Case` without exact ranks is analysed first).
    tolerance, rtol : float, optional
        The absolute and relative singular-value thresholds the tool used: only quoted in the
        explanation, against the certified band.
    matrix : {"gamma", "a"}
    tie_convention : {None, "inactive", "active"}
        How the tool differentiates ``relu`` at 0 (:func:`acceptable_ranks`).

    Raises
    ------
    AssertionError
        ``tool_rank`` is not an acceptable exact rank; the message gives the exact rank(s), ``dim``,
        the verdict, the tie resolutions, the nearest kink and the certified bands.
    ValueError
        Unknown ``matrix`` or ``tie_convention``, or a degenerate case (:func:`acceptable_ranks`).
    """
    k = _known(case)
    want = acceptable_ranks(k, matrix, tie_convention)
    if int(tool_rank) in want:
        return
    name = "Gamma" if matrix == "gamma" else "A"
    exact = " or ".join(map(str, sorted(want)))
    lines = [f"rank {name} disagrees on {k.case.name}{f' (family {k.family})' if k.family else ''}: the tool says "
             f"{int(tool_rank)}, the exact rank is {exact}",
             f"widths {list(k.widths)}, n = {k.n_samples} samples, dim = {k.dim}, rank Gamma = {k.rank_gamma}, "
             f"rank A = {k.rank_a}, verdict {k.verdict}"]
    if int(tool_rank) > min(k.dim, k.n_samples * k.widths[-1]) and matrix == "gamma":
        lines.append(f"no exact rank of Gamma exceeds min(dim, n N_L) = {min(k.dim, k.n_samples * k.widths[-1])}")
    for r in k.resolutions:
        ties = ", ".join(f"sample {s} ({l},{v}) {'active' if a else 'inactive'}" for s, l, v, a in r.ties)
        lines.append(f"tie resolution [{ties}]: rank Gamma = {r.rank_gamma}, rank A = {r.rank_a}")
    lines += _explain(k, matrix, tolerance, rtol)
    raise AssertionError("\n  ".join(lines))
