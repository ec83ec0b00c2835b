"""The rules that decide a constrained network (layer graph), each with the hypotheses it needs.

A rule runs on every network that meets its hypotheses and on no other: Theorem 8 of the paper
(``C_N``) is proved for the dense layered ReLU MLP only, so it is listed here to say why it never
runs on a layer graph; the certificates whose proofs need only exact evaluation of the network
(lines of constant outputs, submersions, the immersion argument) run on every layer graph, and Theorem 8's
argument itself, completed by a witness point, on every layer graph (``constant-rank``).

Each report of a layer graph (:func:`exactident.check.check`) carries ``rules``: one entry
per rule, ``{"rule", "status", "why"}`` with ``status``

- ``"decided"``: the rule gave the verdict (``decided_by``);
- ``"tried"``: its hypotheses hold, it ran and did not settle the case (``why`` says what it found);
- ``"not-applicable"``: a hypothesis fails on this network (``why`` names it, one line);
- ``"not-run"``: its hypotheses hold but an earlier rule settled the case, or a size cap stopped it.

See docs/theory.md, "Rules and their hypotheses".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exactident.model.network import Network

__all__ = ["GRAPH_RULES", "STATUSES", "GraphRule", "rule_entries"]

#: The statuses of a rule in a report's ``rules``.
STATUSES = ("decided", "tried", "not-applicable", "not-run")


@dataclass(frozen=True)
class GraphRule:
    """One way to decide a constrained network.

    Attributes
    ----------
    name : str
        The ``decided_by`` value it gives.
    verdict : str
        ``identifiable`` or ``not-identifiable``.
    hypotheses : str
        What the network must be for the rule's proof to hold.
    source : str
        Where the proof is (paper, docs).
    fails : callable ``Network -> str or None``
        The first hypothesis that fails on a network, in one line; None when every one holds.
    """

    name: str
    verdict: str
    hypotheses: str
    source: str
    fails: Callable[[Network], str | None]


def _any(cn: Network) -> str | None:
    return None


def _theorem_8(cn: Network) -> str | None:
    if cn.is_plain():
        return None
    what = ", ".join(cn.features) if cn.features else "tied, fixed or shared parameters"
    return f"C_N is proved for the dense ReLU MLP with every weight and bias free only; this network has {what}"


#: The rules of the layer-graph engine, in the order they are tried.
#:
#: :meta hide-value:
GRAPH_RULES = (
    GraphRule("free-rank", "identifiable",
              "exact outputs piecewise polynomial in theta (every layer graph); every tie resolution enumerated; "
              "the rescalings S_H the family keeps in the kernel of Gamma_free",
              "the immersion argument (docs/theory.md, 'Beyond the layered ReLU MLP'; arXiv:2206.07424 Prop. 1)",
              _any),
    GraphRule("theorem-8", "not-identifiable",
              "a dense layered ReLU MLP, every weight and bias free (no convolution, pooling, skip, leaky ReLU, "
              "PReLU, fixed or tied entry)", "arXiv:2206.07424, Theorem 8 (C_N)", _theorem_8),
    GraphRule("dead-units", "not-identifiable",
              "exact evaluation (every layer graph); a ReLU unit dead, or a unit or input 0, on every sample",
              "exactident.boundary.dead_units", _any),
    GraphRule("constant-units", "not-identifiable",
              "exact evaluation (every layer graph); a unit constant on the sample whose outgoing weight and next "
              "bias are free and used once", "exactident.boundary.dead_units", _any),
    GraphRule("submersion", "not-identifiable",
              "exact evaluation (every layer graph); no tie but persistent ones; Gamma_free of full row rank",
              "exactident.boundary.submersion", _any),
    GraphRule("entering-submersion", "not-identifiable",
              "exact evaluation (every layer graph); a kernel direction entering one tie resolution strictly",
              "exactident.boundary.submersion", _any),
    GraphRule("line", "not-identifiable",
              "exact evaluation along a straight line (every layer graph): outputs on X constant on [0, t0], "
              "f(x*) moving at a probe", "exactident.boundary.kernel_line (the plain engine's line certificate)",
              _any),
    GraphRule("constant-rank", "not-identifiable",
              "exact evaluation (every layer graph; a PReLU slope goes into the lifting); no sample on a kink but "
              "persistent ties; rank Gamma_free = rank A (alpha with each unit's derivative) < n N_L; a point y "
              "raising the rank", "Theorem 8's proof (arXiv:2206.07424) with a witness point: exactident.boundary."
              "constant_rank (docs/theory.md, 'A necessary condition beyond the dense ReLU MLP')", _any),
)


def rule_entries(cn: Network, decided: str, tried: dict[str, str],
                 skipped: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The report's ``rules``: one ``{"rule", "status", "why"}`` per rule of :data:`GRAPH_RULES`.

    Parameters
    ----------
    cn : Network
    decided : str
        The report's ``decided_by`` (``"none"``: no rule decided).
    tried : dict rule -> str
        Rules that ran without settling the case, with what they found (one line).
    skipped : dict rule -> str, optional
        Rules whose hypotheses hold that a size cap stopped, with the cap (one line).

    Examples
    --------
    >>> from exactident.model.network import Network
    >>> cn = Network((1, 1, 1), [[[1]], [[1]]], [[0], [0]])
    >>> cn.features = ("leaky ReLU",)
    >>> [e["status"] for e in rule_entries(cn, "free-rank", {})][:2]
    ['decided', 'not-applicable']
    """
    skipped = skipped or {}
    out = []
    for rule in GRAPH_RULES:
        failed = rule.fails(cn)
        if failed is not None:
            status, why = "not-applicable", failed
        elif rule.name == decided:
            status, why = "decided", f"gave the verdict ({rule.source})"
        elif rule.name in tried:
            status, why = "tried", tried[rule.name]
        elif rule.name in skipped:
            status, why = "not-run", skipped[rule.name]
        else:
            status, why = "not-run", "not needed: another rule settled the case" if decided != "none" else \
                "its other conditions do not hold on this sample"
        out.append({"rule": rule.name, "status": status, "why": why})
    return out
