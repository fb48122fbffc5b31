"""docs/format.md's tables against aft.modelfile: the config table lists CONFIG_KEYS in order, with
the options of each choice; in the tensor table, every tensor a config implies has a row, with its
shape among the row's shapes, and every row names a tensor some config has. The tensor rows' "when"
column is prose and is not checked."""

from __future__ import annotations

import itertools
import re
import unittest
from pathlib import Path

from aft import modelfile

FORMAT_DOC = Path(__file__).resolve().parents[2] / "docs" / "format.md"

# Sizes distinct from each other, so that a shape's numbers name the config keys they come from.
SIZES = {"vocab_size": 7, "d_model": 6, "d_ff": 5, "max_seq_len": 9}
SYMBOLS = {7: "vocab_size", 6: "d", 5: "d_ff", 9: "max_seq_len", 2: "n_heads", 3: "window",
           4: "bias_rank"}
NEUTRAL = {"window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0, "token_shift": False}
MIXERS = ({**NEUTRAL, "mixer": "simple"},
          {**NEUTRAL, "mixer": "local", "window": 3},
          {**NEUTRAL, "mixer": "conv", "window": 3, "n_heads": 2},
          {**NEUTRAL, "mixer": "full"},
          {**NEUTRAL, "mixer": "full", "full_bias": "factorized", "bias_rank": 4},
          {**NEUTRAL, "mixer": "decay"},
          {**NEUTRAL, "mixer": "decay", "token_shift": True},
          {**NEUTRAL, "mixer": "decay", "token_shift": True, "ffn": "channel_mix",
           "linear_bias": False, "embed_norm": True},
          {**NEUTRAL, "mixer": "decay", "ffn": "channel_mix"})


def section_rows(heading: str):
    """The cells of each row of the table under `heading` whose first cell is `code`."""
    text = FORMAT_DOC.read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            yield cells


def table_rows() -> dict:
    """Generic tensor name ("layers.i. ...") -> the set of shapes its row lists, as strings."""
    rows = {}
    for name_cell, shape_cell, when_cell in section_rows("## Tensors"):
        names = re.findall(r"`([^`]+)`", name_cell)
        # "`x.weight`, `.bias`": the second shares the first's prefix.
        names = [names[0].rsplit(".", 1)[0] + name if name.startswith(".") else name
                 for name in names]
        shapes = {shape.replace(" ", "") for shape in re.findall(r"\[[^\]]*\]", shape_cell)}
        for name in names:
            rows.setdefault(name, set()).update(shapes)
        bias = re.search(r"\(bias (.*)\)", when_cell)
        if bias:  # "always (bias [d] or [n_heads])": the weight's bias and its shapes
            rows[names[0].rsplit(".", 1)[0] + ".bias"] = {
                shape.replace(" ", "") for shape in re.findall(r"\[[^\]]*\]", bias.group(1))}
    return rows


def configs():
    for mixer, pos_encoding, tied, head_bias in itertools.product(
            MIXERS, modelfile.POS_ENCODINGS, (False, True), (False, True)):
        yield modelfile.validate_config(
            {**SIZES, **mixer, "n_layers": 2, "activation": "relu", "pos_encoding": pos_encoding,
             "embed_scale": 1.0, "tied_embeddings": tied, "head_bias": head_bias,
             "norm_eps": 1e-5}, strict_keys=True)


class ConfigTable(unittest.TestCase):
    def test_keys_and_options(self):
        rows = [(key.strip("`"), kind) for key, kind, _ in section_rows("### `config`")]
        self.assertEqual([key for key, _ in rows], list(modelfile.CONFIG_KEYS))
        options = {"activation": modelfile.ACTIVATIONS, "mixer": modelfile.MIXERS,
                   "pos_encoding": modelfile.POS_ENCODINGS, "full_bias": modelfile.FULL_BIASES,
                   "ffn": modelfile.FEED_FORWARDS}
        for key, kind in rows:
            if key in options:
                self.assertEqual(tuple(re.findall(r'`"([^"]+)"`', kind)), options[key], key)


class TensorTable(unittest.TestCase):
    def test_every_expected_tensor_is_tabled_with_its_shape(self):
        rows = table_rows()
        for config in configs():
            for name, shape in modelfile.expected_tensors(config):
                generic = re.sub(r"^layers\.\d+\.", "layers.i.", name)
                self.assertIn(generic, rows, f"docs/format.md has no row for {name}")
                symbolic = "[" + ",".join(SYMBOLS[dim] for dim in shape) + "]"
                self.assertIn(symbolic, rows[generic], f"{name} of {config}")

    def test_every_row_is_a_tensor_of_some_config(self):
        names = {re.sub(r"^layers\.\d+\.", "layers.i.", name)
                 for config in configs() for name, _ in modelfile.expected_tensors(config)}
        self.assertEqual(set(table_rows()) - names, set())


if __name__ == "__main__":
    unittest.main()
