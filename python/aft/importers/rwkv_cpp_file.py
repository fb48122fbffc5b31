"""Reads rwkv.cpp's model file (its docs/FILE_FORMAT.md) into float32 arrays, numpy only.

    int32 magic 0x67676d66 ("ggmf"), version (100 or 101), n_vocab, n_embed, n_layer, data_type
    then until the end of the file, per tensor:
    int32 dim_count, key_length, data_type; int32 dims[dim_count] (innermost first: ggml's order,
    PyTorch's shape reversed); key_length bytes of UTF-8 key; the data

All little-endian (the machine order of every machine rwkv.cpp runs on). Data types: 0 FP32,
1 FP16, 2 Q4_0, 3 Q4_1, 4 Q4_1_O, 5 Q4_2, 6 Q4_3, 7 Q5_0, 8 Q5_1, 9 Q8_0. FP32 and FP16 convert
exactly. Q8_0 (version 101: blocks of 32 values, an FP16 scale d then 32 int8 q, value d * q)
converts exactly too: an 11-bit scale times an 8-bit integer fits binary32's 24 bits. Version 100
stored its quantized blocks in an older ggml layout, and the Q4 and Q5 types lose what an f32 file
cannot give back as the same model's weights: all of them are refused, naming the type.

rwkv.cpp's converter squeezes the time_* vectors to [C] and stores time_decay as -exp(time_decay)
(fp32); this reader returns the tensors as stored, in PyTorch's shape order.
"""

from __future__ import annotations

import math
import mmap
import struct
from pathlib import Path

import numpy as np

from .checkpoint import ImportRefused

MAGIC = 0x67676D66
MAGIC_BYTES = struct.pack("<i", MAGIC)  # b"fmgg": how a file of this format starts
VERSIONS = (100, 101)
TYPE_NAMES = {0: "FP32", 1: "FP16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_1_O", 5: "Q4_2", 6: "Q4_3",
              7: "Q5_0", 8: "Q5_1", 9: "Q8_0"}
FP32, FP16, Q8_0 = 0, 1, 9
Q8_0_BLOCK = 32
Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK  # version 101: fp16 scale, 32 int8
HEADER = struct.Struct("<6i")
TENSOR_HEADER = struct.Struct("<3i")
MAX_DIMS = 4  # ggml's


def is_rwkv_cpp_file(path) -> bool:
    """Whether a file starts with rwkv.cpp's magic (told by content, not by extension)."""
    with open(path, "rb") as file:
        return file.read(4) == MAGIC_BYTES


def type_name(data_type: int) -> str:
    return TYPE_NAMES.get(data_type, f"unknown ({data_type})")


def _check_type(data_type: int, version: int, where: str) -> None:
    if data_type in (FP32, FP16) or (data_type == Q8_0 and version == 101):
        return
    if data_type == Q8_0:
        raise ImportRefused(f"{where}: data type Q8_0 of file version 100 (ggml's layout before "
                            f"version 101): convert the model again with rwkv.cpp as FP16 or FP32")
    if data_type in TYPE_NAMES:
        raise ImportRefused(f"{where}: data type {type_name(data_type)} is quantized with fewer "
                            f"than 8 bits, which an f32 model cannot hold as the original's "
                            f"weights: convert the original checkpoint (FP32, FP16 or Q8_0 only)")
    raise ImportRefused(f"{where}: unknown data type {data_type} "
                        f"(expected one of {', '.join(f'{k} {v}' for k, v in TYPE_NAMES.items())})")


def _data_bytes(data_type: int, count: int, where: str) -> int:
    if data_type == FP32:
        return 4 * count
    if data_type == FP16:
        return 2 * count
    if count % Q8_0_BLOCK:
        raise ImportRefused(f"{where}: Q8_0 tensor of {count} elements, not a multiple of {Q8_0_BLOCK}")
    return count // Q8_0_BLOCK * Q8_0_BLOCK_BYTES


def _decode(data, offset: int, data_type: int, shape: tuple) -> np.ndarray:
    """A tensor's values (a copy, not a view of the mapped file)."""
    count = math.prod(shape)
    if data_type == FP32:
        return np.frombuffer(data, dtype="<f4", count=count, offset=offset).reshape(shape).copy()
    if data_type == FP16:
        return np.frombuffer(data, dtype="<f2", count=count, offset=offset).astype(np.float32).reshape(shape)
    blocks = np.frombuffer(data, dtype=np.dtype([("d", "<f2"), ("q", "i1", Q8_0_BLOCK)]),
                           count=count // Q8_0_BLOCK, offset=offset)
    values = blocks["d"].astype(np.float32)[:, None] * blocks["q"].astype(np.float32)  # exact
    return values.reshape(shape)


def read(path) -> tuple[dict, dict]:
    """(header, tensors): header {"version", "n_vocab", "n_embed", "n_layer", "data_type"}, tensors
    key -> float32 array in PyTorch's shape, in file order. Refuses (ImportRefused) a file that is
    not one, a version or data type it does not convert, a truncated tensor, a repeated key."""
    name = Path(path).name
    with open(path, "rb") as file:
        size = file.seek(0, 2)
        if size < HEADER.size:
            raise ImportRefused(f"{name}: {size} bytes, shorter than rwkv.cpp's {HEADER.size}-byte header")
        # mapped, not read: a model of several GB is copied once, tensor by tensor, into float32
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _read(data, name)


def _read(data, name: str) -> tuple[dict, dict]:
    magic, version, n_vocab, n_embed, n_layer, data_type = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ImportRefused(f"{name}: magic 0x{magic & 0xFFFFFFFF:08x}, expected 0x{MAGIC:08x} (rwkv.cpp's)")
    if version not in VERSIONS:
        raise ImportRefused(f"{name}: rwkv.cpp file version {version}, expected one of "
                            f"{', '.join(map(str, VERSIONS))}")
    _check_type(data_type, version, f"{name}: header")
    header = {"version": version, "n_vocab": n_vocab, "n_embed": n_embed, "n_layer": n_layer,
              "data_type": type_name(data_type)}
    tensors = {}
    offset = HEADER.size
    while offset < len(data):
        where = f"{name}: tensor at byte {offset}"
        if offset + TENSOR_HEADER.size > len(data):
            raise ImportRefused(f"{where}: truncated tensor header")
        dim_count, key_length, tensor_type = TENSOR_HEADER.unpack_from(data, offset)
        offset += TENSOR_HEADER.size
        if not 1 <= dim_count <= MAX_DIMS or key_length <= 0:
            raise ImportRefused(f"{where}: {dim_count} dimensions and a key of {key_length} bytes "
                                f"(expected 1 to {MAX_DIMS} dimensions and a key)")
        end = offset + 4 * dim_count + key_length
        if end > len(data):
            raise ImportRefused(f"{where}: truncated tensor header")
        dims = struct.unpack_from(f"<{dim_count}i", data, offset)
        try:
            key = data[offset + 4 * dim_count:end].decode("utf-8")
        except UnicodeDecodeError:
            raise ImportRefused(f"{where}: key is not UTF-8") from None
        where = f"{name}: key \"{key}\""
        if any(dim <= 0 for dim in dims):
            raise ImportRefused(f"{where}: dimensions {list(dims)}, expected positive sizes")
        _check_type(tensor_type, version, where)
        shape = tuple(reversed(dims))
        nbytes = _data_bytes(tensor_type, math.prod(shape), where)
        if end + nbytes > len(data):
            raise ImportRefused(f"{where}: {nbytes} bytes of data expected, the file has "
                                f"{len(data) - end} left")
        if key in tensors:
            raise ImportRefused(f"{where}: appears twice")
        tensors[key] = _decode(data, end, tensor_type, shape)
        offset = end + nbytes
    return header, tensors
