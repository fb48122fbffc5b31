"""Sessions: the state of one sequence, fed tokens and giving logits."""

from __future__ import annotations

import ctypes
from ctypes import c_float, c_int32

import numpy as np

from . import _library
from ._arrays import pointer, token_array
from ._handle import OwnedHandle
from ._integers import fixed_width
from .errors import AftError
from .model import Model

_LOGITS_MODES = {"none": _library.LOGITS_NONE, "last": _library.LOGITS_LAST,
                 "all": _library.LOGITS_ALL}


def _logits_mode(logits: str) -> int:
    try:
        return _LOGITS_MODES[logits]
    except KeyError:
        raise ValueError(f"logits must be one of {sorted(_LOGITS_MODES)}, got {logits!r}") from None


class Session:
    """The state of one sequence of `model`, which it keeps alive. n_threads: 0 = automatic (the
    physical cores shared by the sessions computing at once, no more than the CPUs other processes
    leave free), N > 0 = N threads; results are the
    same bits for every thread count."""

    def __init__(self, model: Model, n_threads: int = 0):
        lib = _library.library()
        params = lib.aft_session_default_params()
        params.n_threads = fixed_width("n_threads", n_threads, "int32")
        created = ctypes.c_void_p()
        lib.check(lib.aft_session_create(model.owned_handle().pointer, ctypes.byref(params),
                                         ctypes.byref(created)))
        self._adopt(model, model.owned_handle(), created.value)

    def _adopt(self, model: Model, model_handle: OwnedHandle, session_pointer: int) -> None:
        self._lib = _library.library()
        self.model = model
        self._model_handle = model_handle  # for forks, even after model.close()
        self._handle = OwnedHandle(session_pointer, self._lib.aft_session_free, "session",
                                   keep_alive=model_handle)
        self._vocab_size = model.info.vocab_size
        self._abort_callback = None  # the ctypes callback, alive while the library holds it
        self._abort_raised: list[BaseException] = []  # what should_stop raised, for eval()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()
        self._model_handle = None
        self._abort_callback = None

    @property
    def closed(self) -> bool:
        return self._handle.closed

    @property
    def _pointer(self) -> int:
        return self._handle.pointer

    @property
    def position(self) -> int:
        """Tokens consumed so far (the position of the next token)."""
        return self._lib.aft_session_position(self._pointer)

    @property
    def threads(self) -> int:
        """The thread count asked for (0 = automatic)."""
        return self._lib.aft_session_threads(self._pointer)

    @threads.setter
    def threads(self, n_threads: int) -> None:
        self._lib.check(self._lib.aft_session_set_threads(
            self._pointer, fixed_width("n_threads", n_threads, "int32")))

    def set_abort_callback(self, should_stop) -> None:
        """should_stop() is called between chunks of a long prompt (every 512 tokens); a true
        result stops eval() with AftError(Status.ABORTED), the chunks done staying consumed; an
        exception it raises stops eval() too and is raised from it (KeyboardInterrupt, say).
        None: never stop."""
        raised = self._abort_raised

        def stop(_) -> int:
            # ctypes would print an exception raised here and drop it, and return no value.
            try:
                return int(bool(should_stop()))
            except BaseException as error:
                raised.append(error)
                return 1

        callback = (_library.ABORT_CALLBACK(stop) if should_stop is not None
                    else _library.ABORT_CALLBACK())
        self._lib.check(self._lib.aft_session_set_abort_callback(self._pointer, callback, None))
        self._abort_callback = callback

    def reset(self) -> None:
        """Forgets every token: back to position 0."""
        self._lib.check(self._lib.aft_session_reset(self._pointer))

    def eval(self, tokens, logits: str = "last") -> np.ndarray | None:
        """Feeds tokens. logits: "last" -> float32 [vocab_size] of the last token, "all" ->
        float32 [n_tokens, vocab_size], "none" -> None (only advances the state). On an error
        the session is unchanged."""
        mode = _logits_mode(logits)
        tokens = token_array(tokens)
        shape = {"none": None, "last": (self._vocab_size,),
                 "all": (len(tokens), self._vocab_size)}[logits]
        out = None if shape is None else np.empty(shape, dtype=np.float32)
        self._abort_raised.clear()
        try:
            self._lib.check(self._lib.aft_session_eval(
                self._pointer, pointer(tokens, c_int32), len(tokens), mode,
                None if out is None else pointer(out, c_float)))
        except AftError as stopped:
            if self._abort_raised:
                raise self._abort_raised.pop() from stopped
            raise
        return out

    def state(self) -> bytes:
        """The whole state of the sequence (aft_session_state_save), for load_state()."""
        size = self._lib.aft_session_state_size(self._pointer)
        buffer = ctypes.create_string_buffer(size)
        written = ctypes.c_size_t()
        self._lib.check(self._lib.aft_session_state_save(self._pointer, buffer, size,
                                                         ctypes.byref(written)))
        return buffer.raw[:written.value]

    def load_state(self, state: bytes) -> None:
        """Replaces the state with a saved one (of a session of the same model); AftError with
        Status.FORMAT, the session unchanged, for bytes truncated, corrupted or of another model."""
        data = bytes(state)
        self._lib.check(self._lib.aft_session_state_load(self._pointer, data, len(data)))

    def fork(self) -> Session:
        """A new session at the same point of the same sequence (same model, same threads)."""
        forked = ctypes.c_void_p()
        self._lib.check(self._lib.aft_session_fork(self._pointer, ctypes.byref(forked)))
        session = Session.__new__(Session)
        session._adopt(self.model, self._model_handle, forked.value)
        return session

    def __repr__(self) -> str:
        return f"aft.Session({'closed' if self.closed else f'position {self.position}'})"


def batch_decode(sessions, tokens, logits: bool = True) -> np.ndarray | None:
    """Advances each session by one token (tokens[i] to sessions[i]) in one pass over the weights;
    returns float32 [n_sessions, vocab_size] (row i: sessions[i]'s logits, the same bits as
    sessions[i].eval([tokens[i]])) or None when logits is false. On an error no session changes."""
    lib = _library.library()
    sessions = list(sessions)
    tokens = token_array(tokens)
    if len(tokens) != len(sessions):
        raise ValueError(f"{len(sessions)} sessions but {len(tokens)} tokens")
    pointers = (ctypes.c_void_p * len(sessions))(*(session._pointer for session in sessions))
    vocab_size = sessions[0].model.info.vocab_size if sessions else 0
    out = np.empty((len(sessions), vocab_size), dtype=np.float32) if logits else None
    lib.check(lib.aft_batch_decode(
        pointers, pointer(tokens, c_int32), len(sessions),
        _library.LOGITS_LAST if logits else _library.LOGITS_NONE,
        pointer(out, c_float) if logits else None))
    return out
