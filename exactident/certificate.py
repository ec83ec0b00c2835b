"""``exactident verify-certificate`` (issue 3; placeholder)."""

from __future__ import annotations

from .errors import UnsupportedCaseError

__all__ = ["run_verify_certificate"]


def run_verify_certificate(case_path: str, report_path: str) -> int:
    raise UnsupportedCaseError("verify-certificate is not implemented yet")
