"""Ownership of one library handle (aft_model*, aft_session*, aft_sampler*)."""

from __future__ import annotations

import weakref

from .errors import AftError, Status


def _free(free, pointer: int, keep_alive: OwnedHandle | None) -> None:
    free(pointer)  # keep_alive, held by the finalizer until now, may go after this


class OwnedHandle:
    """Frees its pointer exactly once: on close(), when garbage collected (even in a cycle), or at
    interpreter exit (weakref.finalize runs before modules are torn down, most recent first). A
    handle that needs another (a session its model) names it as keep_alive: the finalizer holds
    it, so a model is freed only after the last of its sessions."""

    def __init__(self, pointer: int, free, kind: str, keep_alive: OwnedHandle | None = None):
        self._pointer = pointer
        self._kind = kind
        self._finalizer = weakref.finalize(self, _free, free, pointer, keep_alive)

    @property
    def pointer(self) -> int:
        if not self._finalizer.alive:
            raise AftError(Status.INVALID_ARGUMENT, f"the {self._kind} is closed")
        return self._pointer

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()
