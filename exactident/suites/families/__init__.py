"""The families of generated cases: what each builds and the property it promises.

A :class:`~exactident.suites.families.common.Family` has a ``build``
(request -> :class:`~exactident.suites.draft.Draft`, searching until its
property holds), a ``verify`` (the property, checked exactly by
:mod:`exactident.suites.exact`, independently of the engine's verdict) and an
``impossible`` test for architectures where the property cannot hold.  The
promise is about the case, never about the verdict: the verdict in a case's
``expected`` block is whatever the engine computes.
docs/suites.md lists the families and their guarantees.
"""

from __future__ import annotations

from exactident.suites.families import architectures, basic, boundary, floats, gap, trained
from exactident.suites.families.common import Family, Unmet

__all__ = ["FAMILIES", "Family", "get_family"]


def _families() -> dict[str, Family]:
    out: dict[str, Family] = {}
    for module in (basic, boundary, gap, floats, trained, architectures):
        for fam in module.FAMILIES:
            out[fam.name] = fam
    return out


#: Every family by name, in the order of the modules below.
#:
#: :meta hide-value:
FAMILIES: dict[str, Family] = _families()


def get_family(name: str) -> Family:
    """The family called ``name``.

    Raises
    ------
    UnsupportedCaseError
        Unknown name (the message lists the known ones).
    """
    if name not in FAMILIES:
        raise Unmet(f"unknown family {name!r} (known: {', '.join(FAMILIES)})")
    return FAMILIES[name]
