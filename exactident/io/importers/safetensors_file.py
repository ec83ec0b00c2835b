"""safetensors files, read with the ``safetensors`` library, bfloat16 included.

The library's ``deserialize`` checks the header (offsets, sizes, dtypes) and
hands each tensor's raw little-endian bytes; exactident turns them into
numbers itself, so bfloat16 (which numpy lacks) is read from its bits like
the other float types.  Tensor names follow PyTorch's ``<prefix>.weight`` /
``<prefix>.bias`` (:mod:`exactident.io.importers.named`), layers in natural
name order.  Needs the ``safetensors`` extra.
"""

from __future__ import annotations

import numpy as np

from exactident.errors import CaseFormatError, UnsupportedCaseError
from exactident.io.importers.arrays import Tensor, bfloat16_bits_to_float32
from exactident.io.importers.common import Imported, check_declared_size, clean_message, read_limited
from exactident.io.importers.named import layers_from_state_dict

__all__ = ["read_safetensors"]

# safetensors dtype -> (numpy dtype of the raw bytes, name recorded)
_DTYPES = {"F64": ("<f8", "float64"), "F32": ("<f4", "float32"), "F16": ("<f2", "float16"),
           "BF16": ("<u2", "bfloat16"), "I64": ("<i8", "int64"), "I32": ("<i4", "int32"),
           "I16": ("<i2", "int16"), "I8": ("i1", "int8"), "U8": ("u1", "uint8")}


def read_safetensors(path: str, max_bytes: int) -> Imported:
    """Read the Linear layers of a safetensors file.

    Raises
    ------
    UnsupportedCaseError
        The safetensors library is not installed.
    CaseFormatError
        Over the size limit, a corrupted header or data, an unsupported dtype (naming the
        tensor), or not a Linear/ReLU layer list.
    """
    try:
        from safetensors import deserialize
    except ImportError:
        raise UnsupportedCaseError(f"{path}: reading safetensors needs the safetensors package "
                                   "(pip install 'exactident[safetensors]')") from None
    data = read_limited(path, max_bytes)
    try:
        flat = deserialize(data)
    except Exception as exc:  # SafetensorError and friends: a damaged file
        raise CaseFormatError(path, "", f"corrupted or not a safetensors file ({clean_message(exc)})") from None
    tensors = {}
    for name, info in flat:
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise CaseFormatError(path, name, f"unsupported dtype {dtype} (expected F16, BF16, F32, F64 or integers)")
        raw_dtype, recorded = _DTYPES[dtype]
        shape = tuple(int(s) for s in info["shape"])
        check_declared_size(path, name, len(info["data"]), max_bytes)
        raw = np.frombuffer(bytes(info["data"]), dtype=raw_dtype).reshape(shape)
        tensors[name] = (bfloat16_bits_to_float32(raw) if dtype == "BF16" else raw, recorded, shape)
    return layers_from_state_dict(list(tensors), [t[2] for t in tensors.values()],
                                  lambda n: Tensor(tensors[n][0], path, n, dtype=tensors[n][1]),
                                  path, "safetensors", sort=True)

