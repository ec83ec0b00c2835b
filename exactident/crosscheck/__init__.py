"""Float rank tolerances judged against exact ranks (``exactident crosscheck``; docs/tolerances.md).

The subpackage is also callable: ``exactident.crosscheck(case)`` is :func:`exactident.api.crosscheck`.
"""

import sys as _sys

from exactident.api import CallablePackage as _CallablePackage

_sys.modules[__name__].__class__ = _CallablePackage  # however the subpackage is first imported
