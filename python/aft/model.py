"""A loaded model file: its description, metadata and tokenizer."""

from __future__ import annotations

import ctypes
import dataclasses
import os
from ctypes import c_char, c_char_p, c_int32

from . import _library
from ._handle import OwnedHandle
from ._arrays import token_array
from .errors import AftError, Status


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """aft_model_info: what the model is (see aft.h)."""

    mixer: str  # "simple", "local", "conv", "full" or "decay"
    tokenizer: str  # "byte", "char", "bpe" or "world"
    vocab_size: int
    d_model: int
    n_layers: int
    d_ff: int
    window: int  # local, conv: s; otherwise 0
    n_heads: int
    max_positions: int  # positions a session may reach; 0 = unlimited
    n_parameters: int
    file_bytes: int
    n_matmul_parameters: int


# aft_matmul_precision's values (aft_model_params.matmul_precision, from C API 0.3).
_MATMUL_PRECISIONS = {"f32": 0, "bf16": 1}


def _library_minor_version(lib) -> tuple[int, int]:
    if not lib.has("aft_version"):
        return (0, 1)
    major, minor = lib.aft_version().decode().split(".")[:2]
    return (int(major), int(minor))


class Model:
    """A model file, memory-mapped and validated. Sessions keep it alive: close() (or leaving a
    `with` block) frees it once the last of its sessions is closed too."""

    def __init__(self, path: str | os.PathLike, verify_checksums: bool = True,
                 matmul_precision: str = "f32", use_mmap: bool = True):
        """matmul_precision: "f32" (exact), or "bf16": a prompt's products of f32 weights on the
        matrix units where the CPU has them (matrix_units()), weights and inputs rounded to bf16
        (aft_matmul_precision in aft.h). use_mmap: kept for scripts; every weight matrix is packed
        into the process's memory at load either way (aft_model_params.use_mmap)."""
        self._lib = _library.library()
        encoded = os.fsencode(path)
        if b"\0" in encoded:  # the library would read the path up to it: another file
            raise ValueError(f"embedded null byte in the model's path {os.fsdecode(encoded)!r}")
        self._load(lambda params, out: self._lib.aft_model_load(encoded, params, out),
                   verify_checksums, matmul_precision, use_mmap)
        self.path = os.fspath(path)

    @classmethod
    def from_bytes(cls, data: bytes, verify_checksums: bool = True,
                   matmul_precision: str = "f32") -> Model:
        """The model in the bytes of a model file (aft_model_load_from_memory: the library keeps
        its own copy, so `data` may go). Its path is "<memory>", as in the library's messages."""
        model = cls.__new__(cls)
        model._lib = _library.library()
        data = bytes(data)
        model._load(lambda params, out: model._lib.aft_model_load_from_memory(
            data, len(data), params, out), verify_checksums, matmul_precision, True)
        model.path = "<memory>"
        return model

    def _load(self, load, verify_checksums: bool, matmul_precision: str, use_mmap: bool) -> None:
        if matmul_precision not in _MATMUL_PRECISIONS:
            raise AftError(Status.INVALID_ARGUMENT,
                           f"matmul_precision: {matmul_precision!r} is not one of "
                           f"{', '.join(map(repr, _MATMUL_PRECISIONS))}")
        if matmul_precision != "f32" and _library_minor_version(self._lib) < (0, 3):
            raise AftError(None, f"libaft at {self._lib.path} has no matmul_precision (library "
                           "older than 0.3, this package's)")
        if not use_mmap and _library_minor_version(self._lib) < (0, 4):
            raise AftError(None, f"libaft at {self._lib.path} has no use_mmap (library older than "
                           "0.4, this package's)")
        params = self._lib.aft_model_default_params()
        params.verify_checksums = int(verify_checksums)
        params.matmul_precision = _MATMUL_PRECISIONS[matmul_precision]
        if not use_mmap:
            params.use_mmap = 0
        pointer = ctypes.c_void_p()
        self._lib.check(load(ctypes.byref(params), ctypes.byref(pointer)))
        self._handle: OwnedHandle | None = OwnedHandle(pointer.value, self._lib.aft_model_free,
                                                       "model")
        self.info = self._read_info()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._handle = None

    @property
    def closed(self) -> bool:
        return self._handle is None

    def owned_handle(self) -> OwnedHandle:
        """The handle sessions hold on to (for the package's modules)."""
        if self._handle is None:
            raise AftError(Status.INVALID_ARGUMENT, "the model is closed")
        return self._handle

    def _read_info(self) -> ModelInfo:
        raw = _library.ModelInfoStruct()
        self._lib.check(self._lib.aft_model_get_info(self.owned_handle().pointer, ctypes.byref(raw)))
        values = {name: getattr(raw, name) for name, _ in raw._fields_}
        values["mixer"] = values["mixer"].decode()
        values["tokenizer"] = values["tokenizer"].decode()
        return ModelInfo(**values)

    @property
    def metadata(self) -> dict[str, str]:
        """The file's header as strings (aft_model_metadata_*): config.*, tokenizer.type,
        metadata.*; non-string values as their JSON text."""
        pointer = self.owned_handle().pointer
        entries = {}
        for index in range(self._lib.aft_model_metadata_count(pointer)):
            key, value = c_char_p(), c_char_p()
            self._lib.check(self._lib.aft_model_metadata_at(pointer, index, ctypes.byref(key),
                                                            ctypes.byref(value)))
            entries[key.value.decode()] = value.value.decode()
        return entries

    @property
    def fingerprint(self) -> int:
        """The CRC-32 of the file's header (aft_model_fingerprint), which the model's saved states
        carry: it names the model, e.g. to keep caches of different models' states apart."""
        return self._lib.aft_model_fingerprint(self.owned_handle().pointer)

    @property
    def end_of_text(self) -> int | None:
        """The token that ends a text (aft_model_end_of_text): a World model's 0, the file's
        tokenizer.end_of_text (a Pile model's <|endoftext|>), or None; generate stops at it."""
        if not self._lib.has("aft_model_end_of_text"):
            raise AftError(None, f"libaft at {self._lib.path} has no aft_model_end_of_text "
                           "(library older than 0.5, this package's)")
        token = self._lib.aft_model_end_of_text(self.owned_handle().pointer)
        return None if token < 0 else token

    def tokenize(self, text: str) -> list[int]:
        encoded = text.encode("utf-8")
        pointer = self.owned_handle().pointer
        tokens = self._lib.read_sized(
            lambda buffer, capacity, count: self._lib.aft_tokenize(
                pointer, encoded, len(encoded), buffer, capacity, count), c_int32)
        return list(tokens)

    def token_text(self, token: int) -> bytes:
        """The bytes of one token: a byte, a character's UTF-8 bytes, or a BPE or World token's
        bytes (any number, possibly part of a character)."""
        pointer = self.owned_handle().pointer
        token_value = int(token_array([token])[0])
        text = self._lib.read_sized(
            lambda buffer, capacity, count: self._lib.aft_token_to_text(
                pointer, token_value, buffer, capacity, count), c_char)
        return text.raw

    def detokenize(self, tokens) -> str:
        """The text of tokens; bytes that do not form UTF-8 (a byte model's partial character)
        become U+FFFD."""
        return b"".join(self.token_text(token) for token in tokens).decode("utf-8", "replace")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.info.mixer}, vocab {self.info.vocab_size}"
        return f"aft.Model({self.path!r}, {state})"
