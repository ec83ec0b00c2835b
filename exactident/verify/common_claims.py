"""Claims every report makes, checked by one rule for the plain MLP and the layer graph.

:mod:`exactident.verify.claims` (the plain MLP) and :func:`exactident.verify.certificate.verify_constrained` (the layer
graph) both call these: is the report about this case (:func:`identity_claims`), does it say it is not
certified (:func:`uncertified_claims`), and is a tie resolution's ``reachable: true`` backed by a
verified witness (:func:`reachable_claim`).  Nothing here trusts the report: each function compares
it with facts its caller recomputed from the case.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import TYPE_CHECKING, Any

from exactident.verify.arith import need
from exactident.verify.symmetry import softmax_rank_bound

if TYPE_CHECKING:
    from exactident.verify.facts import ConstrainedFacts

__all__ = ["LOCATION_KEYS", "RUN_KEYS", "SAMPLE_FILE_KEYS", "architecture_claims", "as_json_object",
           "identity_claims", "provenance_claims", "reachable_claim", "same_json", "typed_field",
           "uncertified_claims"]

#: Provenance fields that name a file by the path it was given as: the same file is ``wine/wine.onnx`` from one
#: folder and ``wine.onnx`` or an absolute path from another, so only the file name is compared; its content is
#: the ``sha256`` fields' (``sha256``, ``sample_sha256``, ``reference_sha256``), compared exactly.
LOCATION_KEYS = ("source_file", "config_file", "sample_file", "reference")
#: Provenance fields that describe the run that imported, not the files: the importer's version, and the
#: framework's own forward pass (its version, its float differences, or why it did not run).  Another machine
#: re-importing the same bytes words them differently: their text is not compared, but a field on one side
#: only is (a report claiming a forward check the case's import never had is refused).
RUN_KEYS = ("importer", "forward_check", "crosscheck")
#: Fields a report may leave out that the case has: a report made from a sample given in memory (an array in a
#: notebook) names no sample file, and the same rows verified from a file on disk are the same case.
SAMPLE_FILE_KEYS = ("sample_file", "sample_sha256")


def same_json(a: Any, b: Any) -> bool:
    """JSON equality that tells ``true`` from ``1`` (Python's ``==`` does not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return bool(a == b)


def provenance_claims(claim: Any, found: Any) -> list[str]:
    """The report's ``provenance`` against the case's (recomputed when the case is a model file).

    Equal as JSON, except the :data:`LOCATION_KEYS`, compared by file name (the last path component, ``/`` or
    ``\\``), the :data:`RUN_KEYS`, whose presence only is compared, and the :data:`SAMPLE_FILE_KEYS`, which
    the report may leave out.  One message per field that differs.

    Examples
    --------
    >>> a = {"source_file": "wine/wine.onnx", "sha256": "ab", "format": "onnx"}
    >>> provenance_claims(a, dict(a, source_file="/home/me/wine.onnx"))
    []
    >>> provenance_claims(dict(a, importer="exactident 0.1.0"), dict(a, importer="exactident 0.2.0"))
    []
    >>> provenance_claims(dict(a, forward_check="torch: max |difference| 0"), a)
    ["provenance.forward_check: the case's has no 'forward_check'"]
    >>> provenance_claims(a, dict(a, sha256="cd", source_file="other.onnx"))  # doctest: +NORMALIZE_WHITESPACE
    ["provenance.sha256: report says 'ab', the case's is 'cd'",
     "provenance.source_file: report says 'wine/wine.onnx', the case's is 'other.onnx' (file names differ)"]
    """
    if not isinstance(claim, dict) or not isinstance(found, dict):
        return [] if same_json(claim, found) else [f"provenance: report says {_short(claim)}, the case's is "
                                                   f"{_short(found)}"]
    fails = []
    for key in sorted(claim.keys() | found.keys()):
        if key not in found or key not in claim:
            if key not in claim and key in SAMPLE_FILE_KEYS:
                continue
            side = "the case's has no" if key not in found else "the report has no"
            fails.append(f"provenance.{key}: {side} {key!r}")
        elif key in RUN_KEYS:
            continue
        elif key in LOCATION_KEYS and isinstance(claim[key], str) and isinstance(found[key], str):
            if _file_name(claim[key]) != _file_name(found[key]):
                fails.append(f"provenance.{key}: report says {claim[key]!r}, the case's is {found[key]!r} "
                             "(file names differ)")
        elif not same_json(claim[key], found[key]):
            fails.append(f"provenance.{key}: report says {_short(claim[key])}, the case's is {_short(found[key])}")
    return fails


def as_json_object(provenance: Any) -> Any:
    """A case's ``provenance`` as the JSON value a report holds: a mapping as a dict, anything else as it is."""
    return dict(provenance) if isinstance(provenance, Mapping) else provenance


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:120] + "..."


def typed_field(report: dict, key: str, kind, allow_none: bool = False) -> Any:
    """``report[key]`` checked to be of ``kind`` (:class:`~exactident.verify.arith.BadField` otherwise).

    None when the key is absent (or null, with ``allow_none``).
    """
    if key not in report or (allow_none and report[key] is None):
        return None
    return need(report, key, kind, "")


def identity_claims(report: dict, name: str | None, widths: list[int], n: int,
                    dim: int | None = None) -> list[str]:
    """Is the report about this case at all?  ``name``, ``widths``, ``n_samples``, ``dim`` compared first.

    A report of another case fails here, with one line per differing field,
    before any certificate part is read (its parts would fail for shape
    reasons that hide the real mistake).  Fields of the wrong type are left to
    :func:`exactident.verify.claims.structural_claims`. The same rule serves the plain MLP and the layer graph:
    ``dim`` defaults to the MLP's ``N_0 N_1 + ... + N_{L-1} N_L + N_L``; a layer graph passes
    its ``dim_free`` (its widths are its layers' widths). ``name`` None: not compared.

    Examples
    --------
    ``dim`` of widths 13,8,3 is 13*8 + 8*3 + 3 = 131:

    >>> identity_claims({"name": "iris", "widths": [4, 8, 3], "dim": 67}, "wine", [13, 8, 3], 20)
    ["name: the report is for case 'iris' but the case file is named 'wine'", \
'widths: report says [4, 8, 3], the case has [13, 8, 3]', 'dim: report says 67, the case gives 131']
    """
    fails = []
    got_name = report.get("name")
    if isinstance(got_name, str) and name is not None and got_name != name:
        fails.append(f"name: the report is for case {got_name!r} but the case file is named {name!r}")
    got_widths = report.get("widths")
    typed = isinstance(got_widths, list) and all(type(w) is int for w in got_widths)  # else: the schema's
    if typed and not same_json(got_widths, list(widths)):
        fails.append(f"widths: report says {got_widths}, the case has {list(widths)}")
    if dim is None:
        dim = sum(widths[l] * widths[l + 1] for l in range(len(widths) - 1)) + widths[-1]
    for key, value in (("n_samples", n), ("dim", dim)):
        got = report.get(key)
        if isinstance(got, int) and not isinstance(got, bool) and got != value:
            fails.append(f"{key}: report says {got}, the case gives {value}")
    return fails


def reachable_claim(pattern: dict, at: str, witnessed: bool) -> list[str]:
    """A ``patterns`` entry's ``reachable``: ``true`` only beside a verified witness for its resolution.

    One rule for the plain MLP (witnesses in ``certificate.boundary.resolutions[j].reachable``) and the layer
    graph (which has no reachability witness part: ``witnessed`` is False, so only ``"unknown"`` or no field).
    A resolution can be unreachable (a tie on a unit fed only by ``relu`` outputs through fixed weights,
    ``z = relu(z')``, is never negative), so ``true`` is a claim that needs its proof.

    Parameters
    ----------
    pattern : dict
        The report's ``patterns[j]`` (JSON).
    at : str
        Its path, for messages.
    witnessed : bool
        A witness for this resolution was verified.

    Returns
    -------
    list of str
        The failure, or nothing.
    """
    reach = pattern.get("reachable", "unknown")
    if reach is True and not witnessed:
        return [f"{at}.reachable: report says true, but the certificate has no reachability witness for this "
                "resolution"]
    if reach is not True and reach != "unknown":
        return [f"{at}.reachable: report says {reach!r}, expected true (with a witness) or 'unknown'"]
    return []


def uncertified_claims(report: dict) -> list[str]:
    """Failures for a report that says it is not certified: Monte Carlo ranks, or a timed-out analysis.

    Such a report is never valid, whatever else it holds: its ranks and verdict
    are not backed by a proof (docs/cli.md, ``--certify none`` and ``--timeout``).
    """
    fails = []
    timed_out = typed_field(report, "timed_out", bool)
    if timed_out:
        at = report.get("stage")
        fails.append("timed_out: the report says its analysis ran out of time"
                     + (f" (at {at})" if isinstance(at, str) else "")
                     + ": it decides nothing and certifies nothing")
    certified = typed_field(report, "certified", bool)
    if certified is False or "error_probability" in report:
        prob = report.get("error_probability")
        shown = f", error probability <= {prob}" if isinstance(prob, (int, float)) else ""
        fails.append(f"certified: the report says its ranks are Monte Carlo ranks, not certified{shown}: "
                     "nothing backs its ranks or verdict")
    return fails


def architecture_claims(report: dict, facts: ConstrainedFacts, name: str | None, input_shape: Any,
                        provenance: Any) -> list[str]:
    """A layer graph's ``name``, ``widths``, ``n_samples``, ``dim`` (``= dim_free``), ``on_boundary``, ``n_ties``,
    ``provenance``, ``architecture`` and the fields Theorem 8 would need (``cn``, ``rank_a``: null), recomputed."""
    cn, sym, fails = facts.cn, facts.symmetry, []
    features = ", ".join(cn.features) or "this architecture"

    def claim(field: str, found: Any, claimed: Any) -> None:
        if claimed != found:
            fails.append(f"{field}: the case gives {found!r}, the report claims {claimed!r}")

    arch = report["architecture"]
    for key, found in (("name", name), ("widths", cn.layer_widths), ("n_samples", len(facts.X)),
                       ("dim", sym.dim_free), ("on_boundary", bool(facts.ties)), ("n_ties", len(facts.ties))):
        if key in report and (found is not None or key != "name"):
            claim(key, found, report[key])
    if "provenance" in report:
        fails += provenance_claims(report["provenance"], as_json_object(provenance))
    claim("architecture.features", sorted(cn.features), sorted(arch["features"]))
    for key, found in (("n_params", cn.n_params), ("rank_t", sym.rank_t), ("symmetry_dim", sym.symmetry_dim),
                       ("dim_free", sym.dim_free)):
        claim(f"architecture.{key}", found, arch[key])
    if "softmax_rank_bound" in arch:
        claim("architecture.softmax_rank_bound", softmax_rank_bound(cn, sym), arch["softmax_rank_bound"])
    if "input_shape" in arch:
        if input_shape is not None:
            claim("architecture.input_shape", list(input_shape), arch["input_shape"])
        elif prod(arch["input_shape"]) != cn.widths[0]:
            fails.append(f"architecture.input_shape: {arch['input_shape']} does not hold {cn.widths[0]} inputs")
    if report.get("cn") is not None:
        fails.append(f"cn: Theorem 8 (C_N) is not proved for {features}: a constrained report must say null")
    if report.get("rank_a") is not None:
        fails.append(f"rank_a: R_A is not used for {features} (Theorem 8 is not proved for it): must be null")
    if report.get("degenerate"):
        fails.append("degenerate: no degenerate rule is proved for constrained networks")
    return fails
