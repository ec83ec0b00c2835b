"""Importers: trained networks and their data, brought in exactly (docs/import.md).

One module per format: :mod:`~exactident.io.importers.onnx_model` (ONNX,
cross-checked against ``onnx.reference``),
:mod:`~exactident.io.importers.torch_state_dict` (``torch.load(..., weights_only=True)``),
:mod:`~exactident.io.importers.safetensors_file`,
:mod:`~exactident.io.importers.keras_file` (h5py; Keras itself only for the forward check),
:mod:`~exactident.io.importers.npz_file`, and for in-memory models
:mod:`~exactident.io.importers.sklearn_mlp`, :mod:`~exactident.io.importers.flax_params` and
:mod:`~exactident.io.importers.torch_module`.
Samples come from ``.npy``, ``.npz`` or ``.csv`` (:mod:`~exactident.io.importers.sample`).
Every float is converted to its exact binary value
(:mod:`~exactident.io.importers.arrays`); nothing is ever unpickled; files over a
size limit are refused before anything is allocated.  The optional packages
(onnx, torch, safetensors, h5py) are imported only by the function that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exactident import _lazy_name
from exactident.io.importers.formats import DEFAULT_MAX_BYTES, FORMATS

if TYPE_CHECKING:  # the names below load on first use (PEP 562 ``__getattr__``)
    from exactident.io.importers.load import as_case, detect_format, import_model
    from exactident.io.importers.objects import from_flax, from_sklearn, from_torch
    from exactident.io.importers.sample import load_sample, parse_rows

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "as_case",
    "detect_format",
    "from_flax",
    "from_sklearn",
    "from_torch",
    "import_model",
    "load_sample",
    "parse_rows",
]

# Loaded on first use, so that a submodule (``command``, ``formats``) imports no importer: ``exactident
# check CASE.json`` loads none of them (nor the zip, hash and CSV modules
# of the standard library they use).
_LAZY = {"as_case": "exactident.io.importers.load", "detect_format": "exactident.io.importers.load",
         "import_model": "exactident.io.importers.load", "from_flax": "exactident.io.importers.objects",
         "from_sklearn": "exactident.io.importers.objects", "from_torch": "exactident.io.importers.objects",
         "load_sample": "exactident.io.importers.sample", "parse_rows": "exactident.io.importers.sample"}


def __getattr__(name: str) -> Any:
    return _lazy_name(globals(), _LAZY, __name__, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
