"""aft: CPU inference for Attention Free Transformer language models, over libaft's C API.

    import aft
    with aft.Model("model.aft") as model, aft.Session(model) as session:
        logits = session.eval(model.tokenize("The jury"), logits="last")

The library is found through the AFT_LIBRARY environment variable (a path), else where
`cmake --install` put it beside this package, else in the build tree of the checkout this package is
in, else where the dynamic linker looks. Modules beside the binding, imported only when asked for:
modelfile (the model file, numpy only) and, with PyTorch, reference, export, train, importers and
eval_reference. docs/python.md describes the package.
"""

from __future__ import annotations

from . import _library
from .errors import AftError, Status
from .generate import generate
from .model import Model, ModelInfo
from .sampler import Sampler
from .session import Session, batch_decode

__all__ = ["AftError", "Status", "Model", "ModelInfo", "Session", "Sampler", "batch_decode",
           "generate", "library_path", "version", "model_file_version", "session_state_version",
           "status_string", "kernel_isa", "matmul_implementation", "set_log_callback", "has"]

_log_callback = None  # the ctypes callback the library holds


def library_path() -> str:
    """Where the loaded libaft came from."""
    return _library.library().path


def has(function: str) -> bool:
    """Whether the loaded libaft exports a C function (older libraries lack some of aft.h's)."""
    return _library.library().has(function)


def version() -> str:
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return _library.library().aft_version().decode()


def model_file_version() -> int:
    return _library.library().aft_model_file_version()


def session_state_version() -> int:
    return _library.library().aft_session_state_version()


def status_string(status: int) -> str:
    """The library's name of a status ("invalid argument", ...)."""
    return _library.library().aft_status_string(int(status)).decode()


def kernel_isa() -> str:
    """The SIMD instruction set of the kernels here ("avx2", ...; AFT_ISA forces one)."""
    return _library.library().aft_kernel_isa().decode()


def matmul_implementation() -> str:
    return _library.library().aft_matmul_implementation().decode()


def matrix_units() -> str:
    """What bf16 weights' products run on (aft's AMX tile kernels, or oneDNN's AVX512-BF16
    implementation for prompts), or "" where aft takes none: the CPU has no matrix units, its
    AVX512-BF16 runs slower than FMAs (Intel's cores without AMX, unless AFT_MATRIX_UNITS=on), or
    AFT_MATRIX_UNITS=off."""
    return _library.library().aft_matrix_units().decode()


def set_log_callback(callback) -> None:
    """Sends the library's messages to callback(level: int, message: str) (0 error, 1 warning,
    2 info) instead of stderr; None: back to stderr. Set it before other threads use aft."""
    global _log_callback
    lib = _library.library()
    if callback is None:
        function = _library.LOG_CALLBACK()
    else:
        function = _library.LOG_CALLBACK(
            lambda level, message, _: callback(level, message.decode("utf-8", "replace")))
    lib.aft_log_set_callback(function, None)
    _log_callback = function
