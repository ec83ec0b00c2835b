"""The family lists of :mod:`exactident.testing` (standard library only, so the package exports them at once).

The families themselves are ``exactident.suites.families.FAMILIES`` (docs/suites.md).
"""

from __future__ import annotations

__all__ = ["DEFAULT_FAMILIES", "FLOAT_TRAP_FAMILIES", "FREE_SAMPLE_SIZE"]

#: Families :func:`~exactident.testing.strategies.known_cases` draws from by default, simplest first
#: (shrinking goes toward the first).
#: Left out: ``trained`` (needs scikit-learn, about a second per case), the layer-graph families, and
#: ``degenerate`` (a neuron in ``S``: the paper's ``Gamma`` leaves out one edge per hidden neuron, which is
#: then not a rescaling chart, and its rank is not that of a Jacobian in every parameter).
DEFAULT_FAMILIES: tuple[str, ...] = ("generic", "all-active", "dead-neuron", "twins", "gap", "boundary",
                                     "near-kink", "rescaled", "float32-trap")
#: Families built to be hard in floating point: a sample exactly on a kink (rounding the sample or the
#: parameters may move it to either side), within ``10^-k`` of one, a neuron rescaled by ``10^+-k``, or
#: float32 rounding of the parameters moving a sample across a kink.  A float tool fed ``arrays()`` may
#: legitimately see another activation pattern on these; leave them out to test the rank computation alone.
FLOAT_TRAP_FAMILIES: tuple[str, ...] = ("boundary", "near-kink", "rescaled", "float32-trap")
#: Families whose construction works for any sample size (``gap`` searches its own).
FREE_SAMPLE_SIZE: frozenset[str] = frozenset(DEFAULT_FAMILIES) - {"gap"} | {"degenerate"}
