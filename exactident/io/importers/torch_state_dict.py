"""PyTorch state dicts (``.pt``, ``.pth``, ``.bin``), read with ``torch.load(path, weights_only=True)`` only.

``weights_only=True`` makes PyTorch use its restricted unpickler, which
builds tensors and plain containers and refuses every other object: a file
that needs anything else is refused, never executed.  The state dict must
map ``<prefix>.weight`` / ``<prefix>.bias`` to tensors (optionally under a
top-level ``"state_dict"`` key); layers are taken in the dict's order
(:mod:`exactident.io.importers.named`).  Needs the ``torch`` extra, torch 2.10 or
later (:data:`MIN_TORCH`): ``weights_only=True`` could be bypassed before 2.6
(CVE-2025-32434) and corrupt memory before 2.10 (CVE-2026-24747), so an older
torch is refused before any file is loaded.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping
from typing import Any

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, check_file_size, check_zip, open_zip
from exactident.io.importers.named import layers_from_state_dict

__all__ = ["MIN_TORCH", "check_torch_version", "read_torch_state_dict"]

#: Oldest torch whose ``torch.load(weights_only=True)`` has no known bypass (CVE-2026-24747, fixed in 2.10.0).
MIN_TORCH = (2, 10, 0)


def check_torch_version(version: str) -> None:
    """Refuse a torch older than :data:`MIN_TORCH` (a pre-release of it included).

    Raises
    ------
    UnsupportedCaseError
        One line naming the version found and the one needed.

    Examples
    --------
    >>> check_torch_version("2.13.0+cpu")
    >>> check_torch_version("2.5.1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    exactident.errors.UnsupportedCaseError: torch 2.5.1 is too old to load model files safely: ...
    """
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(.*)", version)
    found = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else (0, 0, 0)
    pre = bool(m) and re.match(r"\.?(a|b|rc|dev|alpha|beta)", m.group(4) if m else "") is not None
    if found < MIN_TORCH or (found == MIN_TORCH and pre):
        need = ".".join(map(str, MIN_TORCH))
        raise UnsupportedCaseError(f"torch {version} is too old to load model files safely: "
                                   f"torch.load(weights_only=True) can be bypassed before {need} "
                                   f"(CVE-2025-32434, CVE-2026-24747); pip install 'torch>=2.10'")


def _torch(path: str) -> Any:
    try:
        import torch
    except ImportError:
        raise UnsupportedCaseError(f"{path}: reading PyTorch files needs torch "
                                   "(pip install 'exactident[torch]')") from None
    try:
        check_torch_version(str(torch.__version__))
    except UnsupportedCaseError as exc:
        raise UnsupportedCaseError(f"{path}: {exc}") from None
    return torch


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def read_torch_state_dict(path: str, max_bytes: int) -> Imported:
    """Read the Linear layers of a PyTorch state dict file.

    Raises
    ------
    UnsupportedCaseError
        torch is not installed, or older than :data:`MIN_TORCH`.
    CaseFormatError
        Over the size limit, refused by ``weights_only=True`` (a pickle of other objects),
        corrupted, not a mapping of tensors, or not a Linear/ReLU layer list.
    """
    size = check_file_size(path, max_bytes)
    if zipfile.is_zipfile(path):  # PyTorch decompresses by itself: only stored (uncompressed) members
        try:
            with open(path, "rb") as fh, open_zip(path, fh) as z:
                check_zip(z, path, max_bytes, size, stored_only=True)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise CaseFormatError(path, "", f"corrupted or not a PyTorch file ({_first_line(exc)})") from None
    torch = _torch(path)
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
