"""What every file importer shares: size limit, hashes, pickle refusal, the imported layers.

Safety rules (docs/import.md): a file larger than the limit is refused from
its size on disk (and a tensor from its declared shape) before anything is
allocated; pickles are never loaded (a file that starts like a pickle is
refused unless it is a PyTorch file, which ``torch.load(..., weights_only=True)``
reads with PyTorch's restricted unpickler).  A zip archive (``.npz``, ``.keras``,
``.pt``) is bounded as a whole before anything is decompressed
(:func:`check_zip`: the sum of its members' declared sizes within the limit, at
most :data:`MAX_RATIO` times the archive's size, stored or deflated members
only), then while decompressing (:class:`ZipBudget` counts the bytes actually
produced, never trusting the declared sizes).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exactident.errors import CaseFormatError
from exactident.io.importers.arrays import Tensor, join_dtypes, network_from_tensors
from exactident.io.importers.formats import DEFAULT_MAX_BYTES
from exactident.io.limits import check_regular
from exactident.model.network import Network

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_RATIO",
    "MAX_ZIP_DIRECTORY",
    "RATIO_FLOOR",
    "Imported",
    "ZipBudget",
    "activation_inside",
    "check_declared_size",
    "check_file_size",
    "check_zip",
    "clean_message",
    "framework_names",
    "looks_like_pickle",
    "natural_key",
    "open_zip",
    "read_limited",
    "sha256_file",
]



def _size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def check_file_size(path: str, max_bytes: int) -> int:
    """The file's size; refuse it before reading when larger than ``max_bytes``.

    Raises
    ------
    CaseFormatError
        The file cannot be read, is not a regular file (a FIFO, device, socket or folder:
        refused from ``stat``, never opened), or is larger than the limit.
    """
    st = check_regular(path)  # a FIFO, device or socket is refused without being opened
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


#: Largest ratio of an archive's decompressed contents to its size on disk, once the contents pass
#: :data:`RATIO_FLOOR` (Keras' own loader uses the same factor): weights compress by a few percent,
#: an archive of zeros by about a thousand.
MAX_RATIO = 100
#: Contents up to this size are never refused for their ratio (1 MiB).
RATIO_FLOOR = 2**20
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


#: Largest zip central directory accepted (1 MiB, about 10,000 members), checked before ``zipfile`` parses it:
#: parsing costs about 1 KB of memory per member, and a 64 MiB archive of empty members holds 800,000.
MAX_ZIP_DIRECTORY = 2**20


def open_zip(source: str, fileobj: Any) -> zipfile.ZipFile:
    """``zipfile.ZipFile(fileobj)`` after its central directory's size was checked (:data:`MAX_ZIP_DIRECTORY`).

    Raises
    ------
    CaseFormatError
        A central directory larger than :data:`MAX_ZIP_DIRECTORY`.
    zipfile.BadZipFile
        Not a zip archive.
    """
    end_record = getattr(zipfile, "_EndRecData", None)  # what ZipFile itself reads; absent: ZipFile alone
    if end_record is not None:
        rec = end_record(fileobj)
        if rec is None:
            raise zipfile.BadZipFile("File is not a zip file")
        size = int(rec[getattr(zipfile, "_ECD_SIZE", 5)])
        if size > MAX_ZIP_DIRECTORY:
            raise CaseFormatError(source, "", f"zip directory of {_size_text(size)} (more than about 10,000 "
                                              f"members): refused (at most {_size_text(MAX_ZIP_DIRECTORY)})")
        fileobj.seek(0)
    return zipfile.ZipFile(fileobj)


def _too_big(source: str, what: str, max_bytes: int) -> CaseFormatError:
    return CaseFormatError(source, "", f"{what}, more than the limit {_size_text(max_bytes)} "
                                       "(raise it with --max-bytes / max_bytes=)")


def check_zip(z: zipfile.ZipFile, source: str, max_bytes: int, archive_bytes: int, *,
              stored_only: bool = False) -> int:
    """Refuse an archive from its directory, before decompressing anything; the declared total.

    Parameters
    ----------
    z : zipfile.ZipFile
    source : str
        File named in the errors.
    max_bytes : int
        Limit on the sum of the members' declared (decompressed) sizes.
    archive_bytes : int
        The archive's size on disk (for the ratio).
    stored_only : bool
        Refuse compressed members (PyTorch archives are never compressed, and PyTorch
        decompresses on its own, beyond :class:`ZipBudget`'s reach).

    Raises
    ------
    CaseFormatError
        A member compressed otherwise than deflate (or at all, ``stored_only``), a declared
        total over ``max_bytes``, or more than :data:`MAX_RATIO` times ``archive_bytes``.
    """
    total = 0
    for info in z.infolist():
        method = _METHODS.get(info.compress_type)
        if method is None or (stored_only and method != "stored"):
            allowed = "stored" if stored_only else "stored or deflated"
            raise CaseFormatError(source, info.filename, f"zip compression method {info.compress_type} refused "
                                                         f"(only {allowed} members are read)")
        total += info.file_size
    if total > max_bytes:
        raise _too_big(source, f"archive expands to {_size_text(total)}", max_bytes)
    if total > RATIO_FLOOR and total > MAX_RATIO * max(archive_bytes, 1):
        raise CaseFormatError(source, "", f"archive expands {total // max(archive_bytes, 1)} times its size "
                                          f"({_size_text(total)}): refused as a decompression bomb (at most "
                                          f"{MAX_RATIO} times past {_size_text(RATIO_FLOOR)})")
    return total


class ZipBudget:
    """Decompress members of one archive, counting the bytes produced against ``max_bytes`` in all.

    Reads in 1 MiB blocks and stops one block past the budget, whatever the members declare.
    """

    def __init__(self, source: str, max_bytes: int) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self.left = max_bytes

    def read(self, z: zipfile.ZipFile, info: zipfile.ZipInfo | str) -> bytes:
        """The decompressed bytes of one member.

        Raises
        ------
        CaseFormatError
            The archive's decompressed bytes so far pass the limit.
        """
        chunks = []
        with z.open(info) as f:
            while block := f.read(min(2**20, self.left + 1)):
                self.left -= len(block)
                if self.left < 0:
                    name = info.filename if isinstance(info, zipfile.ZipInfo) else info
                    raise CaseFormatError(self.source, name, "decompressed data passes the limit "
                                          f"{_size_text(self.max_bytes)} (raise it with --max-bytes / max_bytes=)")
                chunks.append(block)
        return b"".join(chunks)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def activation_inside(source: str, at: str, activation: str, follower: str) -> CaseFormatError:
    """The refusal of a Sigmoid or Softmax that a layer follows (only a final one, over the outputs, is dropped).

    Named at the activation (``at``), not at the layer after it: the activation is what the network cannot
    hold.  The plain readers (ONNX, a torch ``Sequential``, a traced module) all say it so.

    Examples
    --------
    >>> e = activation_inside("m.onnx", "node 's' (Sigmoid)", "sigmoid", "node 'g' (Gemm)")
    >>> e.field, e.message.split(";")[1]
    ("node 's' (Sigmoid)", " node 'g' (Gemm) follows it)")
    """
    name = {"sigmoid": "Sigmoid", "softmax": "Softmax"}.get(activation.lower(), activation)
    return CaseFormatError(source, at, f"not piecewise linear inside the network (only a final {name} over the "
                                       f"outputs is dropped; {follower} follows it)")


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
    import hashlib  # here: it loads OpenSSL (3.7 MB resident); only imported model and sample files are hashed

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
    #: ``W_l`` / ``b_l`` -> the model's own name and index order, when the reader knows it (ONNX initializers)
    parameter_names: dict[str, str] | None = None
    forward: Callable[[Network, np.ndarray], str] | None = None

    def network(self, source: str) -> Network:
        return network_from_tensors(self.weights, self.biases, source, self.n_inputs, self.layout)

    @property
    def weight_dtype(self) -> str:
        return join_dtypes([t.dtype for t in self.weights] + [t.dtype for t in self.biases if t is not None])


#: Formats whose tensor names are the framework's parameter names (``fc1.weight``, ``layers/dense/kernel``,
#: ``coefs_[0]``, ``Dense_0/kernel``); a weight stored ``(N_{l-1}, N_l)`` (``in_out``) is indexed ``[j,i]``.
NAMED_FORMATS = ("torch-state-dict", "torch-module", "safetensors", "keras", "sklearn", "flax")


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
        out[f"W_{l}"] = f"{W.name}[j,i]" if imported.layout == "in_out" else f"{W.name}[i,j]"
        if b is not None:
            out[f"b_{l}"] = f"{b.name}[i]"
    return out
