"""Finding and loading libaft, and the ctypes prototypes of aft.h.

The functions a 0.1 library lacks (OPTIONAL) are looked up when first called, so this package works
with such a library except for those features; everything else is looked up at load time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint32, c_uint64, c_void_p)
from pathlib import Path

from .errors import AftError, Status


class ModelParams(Structure):
    _fields_ = [("verify_checksums", c_int), ("matmul_precision", c_int), ("use_mmap", c_int)]


class ModelInfoStruct(Structure):
    _fields_ = [
        ("mixer", c_char_p),
        ("tokenizer", c_char_p),
        ("vocab_size", c_int32),
        ("d_model", c_int32),
        ("n_layers", c_int32),
        ("d_ff", c_int32),
        ("window", c_int32),
        ("n_heads", c_int32),
        ("max_positions", c_int64),
        ("n_parameters", c_int64),
        ("file_bytes", c_uint64),
        ("n_matmul_parameters", c_int64),
    ]


class SessionParams(Structure):
    _fields_ = [("n_threads", c_int32)]


class LogitBias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


class SamplerParams(Structure):
    _fields_ = [
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_last_n", c_int32),
        ("repeat_penalty", c_float),
        ("frequency_penalty", c_float),
        ("presence_penalty", c_float),
        ("logit_bias", POINTER(LogitBias)),
        ("n_logit_bias", c_size_t),
        ("seed", c_uint64),
    ]


LOG_CALLBACK = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
ABORT_CALLBACK = CFUNCTYPE(c_int, c_void_p)

LOGITS_NONE, LOGITS_LAST, LOGITS_ALL = 0, 1, 2

_handle = c_void_p  # every opaque handle (aft_model*, aft_session*, aft_sampler*)
_status = c_int
_size_p = POINTER(c_size_t)

PROTOTYPES = {
    "aft_version": (c_char_p, []),
    "aft_model_file_version": (c_uint32, []),
    "aft_session_state_version": (c_uint32, []),
    "aft_status_string": (c_char_p, [c_int]),
    "aft_last_error": (c_char_p, []),
    "aft_kernel_isa": (c_char_p, []),
    "aft_matmul_implementation": (c_char_p, []),
    "aft_matrix_units": (c_char_p, []),
    "aft_log_set_callback": (None, [LOG_CALLBACK, c_void_p]),
    "aft_model_default_params": (ModelParams, []),
    "aft_model_load": (_status, [c_char_p, POINTER(ModelParams), POINTER(_handle)]),
    "aft_model_load_from_memory": (_status, [c_char_p, c_size_t, POINTER(ModelParams),
                                             POINTER(_handle)]),
    "aft_model_free": (None, [_handle]),
    "aft_model_get_info": (_status, [_handle, POINTER(ModelInfoStruct)]),
    "aft_model_metadata_count": (c_size_t, [_handle]),
    "aft_model_metadata_at": (_status, [_handle, c_size_t, POINTER(c_char_p), POINTER(c_char_p)]),
    "aft_model_metadata_get": (c_char_p, [_handle, c_char_p]),
    "aft_model_fingerprint": (c_uint32, [_handle]),
    "aft_model_end_of_text": (c_int32, [_handle]),
    "aft_tokenize": (_status, [_handle, c_char_p, c_size_t, POINTER(c_int32), c_size_t, _size_p]),
    "aft_token_to_text": (_status, [_handle, c_int32, POINTER(c_char), c_size_t, _size_p]),
    "aft_detokenizer_create": (_status, [_handle, POINTER(_handle)]),
    "aft_detokenizer_free": (None, [_handle]),
    "aft_detokenizer_push": (_status, [_handle, c_int32, POINTER(c_char), c_size_t, _size_p]),
    "aft_detokenizer_flush": (_status, [_handle, POINTER(c_char), c_size_t, _size_p]),
    "aft_session_default_params": (SessionParams, []),
    "aft_session_create": (_status, [_handle, POINTER(SessionParams), POINTER(_handle)]),
    "aft_session_free": (None, [_handle]),
    "aft_session_set_threads": (_status, [_handle, c_int32]),
    "aft_session_threads": (c_int32, [_handle]),
    "aft_session_set_abort_callback": (_status, [_handle, ABORT_CALLBACK, c_void_p]),
    "aft_session_reset": (_status, [_handle]),
    "aft_session_position": (c_int64, [_handle]),
    "aft_session_eval": (_status, [_handle, POINTER(c_int32), c_size_t, c_int, POINTER(c_float)]),
    "aft_batch_decode": (_status, [POINTER(_handle), POINTER(c_int32), c_size_t, c_int,
                                   POINTER(c_float)]),
    "aft_session_state_size": (c_size_t, [_handle]),
    "aft_session_state_save": (_status, [_handle, c_void_p, c_size_t, _size_p]),
    "aft_session_state_load": (_status, [_handle, c_char_p, c_size_t]),
    "aft_session_fork": (_status, [_handle, POINTER(_handle)]),
    "aft_sampler_default_params": (SamplerParams, []),
    "aft_sampler_create": (_status, [POINTER(SamplerParams), POINTER(_handle)]),
    "aft_sampler_free": (None, [_handle]),
    "aft_sampler_sample": (_status, [_handle, POINTER(c_float), c_size_t, POINTER(c_int32)]),
    "aft_sampler_accept": (_status, [_handle, c_int32]),
    "aft_sampler_reset": (_status, [_handle]),
}

OPTIONAL = frozenset({
    "aft_version", "aft_model_file_version", "aft_session_state_version", "aft_log_set_callback",
    "aft_model_load_from_memory", "aft_model_metadata_count", "aft_model_metadata_at",
    "aft_model_metadata_get", "aft_model_fingerprint", "aft_model_end_of_text",
    "aft_session_set_threads", "aft_session_threads", "aft_session_set_abort_callback",
    "aft_batch_decode", "aft_sampler_accept", "aft_sampler_reset",
    "aft_detokenizer_create", "aft_detokenizer_free", "aft_detokenizer_push",
    "aft_detokenizer_flush",
})


class Library:
    """libaft loaded from `path`; its functions are attributes with their prototypes set."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._dll = ctypes.CDLL(path)
        except OSError as error:
            raise AftError(None, f"cannot load libaft from {path}: {error}") from None
        for name in PROTOTYPES.keys() - OPTIONAL:
            getattr(self, name)

    def has(self, name: str) -> bool:
        """Whether the library exports `name` (a library older than this package may not)."""
        return hasattr(self._dll, name)

    def __getattr__(self, name: str):
        if name not in PROTOTYPES:
            raise AttributeError(name)
        if not self.has(name):
            raise AftError(None, f"libaft at {self.path} has no {name} "
                                 "(library older than this package)")
        function = getattr(self._dll, name)
        function.restype, function.argtypes = PROTOTYPES[name]
        setattr(self, name, function)  # later uses skip __getattr__
        return function

    def check(self, status: int) -> None:
        """Raises AftError with the library's message unless status is AFT_OK."""
        if status == Status.OK:
            return
        try:
            code: Status | int = Status(status)
        except ValueError:
            code = status
        raise AftError(code, self.aft_last_error().decode("utf-8", errors="replace"))

    def read_sized(self, fill, item_type):
        """The output of fill(buffer, capacity, count_pointer), which follows aft.h's buffer rule
        (AFT_ERR_BUFFER_TOO_SMALL with the needed count): asks the size first, then fills."""
        count = c_size_t(0)
        status = fill(None, 0, ctypes.byref(count))
        if status != Status.BUFFER_TOO_SMALL:
            self.check(status)
            return (item_type * 0)()
        buffer = (item_type * count.value)()
        self.check(fill(buffer, count.value, ctypes.byref(count)))
        return buffer


PACKAGE_DIR = Path(__file__).resolve().parent
# The build trees of a checkout whose python/aft this package is: docs/python.md's, then tests/run.sh's.
CHECKOUT_BUILDS = ("build", "build-tests-release")


def _beside_package() -> list[Path]:
    """The library `cmake --install` put beside this package: its place relative to the package is
    in _install_location.py, which only that install writes."""
    try:
        from ._install_location import LIBRARY
    except ImportError:
        return []
    return [Path(os.path.normpath(PACKAGE_DIR / LIBRARY))]


def _checkout_builds() -> list[Path]:
    """The libraries built in the source checkout this package was imported from, if it was."""
    repository = PACKAGE_DIR.parent.parent
    if PACKAGE_DIR.parent.name != "python" or not (repository / "engine" / "include" / "aft.h").is_file():
        return []
    return [repository / build / "engine" / "libaft.so" for build in CHECKOUT_BUILDS]


def _installed_candidates() -> list[Path]:
    return [Path(sys.prefix) / "lib" / "libaft.so", Path("/usr/local/lib/libaft.so")]


def find_library_path() -> str:
    """AFT_LIBRARY (a path) if set; else the library installed beside the package, a build of the
    checkout the package is in, what the dynamic linker finds, the install dirs; the first found."""
    configured = os.environ.get("AFT_LIBRARY")
    if configured:
        if not os.path.isfile(configured):
            raise AftError(None, f"AFT_LIBRARY is {configured}, which is not a file")
        return configured
    for candidate in _beside_package() + _checkout_builds():
        if candidate.is_file():
            return str(candidate)
    found = ctypes.util.find_library("aft")
    if found:
        return found
    for candidate in _installed_candidates():
        if candidate.is_file():
            return str(candidate)
    raise AftError(None, "libaft not found: build it (`cmake --build build --target aft_shared`: "
                         "the checkout's build/engine/libaft.so is found by itself), install it "
                         "(`cmake --install build`), or set AFT_LIBRARY to the path of libaft.so")


@functools.lru_cache(maxsize=None)
def library() -> Library:
    """The process's libaft, loaded on first use."""
    return Library(find_library_path())
