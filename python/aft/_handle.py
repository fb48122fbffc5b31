"""Ownership of one library handle (aft_model*, aft_session*, aft_sampler*)."""

from __future__ import annotations

import weakref

from .errors import AftError, Status


class OwnedHandle:
    """Frees its pointer exactly once: on close(), when garbage collected, or at interpreter exit
    (weakref.finalize runs before modules are torn down, most recent first, so a session goes
    before the model it was created after). Objects that depend on another handle keep a
    reference to it (`keep_alive`), so a model is freed only after its last session."""

    def __init__(self, pointer: int, free, kind: str, keep_alive: OwnedHandle | None = None):
        self._pointer = pointer
        self._kind = kind
        self._keep_alive = keep_alive
        self._finalizer = weakref.finalize(self, free, pointer)

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
        self._keep_alive = None
