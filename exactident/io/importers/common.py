"""What every file importer shares: size limit, hashes, pickle refusal, the imported layers.

Safety rules (docs/import.md): a file larger than the limit is refused from
its size on disk (and a tensor from its declared shape) before anything is
allocated; pickles are never loaded (a file that starts like a pickle is
refused unless it is a PyTorch file, which ``torch.load(..., weights_only=True)``
reads with PyTorch's restricted unpickler).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor, join_dtypes, network_from_tensors
from exactident.model.network import Network

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Imported",
    "check_declared_size",
    "check_file_size",
    "clean_message",
    "framework_names",
    "looks_like_pickle",
    "natural_key",
    "read_limited",
    "sha256_file",
]

#: Default limit on a model or sample file (and on any one declared tensor): 64 MiB.
#: An exact analysis of a network that large would not finish anyway; raise it with
#: ``--max-bytes`` (CLI) or ``max_bytes=`` (Python).
DEFAULT_MAX_BYTES = 64 * 2**20


def _size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def check_file_size(path: str, max_bytes: int) -> int:
    """The file's size; refuse it before reading when larger than ``max_bytes``.

    Raises
    ------
    CaseFormatError
        The file cannot be read, is not a regular file, or is larger than the limit.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CaseFormatError(path, "", f"cannot read file ({exc.strerror or exc})") from None
    if not os.path.isfile(path):
        raise CaseFormatError(path, "", "not a regular file")
    if st.st_size > max_bytes:
        raise CaseFormatError(path, "", f"file is {_size_text(st.st_size)}, larger than the limit "
                                        f"{_size_text(max_bytes)} (raise it with --max-bytes / max_bytes=)")
    return int(st.st_size)


def check_declared_size(source: str, name: str, n_bytes: int, max_bytes: int) -> None:
    """Refuse a tensor whose declared size (shape x item size) is over the limit, before allocating it."""
    if n_bytes > max_bytes:
        raise CaseFormatError(source, name, f"tensor of {_size_text(n_bytes)} is larger than the limit "
                                            f"{_size_text(max_bytes)} (raise it with --max-bytes / max_bytes=)")


def read_limited(path: str, max_bytes: int) -> bytes:
    """The whole file, after :func:`check_file_size`."""
    check_file_size(path, max_bytes)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise CaseFormatError(path, "", f"cannot read file ({exc.strerror or exc})") from None
    if len(data) > max_bytes:  # grew since stat
        raise CaseFormatError(path, "", f"file is larger than the limit {_size_text(max_bytes)}")
    return data


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def clean_message(exc: BaseException | str) -> str:
    """A third-party error message fit for one line: ANSI escapes removed, whitespace collapsed,
    its first sentence kept whole (never cut mid-sentence); the exception's class name when empty.

    Examples
    --------
    >>> esc = chr(27)
    >>> clean_message(f"Load failed. {esc}[1mdo this{esc}[0m only if\\n you trust it.")
    'Load failed.'
    >>> clean_message(f"{esc}[1mbold{esc}[0m text")
    'bold text'
    >>> clean_message(ValueError(""))
    'ValueError'
    """
    text = str(exc)
    text = " ".join(_ANSI.sub("", text).split())
    text = "".join(ch for ch in text if ch.isprintable())
    if not text:
        return type(exc).__name__ if isinstance(exc, BaseException) else ""
    return re.split(r"(?<=\w[.!?])\s+", text, maxsplit=1)[0]


def sha256_file(path: str) -> str:
    """Hex SHA-256 of a file (read in blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def looks_like_pickle(head: bytes) -> bool:
    """A pickle stream of protocol 2-5 starts with ``0x80`` and the protocol number."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def natural_key(name: str) -> list[object]:
    """Sort key that orders ``layer2`` before ``layer10`` and ``0.weight`` before ``10.weight``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@dataclass
class Imported:
    """The layers read from a model file, before the exact network is built.

    Attributes
    ----------
    weights : list of Tensor
        ``W_l`` in the stored layout (see ``layout``).
    biases : list of Tensor or None
    layout : {"out_in", "in_out"}
        ``out_in``: stored as ``(N_l, N_{l-1})`` (paper, PyTorch, ONNX Gemm with transB=1);
        ``in_out``: stored as ``(N_{l-1}, N_l)`` (scikit-learn, Keras, ONNX MatMul).
    fmt : str
        Format name recorded in the provenance.
    n_inputs : int or None
        ``N_0`` when the file states it.
    dropped_output_activation : str or None
        A final softmax/sigmoid that was dropped: the network analysed is the map up to
        the logits.
    """

    weights: list[Tensor]
    biases: list[Tensor | None]
    layout: str
    fmt: str
    n_inputs: int | None = None
    dropped_output_activation: str | None = None
    notes: list[str] = field(default_factory=list)
    #: ``W_l`` / ``b_l`` -> the model's own name and index order, when the reader knows it (ONNX initializers)
    parameter_names: dict[str, str] | None = None

    def network(self, source: str) -> Network:
        return network_from_tensors(self.weights, self.biases, source, self.n_inputs, self.layout)

    @property
    def weight_dtype(self) -> str:
        return join_dtypes([t.dtype for t in self.weights] + [t.dtype for t in self.biases if t is not None])


#: Formats whose tensor names are the framework's parameter names (``fc1.weight``), stored ``(N_l, N_{l-1})``.
NAMED_FORMATS = ("torch-state-dict", "torch-module", "safetensors")


def framework_names(imported: Imported) -> dict[str, str] | None:
    """``provenance["parameter_names"]``: the paper's ``W_l`` / ``b_l`` -> the framework's name with its index
    order, e.g. ``{"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]"}`` (``W_1[i,j]`` is ``fc1.weight[i,j]``);
    the reader's own names when it has them (ONNX initializers, ``"W_1": "W1[j,i]"`` for a weight
    stored ``(N_0, N_1)``); None for formats without such names.

    Examples
    --------
    >>> import numpy as np
    >>> t = Imported([Tensor(np.eye(2), "m.pt", "fc1.weight")], [None], "out_in", "torch-state-dict")
    >>> framework_names(t)
    {'W_1': 'fc1.weight[i,j]'}
    """
    if imported.parameter_names:
        return dict(imported.parameter_names)
    if imported.fmt not in NAMED_FORMATS:
        return None
    out = {}
    for l, (W, b) in enumerate(zip(imported.weights, imported.biases), start=1):
        out[f"W_{l}"] = f"{W.name}[i,j]"
        if b is not None:
            out[f"b_{l}"] = f"{b.name}[i]"
    return out
