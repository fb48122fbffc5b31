"""Text generation: a prompt, then sampled tokens streamed as text."""

from __future__ import annotations

import codecs
from typing import Iterator

from . import _library
from .errors import AftError, Status
from .model import Model
from .sampler import Sampler
from .session import Session


def generate(model: Model, prompt: str, max_tokens: int, sampler: Sampler | None = None,
             session: Session | None = None) -> Iterator[str]:
    """Feeds prompt, then samples up to max_tokens tokens, yielding their text as it becomes
    whole characters (a byte model's multi-byte character comes out once complete; bytes that
    never complete one come out as U+FFFD at the end). Stops early at the model's end of text
    (Model.end_of_text: that token is neither yielded nor evaluated) and when the session reaches
    the model's max_positions. To go on past the end of text, ban it with the sampler's logit bias,
    as aft-run's --ignore-eos does: Sampler(logit_bias={model.end_of_text: -math.inf}).

    sampler: None = Sampler() (the library's defaults, seed 0): the same prompt and sampler
    parameters give the same text. session: None = a new session, closed at the end; a given
    session continues from where it is and ends having consumed the prompt and every token
    generated."""
    prompt_tokens = model.tokenize(prompt)
    if not prompt_tokens:
        raise AftError(Status.INVALID_ARGUMENT, "the prompt is empty: generation needs a first token")
    own_session = session is None
    session = Session(model) if own_session else session
    limit = model.info.max_positions
    if limit and session.position + len(prompt_tokens) >= limit:
        raise AftError(Status.OUT_OF_RANGE,
                       f"the prompt ({len(prompt_tokens)} tokens from position {session.position}) "
                       f"leaves no room to generate within the model's {limit} positions")
    sampler = Sampler() if sampler is None else sampler
    # A library without aft_sampler_accept has no penalties either, so it needs no history.
    if _library.library().has("aft_sampler_accept"):
        for token in prompt_tokens:
            sampler.accept(token)
    # A library older than 0.5 knows no end of text: its aft-run goes on past it too.
    end_of_text = model.end_of_text if _library.library().has("aft_model_end_of_text") else None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        logits = session.eval(prompt_tokens, logits="last")
        for index in range(max_tokens):
            token = sampler.sample(logits)
            if token == end_of_text:
                break
            more = index + 1 < max_tokens and (limit == 0 or session.position + 1 < limit)
            logits = session.eval([token], logits="last" if more else "none")
            text = decoder.decode(model.token_text(token))
            if text:
                yield text
            if not more:
                break
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
    finally:
        if own_session:
            session.close()
