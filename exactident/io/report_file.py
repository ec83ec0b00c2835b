"""Read a report file (``exactident-report/1`` JSON) strictly.

Duplicate keys, deep nesting and unreadable files are bad input (:class:`exactident.errors.CaseFormatError`).
"""

from __future__ import annotations

import json
from typing import Any

from exactident.errors import CaseFormatError
from exactident.io.limits import DEFAULT_LIMITS, read_bounded

__all__ = ["read_report_json"]


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # json keeps the last value silently; a reader might see the first
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    """A JSON object with a repeated key (carries the key)."""


def read_report_json(path: str, max_bytes: int | None = None) -> Any:
    """The report file as plain JSON; every failure is a one-line :class:`CaseFormatError`.

    At most ``max_bytes + 1`` bytes are read (default: the case-file limit of
    :data:`exactident.io.limits.DEFAULT_LIMITS`); a larger file is refused.
    """
    data = read_bounded(path, max_bytes or DEFAULT_LIMITS.max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaseFormatError(path, "", f"cannot read file ({exc})") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CaseFormatError(path, "", f"not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise CaseFormatError(path, "", "not valid JSON (nested too deeply)") from None
    except _DuplicateKey as exc:
        raise CaseFormatError(path, "", f"not valid JSON (duplicate key {exc.args[0]!r})") from None
    except ValueError as exc:  # e.g. an integer with more digits than int() accepts
        raise CaseFormatError(path, "", f"not valid JSON ({exc})") from None
