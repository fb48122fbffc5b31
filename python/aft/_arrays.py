"""numpy arrays handed to the library through ctypes pointers."""

from __future__ import annotations

import ctypes

import numpy as np

from .errors import AftError, Status


def token_array(tokens) -> np.ndarray:
    """tokens (ints) as a contiguous int32 array; a value outside int32 is refused, not wrapped."""
    values = np.asarray(tokens)
    if values.size == 0:
        return np.zeros(0, dtype=np.int32)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"tokens must be a sequence of ints, got {values.dtype} of shape "
                        f"{values.shape}")
    outside = (values < -2**31) | (values >= 2**31)
    if outside.any():
        index = int(np.flatnonzero(outside)[0])
        raise AftError(Status.OUT_OF_RANGE, f"token {values[index]} (at index {index}) is not an int32")
    return np.ascontiguousarray(values, dtype=np.int32)


def pointer(array: np.ndarray, ctype):
    """A pointer to array's data (which the caller keeps alive during the call)."""
    return array.ctypes.data_as(ctypes.POINTER(ctype))
