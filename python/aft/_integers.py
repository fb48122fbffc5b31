"""Python ints handed to the library's fixed-width integer parameters: a value outside the C type
is refused, not wrapped (ctypes wraps it silently: top_k = 2**32 + 1 would become 1)."""

from __future__ import annotations

import operator

from .errors import AftError, Status

_RANGES = {"int32": (-2**31, 2**31 - 1), "uint64": (0, 2**64 - 1)}


def fixed_width(name: str, value, kind: str) -> int:
    """value as an int within the C type `kind` ("int32" or "uint64"); AftError(OUT_OF_RANGE)
    outside it, TypeError for a value that is not an integer."""
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    low, high = _RANGES[kind]
    if not low <= number <= high:
        raise AftError(Status.OUT_OF_RANGE, f"{name} {number} is outside {kind} [{low}, {high}]")
    return number
