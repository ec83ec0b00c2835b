"""PyTorch state dicts and checkpoints (``.pt``, ``.pth``, ``.bin``, ``.ckpt``), read with
``torch.load(path, weights_only=True)`` only.

``weights_only=True`` makes PyTorch use its restricted unpickler, which
builds tensors and plain containers and refuses every other object: a file
that needs anything else is refused, never executed.  The state dict maps
``<prefix>.weight`` / ``<prefix>.bias`` to tensors, at the top level or, in a
training checkpoint, under the key ``model_state_dict`` (the PyTorch
tutorial's ``{"epoch", "model_state_dict", "optimizer_state_dict", ...}``),
``state_dict`` or ``model``; layers are taken in the dict's order
(:mod:`exactident.io.importers.named`).  A TorchScript archive
(``torch.jit.save``) and a whole pickled module (``torch.save(model)``) are
refused by name with what to save instead.  torch's own warnings are kept off
stderr and its messages are cleaned (no ANSI escapes, whole first sentence).
Needs the ``torch`` extra, torch 2.10 or later (:data:`MIN_TORCH`):
``weights_only=True`` could be bypassed before 2.6 (CVE-2025-32434) and corrupt
memory before 2.10 (CVE-2026-24747), so an older torch is refused before any
file is loaded.
"""

from __future__ import annotations

import re
import warnings
import zipfile
from collections.abc import Mapping
from typing import Any

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor
from exactident.io.importers.common import Imported, check_file_size, check_zip, clean_message, open_zip
from exactident.io.importers.named import layers_from_state_dict

__all__ = ["CHECKPOINT_KEYS", "MIN_TORCH", "check_torch_version", "read_torch_state_dict"]

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


#: Keys under which training checkpoints keep the model's state dict, tried in this order.
CHECKPOINT_KEYS = ("model_state_dict", "state_dict", "model")

_SAVE_INSTEAD = ("save model.state_dict() with torch.save and import it with its module class "
                 "(exactident.from_torch(model, X) in Python, or --reference), or export the model to ONNX")


def _is_whole_module(path: str, names: list[str]) -> bool:
    """A pickled ``nn.Module``: its ``data.pkl`` holds the module's ``__dict__`` keys (read as bytes, never
    unpickled)."""
    pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
    if not pkl:
        return False
    try:
        with zipfile.ZipFile(path) as z:
            data = z.read(pkl[0])
    except (zipfile.BadZipFile, OSError, KeyError):
        return False
    return b"_modules" in data and b"_parameters" in data


def _load(path: str, names: list[str]) -> Any:
    torch = _torch(path)
    import pickle

    try:
        with warnings.catch_warnings():  # torch warns on stderr about archives it dispatches elsewhere
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if _is_whole_module(path, names):
            found = re.search(r"GLOBAL (\S+) was not", str(exc))
            what = f" of class {found.group(1)}" if found else ""
            raise CaseFormatError(path, "", f"a whole pickled module{what} (torch.save(model)) is refused, never "
                                            f"unpickled; {_SAVE_INSTEAD}") from None
        found = re.search(r"Unsupported global: (GLOBAL \S+)", str(exc))
        why = found.group(1) if found else clean_message(exc)
        raise CaseFormatError(path, "", "refused: not a plain state dict of tensors (torch.load with "
                                        f"weights_only=True, never full unpickling, found {why})") from None
    except Exception as exc:  # torch raises RuntimeError, EOFError, ... on damaged files
        raise CaseFormatError(path, "", f"corrupted or not a PyTorch file ({type(exc).__name__}: "
                                        f"{clean_message(exc)})") from None


def _state_dict(obj: Any, path: str, torch: Any) -> Mapping[str, Any]:
    """The model's state dict: ``obj`` itself when it maps names to tensors, else the first of
    :data:`CHECKPOINT_KEYS` that holds one."""
    if not isinstance(obj, Mapping):
        raise CaseFormatError(path, "", f"expected a state dict (a mapping of names to tensors), found "
                                        f"{type(obj).__name__}")
    if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    for key in CHECKPOINT_KEYS:
        inner = obj.get(key)
        if isinstance(inner, Mapping) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
            return inner
    if obj and not any(isinstance(v, Mapping) for v in obj.values()):  # flat: name the first non-tensor
        name, value = next((k, v) for k, v in obj.items() if not isinstance(v, torch.Tensor))
        raise CaseFormatError(path, str(name), f"expected a tensor, found {type(value).__name__}")
    keys = ", ".join(repr(str(k)) for k in list(obj)[:12]) + (", ..." if len(obj) > 12 else "")
    raise CaseFormatError(path, "", f"no state dict found: the keys are {keys or 'none'} (expected tensors named "
                                    f"<layer>.weight / <layer>.bias, or a checkpoint holding them under "
                                    f"{', '.join(CHECKPOINT_KEYS)})")


def read_torch_state_dict(path: str, max_bytes: int) -> Imported:
    """Read the Linear layers of a PyTorch state dict or training checkpoint file.

    Raises
    ------
    UnsupportedCaseError
        torch is not installed, or older than :data:`MIN_TORCH`.
    CaseFormatError
        Over the size limit or a zip bomb (:func:`~exactident.io.importers.common.check_zip`);
        a TorchScript archive or a whole pickled module (saying what to save
        instead); refused by ``weights_only=True`` (a pickle of other objects); corrupted; no state
        dict found (listing the keys); two names sharing one tensor (tied weights); not a Linear/ReLU
        layer list.
    """
    size = check_file_size(path, max_bytes)
    names: list[str] = []
    if zipfile.is_zipfile(path):  # PyTorch decompresses by itself: only stored (uncompressed) members
        try:
            with open(path, "rb") as fh, open_zip(path, fh) as z:
                names = z.namelist()
                if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
                    raise CaseFormatError(path, "", "a TorchScript archive (torch.jit.save) holds code and is not "
                                                    f"read; {_SAVE_INSTEAD}")
                check_zip(z, path, max_bytes, size, stored_only=True)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise CaseFormatError(path, "", f"corrupted or not a PyTorch file ({type(exc).__name__}: "
                                            f"{clean_message(exc)})") from None
    obj = _load(path, names)
    import torch

    sd = _state_dict(obj, path, torch)
    shapes = []
    storages: dict[int, str] = {}
    for name, value in sd.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise CaseFormatError(path, str(name), f"expected a tensor, found {type(value).__name__}")
        shapes.append(tuple(value.shape))
        if value.numel():  # torch.save keeps shared storage: tied weights load as one tensor under two names
            first = storages.setdefault(value.untyped_storage().data_ptr(), name)
            if first != name:
                raise CaseFormatError(path, name, f"tied weights: {first} and {name} are one tensor (one parameter "
                                                  "feeding several layers); tied networks are not supported "
                                                  "(reading each name as its own layer would analyse the untied "
                                                  "network, which has more parameters)")
    return layers_from_state_dict(list(sd), shapes, lambda n: Tensor(sd[n], path, n), path, "torch-state-dict")
