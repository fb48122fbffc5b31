"""RWKV-4 test inputs: random weights in BlinkDL's layout, and rwkv.cpp files written from them
(from rwkv.cpp's docs/FILE_FORMAT.md and what its converter does to the tensors)."""

from __future__ import annotations

import struct

import numpy as np
import torch

MAGIC = 0x67676D66
FP32, FP16, Q4_0, Q4_1, Q4_1_O, Q4_2, Q4_3, Q5_0, Q5_1, Q8_0 = range(10)


def random_checkpoint(vocab: int, width: int, n_layers: int, seed: int = 1,
                      dtype=torch.float32) -> dict:
    """BlinkDL's keys with realistic scales: time_decay in [-6, 1], time_first ~ log(0.3) + noise,
    time_mix in [0, 1] ([1, 1, C], as BlinkDL stores them; time_decay and time_first [C]), weight
    matrices ~ N(0, 1 / sqrt(fan-in)), LayerNorms near (1, 0)."""
    rng = np.random.default_rng(seed)
    ff = 4 * width

    def matrix(rows, cols):
        return rng.normal(0.0, 1.0 / np.sqrt(cols), (rows, cols))

    def mix():
        return rng.uniform(0.0, 1.0, (1, 1, width))

    def norm(prefix):
        return {prefix + ".weight": 1.0 + rng.normal(0.0, 0.1, width),
                prefix + ".bias": rng.normal(0.0, 0.1, width)}

    state = {"emb.weight": rng.normal(0.0, 1.0, (vocab, width)), **norm("blocks.0.ln0")}
    for i in range(n_layers):
        p = f"blocks.{i}."
        state.update(norm(p + "ln1"))
        state.update(norm(p + "ln2"))
        state.update({
            p + "att.time_decay": rng.uniform(-6.0, 1.0, width),
            p + "att.time_first": np.log(0.3) + rng.normal(0.0, 0.5, width),
            p + "att.time_mix_k": mix(), p + "att.time_mix_v": mix(), p + "att.time_mix_r": mix(),
            p + "att.key.weight": matrix(width, width), p + "att.value.weight": matrix(width, width),
            p + "att.receptance.weight": matrix(width, width),
            p + "att.output.weight": matrix(width, width),
            p + "ffn.time_mix_k": mix(), p + "ffn.time_mix_r": mix(),
            p + "ffn.key.weight": matrix(ff, width), p + "ffn.receptance.weight": matrix(width, width),
            p + "ffn.value.weight": matrix(width, ff),
        })
    state.update(norm("ln_out"))
    state["head.weight"] = matrix(vocab, width)
    return {key: torch.tensor(value, dtype=torch.float32).to(dtype) for key, value in state.items()}


def as_numpy(state_dict: dict) -> dict:
    """float64 copies, for aft.rwkv4_reference."""
    return {key: value.double().numpy() for key, value in state_dict.items()}


def q8_0_blocks(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's Q8_0 of float32 values, blocks of 32: (fp16 scales, int8 quants [blocks, 32])."""
    blocks = np.asarray(matrix, dtype=np.float32).reshape(-1, 32)
    scales = (np.abs(blocks).max(axis=1) / np.float32(127)).astype(np.float16)
    divisor = scales.astype(np.float32)[:, None]
    ratios = np.divide(blocks, divisor, out=np.zeros_like(blocks), where=divisor != 0)
    quants = np.clip(np.rint(ratios), -127, 127).astype(np.int8)
    return scales, quants


def q8_0_values(matrix: np.ndarray) -> np.ndarray:
    """What a Q8_0 tensor holds: scale * quant, float32."""
    scales, quants = q8_0_blocks(matrix)
    return (scales.astype(np.float32)[:, None] * quants.astype(np.float32)).reshape(np.shape(matrix))


def converted_tensors(state_dict: dict, matrices: int = FP32) -> list[tuple[str, int, np.ndarray]]:
    """(key, data type, float32 array) as rwkv.cpp's converter stores them: float32, the time_*
    vectors squeezed, time_decay as -exp(time_decay) (torch, float32), matrices (2-D, not time_*)
    in the data type `matrices`."""
    out = []
    for key, tensor in state_dict.items():
        tensor = tensor.float()
        if ".time_" in key:
            tensor = tensor.squeeze()
        if key.endswith(".time_decay"):
            tensor = -torch.exp(tensor)
        data_type = matrices if tensor.dim() > 1 and ".time_" not in key else FP32
        out.append((key, data_type, tensor.numpy()))
    return out


def tensor_bytes(key: str, data_type: int, array: np.ndarray, dims=None) -> bytes:
    """One parameter: dim count, key length, data type, dims innermost first, key, data."""
    encoded = key.encode("utf-8")
    dims = list(reversed(array.shape)) if dims is None else dims
    head = struct.pack("<3i", len(dims), len(encoded), data_type) + struct.pack(f"<{len(dims)}i", *dims)
    if data_type == FP32:
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
    elif data_type == FP16:
        data = np.ascontiguousarray(array, dtype="<f2").tobytes()
    elif data_type == Q8_0:
        scales, quants = q8_0_blocks(array)
        data = b"".join(scale.tobytes() + block.tobytes()
                        for scale, block in zip(scales.astype("<f2"), quants))
    else:  # a quantized type the reader refuses: bytes of the right size do not matter
        data = bytes(array.size)
    return head + encoded + data


def write_rwkv_cpp(path, state_dict: dict, matrices: int = FP32, version: int = 101,
                   header: dict | None = None, tensors=None) -> None:
    """An rwkv.cpp file of a BlinkDL state_dict; header overrides n_vocab, n_embed, n_layer,
    data_type, magic; tensors: the (key, data type, array) list to write instead of the
    converter's."""
    emb = state_dict["emb.weight"]
    n_layer = 1 + max(int(key.split(".")[1]) for key in state_dict if key.startswith("blocks."))
    fields = {"magic": MAGIC, "version": version, "n_vocab": emb.shape[0], "n_embed": emb.shape[1],
              "n_layer": n_layer, "data_type": matrices, **(header or {})}
    tensors = converted_tensors(state_dict, matrices) if tensors is None else tensors
    with open(path, "wb") as file:
        file.write(struct.pack("<6i", *(fields[name] for name in
                                         ("magic", "version", "n_vocab", "n_embed", "n_layer", "data_type"))))
        for key, data_type, array in tensors:
            file.write(tensor_bytes(key, data_type, array))
