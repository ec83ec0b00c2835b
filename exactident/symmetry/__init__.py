"""Symmetries, exactly: canonical forms, equivalence, extraction audits, functional dimension and hidden symmetries."""
