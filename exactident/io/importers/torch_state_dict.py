"""PyTorch state dicts (``.pt``, ``.pth``, ``.bin``), read with ``torch.load(path, weights_only=True)`` only.

``weights_only=True`` makes PyTorch use its restricted unpickler, which
builds tensors and plain containers and refuses every other object: a file
that needs anything else is refused, never executed.  The state dict must
map ``<prefix>.weight`` / ``<prefix>.bias`` to tensors (optionally under a
top-level ``"state_dict"`` key); layers are taken in the dict's order
(:mod:`exactident.io.importers.named`).  Needs the ``torch`` extra.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, check_file_size, check_zip
from exactident.io.importers.named import layers_from_state_dict

__all__ = ["read_torch_state_dict"]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def read_torch_state_dict(path: str, max_bytes: int) -> Imported:
    """Read the Linear layers of a PyTorch state dict file.

    Raises
    ------
    UnsupportedCaseError
        torch is not installed.
    CaseFormatError
        Over the size limit, refused by ``weights_only=True`` (a pickle of other objects),
        corrupted, not a mapping of tensors, or not a Linear/ReLU layer list.
    """
    size = check_file_size(path, max_bytes)
    if zipfile.is_zipfile(path):  # PyTorch decompresses by itself: only stored (uncompressed) members
        try:
            with zipfile.ZipFile(path) as z:
                check_zip(z, path, max_bytes, size, stored_only=True)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise CaseFormatError(path, "", f"corrupted or not a PyTorch file ({_first_line(exc)})") from None
    try:
        import torch
    except ImportError:
        raise UnsupportedCaseError(f"{path}: reading PyTorch files needs torch "
                                   "(pip install 'exactident[torch]')") from None
    import pickle

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CaseFormatError(path, "", "refused: not a plain state dict of tensors (torch.load with "
                                        f"weights_only=True, never full unpickling; {_first_line(exc)})") from None
    except Exception as exc:  # torch raises RuntimeError, EOFError, ... on damaged files
        raise CaseFormatError(path, "", f"corrupted or not a PyTorch file ({_first_line(exc)})") from None
    if isinstance(obj, Mapping) and "state_dict" in obj and isinstance(obj["state_dict"], Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping):
        raise CaseFormatError(path, "", f"expected a state dict (a mapping of names to tensors), found "
                                        f"{type(obj).__name__}")
    shapes = []
    for name, value in obj.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise CaseFormatError(path, str(name), f"expected a tensor, found {type(value).__name__}")
        shapes.append(tuple(value.shape))
    return layers_from_state_dict(list(obj), shapes, lambda n: Tensor(obj[n], path, n), path, "torch-state-dict")
