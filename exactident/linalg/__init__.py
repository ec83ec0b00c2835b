"""Twin linear-algebra backends: :mod:`.exact` (Q, via FLINT) and :mod:`.floating` (float64)."""
