"""Float rank tolerances judged against exact ranks (``exactident crosscheck``; docs/tolerances.md).

The subpackage is also callable: ``exactident.crosscheck(case)`` is :func:`exactident.api.crosscheck`.
"""
