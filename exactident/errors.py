"""One exception tree for exactident: every error the library raises is an ``ExactIdentError``.

``ExactIdentError`` is the root.  The CLI maps ``CaseFormatError`` and
``UnsupportedCaseError`` to exit status 2 and everything else (``OutputError``
included) to 1.
"""

from __future__ import annotations

__all__ = [
    "CaseFormatError",
    "ExactIdentError",
    "InvariantViolation",
    "OutputError",
    "UnsupportedCaseError",
]


class ExactIdentError(Exception):
    """Root of every error exactident raises on purpose."""


class CaseFormatError(ExactIdentError):
    """A case file (or report) is malformed.

    Parameters
    ----------
    source : str
        File name (or ``"<case>"`` for in-memory objects).
    field : str
        JSON path of the offending value, e.g. ``weights[1][0][2]``.
    message : str
        What was expected and what was found.

    Examples
    --------
    >>> str(CaseFormatError("a.json", "weights[1][0][2]", "expected a number, found true"))
    'a.json: weights[1][0][2]: expected a number, found true'
    """

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


class UnsupportedCaseError(ExactIdentError):
    """A well-formed case the tool refuses (e.g. ``|P|`` too large to materialise)."""


class InvariantViolation(ExactIdentError):
    """An exact identity of the theory (Prop. 1, Prop. 10, ...) failed: a bug."""


class OutputError(ExactIdentError):
    """Writing an output (a file or standard output) failed, e.g. disk full (CLI exit 1).

    Examples
    --------
    >>> str(OutputError("out.csv", OSError(28, "No space left on device")))
    'cannot write out.csv: No space left on device'
    """

    def __init__(self, target: str, exc: OSError) -> None:
        self.target = target
        super().__init__(f"cannot write {target}: {exc.strerror or exc}")
