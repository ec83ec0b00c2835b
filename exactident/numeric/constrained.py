"""Kept for one import: :func:`exactident.check.check` reads the layer graph's numeric block here.

The float ``Gamma_free`` of any network is built by :mod:`exactident.numeric.gamma_free` and the
report's ``numeric`` block lives in :mod:`exactident.numeric.block`; this alias goes once
``exactident.check`` imports :func:`exactident.numeric.block.report_numeric_block` itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["report_numeric_block"]


def report_numeric_block(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`exactident.numeric.block.report_numeric_block` (same arguments, same result)."""
    from exactident.numeric.block import report_numeric_block as block

    return block(*args, **kwargs)
