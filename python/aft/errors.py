"""The library's status codes and the exception every failed call raises."""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """aft_status of aft.h."""

    OK = 0
    INVALID_ARGUMENT = 1
    IO = 2
    FORMAT = 3
    OUT_OF_RANGE = 4
    TOKENIZE = 5
    BUFFER_TOO_SMALL = 6
    OUT_OF_MEMORY = 7
    INTERNAL = 8
    ABORTED = 9


class AftError(Exception):
    """A call failed. `status` is the library's Status (None when the library could not be found
    or lacks a function); `message` names the problem (aft_last_error's text)."""

    def __init__(self, status: Status | int | None, message: str):
        self.status = status
        self.message = message
        # A newer library may return a status this package does not know: shown as its number.
        name = getattr(status, "name", None) or (str(status) if status is not None else None)
        super().__init__(f"{name.lower()}: {message}" if name else message)

    def __reduce__(self):  # pickled as its two fields (a Dask worker's error reaches the client)
        return type(self), (self.status, self.message)
