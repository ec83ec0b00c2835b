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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor, join_dtypes, network_from_tensors
from exactident.model.network import Network

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Imported",
    "check_declared_size",
    "check_file_size",
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
    forward : callable or None
        ``forward(net, X) -> summary``: the framework's own forward pass on ``X`` (float64,
        ``(n, N_0)``) compared with the imported network
        (:func:`~exactident.io.importers.forward_check.forward_check`); raises
        ``CaseFormatError`` on a mismatch.
    """

    weights: list[Tensor]
    biases: list[Tensor | None]
    layout: str
    fmt: str
    n_inputs: int | None = None
    dropped_output_activation: str | None = None
    notes: list[str] = field(default_factory=list)
    forward: Callable[[Network, np.ndarray], str] | None = None

    def network(self, source: str) -> Network:
        return network_from_tensors(self.weights, self.biases, source, self.n_inputs, self.layout)

    def parameter_names(self) -> dict[str, str]:
        """The framework's name of every parameter: ``{"W_1[i,j]": "layers/dense/kernel[j,i]", "b_1[i]": ...}``.

        ``W_l[i,j]`` is row ``i`` (output), column ``j`` (input), as in the paper; a tensor
        stored ``(N_{l-1}, N_l)`` (``in_out``) names the same number ``[j,i]``.  Biases absent
        from the model (zeros) have no entry.
        """
        names: dict[str, str] = {}
        for l, (W, b) in enumerate(zip(self.weights, self.biases), start=1):
            n_out, n_in = W.shape if self.layout == "out_in" else W.shape[::-1]
            for i in range(n_out):
                for j in range(n_in):
                    names[f"W_{l}[{i},{j}]"] = f"{W.name}[{j},{i}]" if self.layout == "in_out" else f"{W.name}[{i},{j}]"
            if b is not None:
                names.update({f"b_{l}[{i}]": f"{b.name}[{i}]" for i in range(n_out)})
        return names

    @property
    def weight_dtype(self) -> str:
        return join_dtypes([t.dtype for t in self.weights] + [t.dtype for t in self.biases if t is not None])
