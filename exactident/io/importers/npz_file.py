"""NumPy ``.npz`` weights: ``W1, b1, W2, b2, ...`` with ``W_l`` of shape ``(N_l, N_{l-1})``.

Read with ``allow_pickle=False`` after each member's header was checked
against the size limit (``exactident.io.importers.sample.npz_arrays``).
"""

from __future__ import annotations

from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported
from exactident.io.importers.named import layers_from_npz
from exactident.io.importers.sample import npz_arrays

__all__ = ["read_npz"]


def read_npz(path: str, max_bytes: int) -> Imported:
    """Read ``W1, b1, ...`` from an ``.npz``.

    Raises
    ------
    CaseFormatError
        Corrupted file, object (pickle) arrays, other array names, a missing ``W_l``.
    """
    arrays = npz_arrays(path, max_bytes)
    return layers_from_npz(list(arrays), lambda n: Tensor(arrays[n], path, n), path)
