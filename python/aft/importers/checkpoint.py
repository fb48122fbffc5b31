"""Converting another implementation's checkpoint into an aft model: a mapping table plus checks.

A `Source` describes one implementation's state_dict: which keys hold the model's dimensions
(`dims`), one `Rule` per key (its symbolic shape, the aft tensor it becomes and how), hints for
keys the engine cannot represent, and a function that completes the config from the checked
tensors. `convert(source, state_dict, ...)` checks the state_dict against the table, key by key,
and returns the aft config and state_dict for `aft.export.write_model`. Everything it refuses
raises `ImportRefused` with a message that names the key. Adding a second implementation means
adding a second `Source` (see aft.importers.labml for the first).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Callable

from .. import modelfile

LAYER = "{i}"  # in a Rule's key and target: the layer index


class ImportRefused(modelfile.FormatError):
    """A checkpoint the engine cannot represent exactly, or one that does not follow its source's layout."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One source key: its shape (ints or names of `Source.dims`; "*" accepts any size), the aft
    tensor it becomes (None: consumed by the source's config function, e.g. a mask), and an
    optional conversion `convert(tensor, layer_tensors, key, dims) -> tensor`, where layer_tensors
    maps the rule keys (as written in the table) of the same layer to their tensors."""

    key: str
    shape: tuple
    target: str | None
    convert: Callable | None = None


@dataclasses.dataclass(frozen=True)
class Source:
    name: str
    dims: dict            # dimension name -> (key, axis) it is read from
    layer_pattern: str    # regex whose group 1 is the layer index of a key
    global_rules: tuple
    layer_rules: tuple
    # regex -> why the engine cannot represent a key that matches it
    refusal_hints: dict
    # (dims, n_layers, tensors: key -> tensor) -> the config keys the table does not fix
    complete_config: Callable
    fixed_config: dict


def load_state_dict(path) -> dict:
    """A checkpoint file holding a state_dict (str -> tensor), loaded without running its code."""
    import torch
    try:
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
    except OSError:
        raise
    except Exception as error:  # torch.load raises many kinds for a file that is no checkpoint
        raise ImportRefused(f"{path}: cannot load as a PyTorch state_dict: {error}") from None
    if not isinstance(state_dict, dict):
        raise ImportRefused(f"{path}: expected a state_dict (a dict of tensors), "
                            f"found {type(state_dict).__name__}")
    for key, value in state_dict.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise ImportRefused(f"{path}: key {key!r}: expected a tensor, found {type(value).__name__}")
    return state_dict


def load_vocab(vocab_path=None, text_path=None) -> list[str]:
    """The character vocabulary: a JSON list of one-character strings, or the sorted distinct
    characters of a UTF-8 text (what a character-level trainer builds from its training text)."""
    if (vocab_path is None) == (text_path is None):
        raise ImportRefused("give the vocabulary as exactly one of a vocabulary file and a text file")
    if text_path is not None:
        return sorted(set(Path(text_path).read_text(encoding="utf-8")))
    try:
        vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ImportRefused(f"{vocab_path}: not valid JSON: {error}") from None
    if not isinstance(vocab, list):
        raise ImportRefused(f"{vocab_path}: expected a JSON list of characters, "
                            f"found {type(vocab).__name__}")
    modelfile.tokenizer_size({"type": "char", "vocab": vocab})  # one code point each, no duplicates
    return vocab


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(dim) for dim in shape) + "]"


def _resolve_dims(source: Source, state_dict: dict) -> dict:
    dims = {}
    for name, (key, axis) in source.dims.items():
        if key not in state_dict:
            raise ImportRefused(f"{source.name}: missing key \"{key}\" (it gives {name})")
        shape = tuple(state_dict[key].shape)
        if len(shape) <= axis:
            raise ImportRefused(f"{source.name}: key \"{key}\": shape {_shape_text(shape)} has no "
                                f"axis {axis} (it gives {name})")
        dims[name] = shape[axis]
    return dims


def _count_layers(source: Source, state_dict: dict) -> int:
    indices = [int(match.group(1)) for key in state_dict
               if (match := re.match(source.layer_pattern, key))]
    if not indices:
        raise ImportRefused(f"{source.name}: no layer keys (none matches {source.layer_pattern})")
    return max(indices) + 1  # a layer missing in between shows up as its missing keys


def _resolve_shape(shape: tuple, dims: dict) -> tuple:
    return tuple(dims.get(dim, dim) for dim in shape)


def _check_shape(source: Source, key: str, tensor, expected: tuple, dims: dict) -> None:
    found = tuple(tensor.shape)
    resolved = _resolve_shape(expected, dims)
    if len(found) != len(resolved) or any(want != "*" and want != got
                                          for want, got in zip(resolved, found)):
        raise ImportRefused(f"{source.name}: key \"{key}\": expected shape {_shape_text(resolved)}, "
                            f"found {_shape_text(found)}")


def _refuse_unexpected(source: Source, keys) -> None:
    for key in sorted(keys):
        for pattern, reason in source.refusal_hints.items():
            if re.search(pattern, key):
                raise ImportRefused(f"{source.name}: key \"{key}\": {reason}; the engine cannot "
                                    f"represent it")
    if keys:
        raise ImportRefused(f"{source.name}: unexpected key(s) {', '.join(sorted(keys))}: not part "
                            f"of the layout this importer maps, so the model would not be the same")


def convert(source: Source, state_dict: dict, vocab: list[str], **config_overrides) -> tuple[dict, dict]:
    """(config, aft state_dict) of a checkpoint; refuses (ImportRefused) anything it cannot map
    exactly: a missing, misshapen, non-float or unexpected key, or whatever the source's config
    function rejects. config_overrides: config keys the checkpoint cannot tell (e.g. activation)."""
    dims = _resolve_dims(source, state_dict)
    n_layers = _count_layers(source, state_dict)
    layers = [(None, source.global_rules)] + [(i, source.layer_rules) for i in range(n_layers)]
    seen = set()
    planned = []  # (rule, key, target, tensors of its layer)
    for index, rules in layers:
        def name(template, index=index):
            return template.replace(LAYER, str(index)) if template is not None else None
        tensors = {}
        for rule in rules:
            key = name(rule.key)
            if key not in state_dict:
                raise ImportRefused(f"{source.name}: missing key \"{key}\" "
                                    f"(expected shape {_shape_text(_resolve_shape(rule.shape, dims))})")
            _check_shape(source, key, state_dict[key], rule.shape, dims)
            tensors[rule.key] = state_dict[key]
            seen.add(key)
        planned += [(rule, name(rule.key), name(rule.target), tensors) for rule in rules]
    _refuse_unexpected(source, set(state_dict) - seen)

    for rule, key, target, _ in planned:
        if target is not None and not state_dict[key].is_floating_point():
            raise ImportRefused(f"{source.name}: key \"{key}\": expected floating point, "
                                f"found {state_dict[key].dtype}")
    config = dict(source.fixed_config)
    config.update(source.complete_config(dims, n_layers, {key: state_dict[key] for key in seen}))
    config.update(config_overrides)
    if len(vocab) != config["vocab_size"]:
        raise ImportRefused(f"vocabulary: {len(vocab)} characters, but the checkpoint has "
                            f"{config['vocab_size']} tokens (see the embedding's first axis)")
    config = modelfile.validate_config(config, strict_keys=True)

    converted = {}
    for rule, key, target, tensors in planned:
        if target is None:
            continue
        tensor = state_dict[key].detach().float()
        converted[target] = rule.convert(tensor, tensors, key, dims) if rule.convert else tensor
    return config, converted
