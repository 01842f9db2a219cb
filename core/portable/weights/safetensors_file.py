"""Reading and writing the safetensors format with NumPy alone.

The format is an 8-byte little-endian header length, a JSON header mapping each tensor name to
its dtype, shape and byte range, then the raw little-endian data. Files are memory-mapped, so a
model loads without reading its weights until they are used; `loads` takes the bytes themselves
(what a browser fetch hands over).
"""

from __future__ import annotations

import json
import os
import struct
from typing import BinaryIO, Callable, Dict, Optional, Tuple

import numpy as np

from ..errors import WeightsError

_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
# bfloat16 has no NumPy dtype: it is the high half of a float32.
_BF16 = "BF16"
_MAX_HEADER = 100 * 1024 * 1024

Tensors = Dict[str, np.ndarray]
# (tensor name, first byte, end byte) -> its bytes, or None to leave the tensor out
Reader = Callable[[str, int, int], Optional[np.ndarray]]


def load(path: str, keys: Optional[Callable[[str], bool]] = None) -> Tuple[Tensors, Dict[str, str]]:
    """Tensors (read-only) and the `__metadata__` strings of a .safetensors file.

    The whole file is memory-mapped, so weights are read as they are used. With `keys`, only the
    tensors it selects are read, each into memory of its own: where mapping a file copies all of it
    (Pyodide's in-memory file system), that keeps the rest out of memory.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            header_len = _header_length(head, size, path)
            header = f.read(header_len)
            if keys is not None:
                return _parse(header, _selected(f, keys), size, 8 + header_len, path)
    except OSError as e:
        raise WeightsError(f"cannot read {path}: {e.strerror or e}") from None
    data = np.memmap(path, dtype=np.uint8, mode="r") if size > 8 + header_len else np.zeros(0, np.uint8)
    return _parse(header, _slices(data), size, 8 + header_len, path)


def _selected(f: BinaryIO, keys: Callable[[str], bool]) -> Reader:
    """A reader of the tensors `keys` selects, each read from the open file into memory of its own."""

    def read(key: str, begin: int, end: int) -> Optional[np.ndarray]:
        if not keys(key):
            return None
        f.seek(begin)
        data = f.read(end - begin)
        if len(data) != end - begin:
            raise OSError(f"the file ended before tensor {key!r}")
        return np.frombuffer(data, dtype=np.uint8)

    return read


def _slices(data: np.ndarray) -> Reader:
    return lambda key, begin, end: data[begin:end]


def loads(
    buffer: bytes, name: str = "<bytes>", keys: Optional[Callable[[str], bool]] = None
) -> Tuple[Tensors, Dict[str, str]]:
    """Like `load`, from the bytes of a whole file (the arrays are views of `buffer`); with `keys`,
    only the tensors it selects."""
    header_len = _header_length(bytes(buffer[:8]), len(buffer), name)
    data = np.frombuffer(buffer, dtype=np.uint8)

    def read(key: str, begin: int, end: int) -> Optional[np.ndarray]:
        return data[begin:end] if keys is None or keys(key) else None

    return _parse(bytes(buffer[8 : 8 + header_len]), read, len(buffer), 8 + header_len, name)


def _header_length(head: bytes, size: int, name: str) -> int:
    if len(head) < 8:
        raise WeightsError(f"{name} is not a safetensors file (it is only {size} bytes long)")
    (header_len,) = struct.unpack("<Q", head)
    if header_len > min(size - 8, _MAX_HEADER):
        raise WeightsError(f"{name} is not a safetensors file (bad header length {header_len})")
    return header_len


def _parse(header: bytes, read: Reader, size: int, start: int, name: str) -> Tuple[Tensors, Dict[str, str]]:
    try:
        entries = json.loads(header.decode("utf-8"))
        if not isinstance(entries, dict):
            raise ValueError("the header is not a JSON object")
    except (UnicodeDecodeError, ValueError) as e:
        raise WeightsError(f"{name} is not a safetensors file ({e})") from None
    metadata = entries.pop("__metadata__", None) or {}
    tensors: Tensors = {}
    for key, entry in entries.items():
        try:
            dtype_name, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise WeightsError(f"{name}: malformed header entry for tensor {key!r}") from None
        if dtype_name != _BF16 and dtype_name not in _DTYPES:
            raise WeightsError(f"{name}: tensor {key!r} has unsupported dtype {dtype_name}")
        dtype = np.dtype("<u2") if dtype_name == _BF16 else _DTYPES[dtype_name]
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * dtype.itemsize or start + end > size or begin < 0:
            raise WeightsError(f"{name}: tensor {key!r} has a byte range that does not fit its shape")
        raw = read(key, start + begin, start + end)
        if raw is None:
            continue
        array = raw.view(dtype).reshape(shape)
        if dtype_name == _BF16:
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[key] = array
    return tensors, {str(k): str(v) for k, v in metadata.items()}


def dumps(tensors: Tensors, metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The bytes of a safetensors file holding `tensors` (in key order) and `metadata`."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    arrays = []
    offset = 0
    for key, value in tensors.items():
        array = np.ascontiguousarray(value)
        if array.dtype.newbyteorder("<") not in _NAMES:
            raise WeightsError(f"cannot store tensor {key!r} of dtype {array.dtype} in safetensors")
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        header[key] = {
            "dtype": _NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        arrays.append(array)
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + b"".join(a.tobytes() for a in arrays)
