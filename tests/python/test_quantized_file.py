"""bf16 and q8_0 tensors in aft.modelfile and aft.export (docs/format.md, "Tensor data
types"): the contract's exact bits on hand-computed values, the round trip through a file, which
tensors a converted file converts, and the refusals. ExportMatchesAftQuantize also runs the engine's
aft-quantize (its path in AFT_QUANTIZE; CTest sets it) and checks that both write the same bytes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import struct
import subprocess
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import numpy as np

from aft import export, modelfile
from aft.modelfile import FormatError


def f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def block(*values) -> np.ndarray:
    """One row of 32 values: the given ones, then zeros."""
    row = np.zeros((1, 32), dtype=np.float32)
    row[0, :len(values)] = values
    return row


def small_config(**overrides) -> dict:
    """AFT-conv 2 x 64 (every d-column matrix has whole q8_0 blocks), d_ff 80 (ffn.down does not)."""
    config = {"vocab_size": 256, "d_model": 64, "n_layers": 2, "d_ff": 80, "activation": "gelu",
              "mixer": "conv", "window": 4, "n_heads": 2, "full_bias": "table", "bias_rank": 0,
              "max_seq_len": 32, "pos_encoding": "sinusoidal", "embed_scale": 8.0,
              "tied_embeddings": False, "head_bias": True, "norm_eps": 1e-5}
    return {**config, **overrides}


class Q8_0Quantization(unittest.TestCase):
    def quantize(self, *values):
        quants, scales = modelfile.quantize_q8_0(block(*values))
        return list(quants[0, :len(values)]), scales[0, 0]

    def test_ties_go_to_even(self):  # amax 127: d = 1 exactly
        quants, d = self.quantize(127, 2.5, 3.5, -2.5, -0.5, 0.5, 1.5, -1.5, 126.5, -126.5)
        self.assertEqual(d, 1.0)
        self.assertEqual(quants, [127, 2, 4, -2, 0, 0, 2, -2, 126, -126])

    def test_largest_magnitude_negative(self):  # amax 254 from -254: d = 2
        quants, d = self.quantize(5, -254, 7, -3, 1, 253)
        self.assertEqual(d, 2.0)
        self.assertEqual(quants, [2, -127, 4, -2, 0, 126])  # 2.5, 3.5, -1.5, 0.5, 126.5

    def test_inexact_scale_rounds_the_binary32_quotient(self):
        # d = 1 / 127 in binary32 (0x3c010204) is a little below 1/127: x = 62.5 * d (0x3efbf7f0)
        # divided exactly is 62.5000007, but the binary32 quotient is 62.5, which rounds to 62.
        x = f32(0x3EFBF7F0)
        quants, d = self.quantize(1.0, x, -x, 0.5, 0.25)
        self.assertEqual(d.view(np.uint32), 0x3C010204)
        self.assertEqual(quants, [127, 62, -62, 64, 32])  # 0.5 / d = 63.5 -> 64; 31.75 -> 32

    def test_zero_blocks(self):
        quants, scales = modelfile.quantize_q8_0(np.concatenate(
            [block(), -block(), block(3.0)], axis=1))
        self.assertEqual(scales.shape, (1, 3))
        self.assertEqual(scales.view(np.uint32).tolist(), [[0, 0, 0x3CC18306]])  # +0, +0, 3/127
        self.assertFalse(quants[0, :64].any())
        self.assertEqual(quants[0, 64], 127)

    def test_subnormal_scales(self):
        # amax 2^-140: d = 2^-140 / 127 rounds to 4 * 2^-149, and amax / d = 128 clamps to 127.
        quants, d = self.quantize(f32(0x200), -f32(0x100))
        self.assertEqual(d.view(np.uint32), 4)
        self.assertEqual(quants, [127, -64])
        # amax 2^-149: d rounds to 0, so every quant is 0.
        quants, d = self.quantize(f32(1), -f32(1))
        self.assertEqual((d, quants), (0.0, [0, 0]))

    def test_rows_and_dequantization(self):
        x = np.arange(-64, 64, dtype=np.float32).reshape(2, 64) / np.float32(8)
        quants, scales = modelfile.quantize_q8_0(x)
        self.assertEqual((quants.shape, scales.shape), ((2, 64), (2, 2)))
        self.assertEqual(scales[0, 0], np.float32(8) / np.float32(127))
        values = modelfile.dequantize_q8_0(quants, scales)
        self.assertEqual(values.dtype, np.float32)
        expected = (quants.reshape(-1, 32).astype(np.float32) * scales.reshape(-1, 1)).reshape(2, 64)
        self.assertTrue(np.array_equal(values, expected))
        bound = np.repeat(scales.reshape(-1), 32).reshape(2, 64) / 2
        self.assertTrue((np.abs(values - x) <= bound).all())

    def test_refusals(self):
        for bad, words in ((np.zeros((2, 48), np.float32), "multiple of 32, found [2, 48]"),
                           (np.zeros(64, np.float32), "2-D shape"),
                           (block(np.nan), "NaN or infinity (at flat index 0)"),
                           (block(1, -np.inf), "NaN or infinity (at flat index 1)")):
            with self.subTest(words), self.assertRaisesRegex(FormatError, re.escape(words)):
                modelfile.quantize_q8_0(bad)


class Bf16Conversion(unittest.TestCase):
    def test_round_to_nearest_even(self):
        cases = {0x3F800000: 0x3F80,  # 1
                 0x3F808000: 0x3F80,  # 1 + 2^-8: a tie, 0x3F80 is even
                 0x3F818000: 0x3F82,  # 1 + 3 * 2^-8: a tie, rounds up to even
                 0x3F808001: 0x3F81,  # above the tie
                 0x3F807FFF: 0x3F80,  # below it
                 0xC0000000: 0xC000,  # -2
                 0x80000000: 0x8000,  # -0 keeps its sign
                 0x00008000: 0x0000,  # a subnormal tie
                 0x7F7F7FFF: 0x7F7F}  # the largest value that stays finite
        bits = np.array(list(cases), dtype=np.uint32)
        halves = modelfile.f32_to_bf16(bits.view(np.float32))
        self.assertEqual([hex(h) for h in halves], [hex(h) for h in cases.values()])
        widened = modelfile.bf16_to_f32(halves)
        self.assertEqual(widened.view(np.uint32).tolist(), [int(h) << 16 for h in halves])

    def test_refusals(self):
        for value, words in ((np.nan, "NaN or infinity"), (np.inf, "NaN or infinity"),
                             (f32(0x7F7F8000), "rounds to infinity"),
                             (-f32(0x7F7FFFFF), "rounds to infinity")):
            with self.subTest(value), self.assertRaisesRegex(FormatError, words):
                modelfile.f32_to_bf16(np.array([1.0, value], dtype=np.float32), "tensor \"w\"")


class ConvertedFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.config = small_config()
        self.state_dict = export.random_model(self.config, 3).state_dict()
        self.tokenizer = export.make_tokenizer(256)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, dtype: str, config=None) -> modelfile.ModelFileContents:
        path = Path(self.dir.name) / f"{dtype}.aft"
        config = config or self.config
        state_dict = self.state_dict if config is self.config else \
            export.random_model(config, 3).state_dict()
        export.write_model(path, config, state_dict, self.tokenizer, {"test": 1}, dtype)
        return modelfile.read_file(path)

    def test_q8_0_round_trip(self):
        contents = self.write("q8_0")
        self.assertEqual(contents.metadata, {"producer": "aft-export", "test": 1, "dtype": "q8_0"})
        converted = []
        for entry in contents.entries:
            original = self.state_dict[entry.name].numpy()
            if entry.dtype == "f32":
                self.assertTrue(np.array_equal(contents.tensors[entry.name], original), entry.name)
                continue
            converted.append(entry.name)
            self.assertEqual(entry.dtype, "q8_0")
            quants, scales = contents.planes[entry.name]
            expected_quants, expected_scales = modelfile.quantize_q8_0(original)
            self.assertTrue(np.array_equal(quants, expected_quants), entry.name)
            self.assertTrue(np.array_equal(scales.view(np.uint32),
                                           expected_scales.view(np.uint32)), entry.name)
            values = contents.tensors[entry.name]
            self.assertTrue(np.array_equal(values, modelfile.dequantize_q8_0(quants, scales)))
            bound = np.repeat(scales.reshape(-1), 32).reshape(values.shape) / 2
            self.assertTrue((np.abs(values - original) <= bound).all(), entry.name)
        expected = [f"layers.{i}.{part}.weight" for i in range(2)
                    for part in ("mixer.query", "mixer.key", "mixer.value", "mixer.output", "ffn.up")]
        self.assertEqual(sorted(converted), sorted(expected + ["head.weight"]))  # not ffn.down

    def test_bf16_round_trip(self):
        contents = self.write("bf16")
        self.assertEqual(contents.metadata["dtype"], "bf16")
        converted = 0
        for entry in contents.entries:
            original = self.state_dict[entry.name].numpy()
            if entry.dtype == "f32":
                self.assertFalse(modelfile.LINEAR_WEIGHT.fullmatch(entry.name), entry.name)
                self.assertTrue(np.array_equal(contents.tensors[entry.name], original), entry.name)
                continue
            converted += 1
            (halves,) = contents.planes[entry.name]
            self.assertTrue(np.array_equal(halves, modelfile.f32_to_bf16(original)))
            self.assertEqual(entry.nbytes, original.nbytes // 2)
            error = np.abs(contents.tensors[entry.name] - original)
            self.assertTrue((error <= np.abs(original) * 2.0 ** -8).all(), entry.name)
        self.assertEqual(converted, 2 * 6 + 1)

    def test_f32_is_unchanged(self):
        contents = self.write("f32")
        self.assertNotIn("dtype", contents.metadata)
        self.assertEqual({entry.dtype for entry in contents.entries}, {"f32"})

    def test_narrow_model_keeps_f32_where_blocks_do_not_fit(self):
        contents = self.write("q8_0", small_config(d_model=16, d_ff=32, mixer="simple", window=0,
                                                   n_heads=1))
        dtypes = {entry.name: entry.dtype for entry in contents.entries}
        self.assertEqual({name for name, dtype in dtypes.items() if dtype == "q8_0"},
                         {"layers.0.ffn.down.weight", "layers.1.ffn.down.weight"})

    def test_cli_dtype(self):
        config_file = Path(self.dir.name) / "config.json"
        config_file.write_text(json.dumps(self.config))
        out = Path(self.dir.name) / "cli.aft"
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(export.main(["--random", "--config", str(config_file), "--seed", "3",
                                              "--dtype", "q8_0", "--out", str(out)]), 0)
            with self.assertRaises(SystemExit) as exit_:
                export.main(["--random", "--config", str(config_file), "--dtype", "q4_0",
                                 "--out", str(out)])
        self.assertEqual(exit_.exception.code, 2)
        contents = modelfile.read_file(out)
        self.assertEqual(contents.metadata["dtype"], "q8_0")
        self.assertEqual(dict((e.name, e.dtype) for e in contents.entries)["head.weight"], "q8_0")

    def test_writer_refusals(self):
        out = Path(self.dir.name) / "refused.aft"
        with self.assertRaisesRegex(FormatError, "dtype: expected one of f32, bf16, q8_0, found 'f16'"):
            export.write_model(out, self.config, self.state_dict, self.tokenizer, dtype="f16")
        tensors = export.model_tensors(self.config, self.state_dict)
        with self.assertRaisesRegex(FormatError, 'tensor "norm.weight": dtype "q8_0" needs a 2-D'):
            modelfile.encode_file(self.config, self.tokenizer, tensors, dtypes={"norm.weight": "q8_0"})
        with self.assertRaisesRegex(FormatError, "dtypes: no such tensor"):
            modelfile.encode_file(self.config, self.tokenizer, tensors, dtypes={"nope": "bf16"})
        tensors = [(name, np.full_like(array, np.inf) if name == "head.weight" else array)
                   for name, array in tensors]
        with self.assertRaisesRegex(FormatError, 'tensor "head.weight": contains NaN or infinity'):
            modelfile.encode_file(self.config, self.tokenizer, tensors,
                                dtypes=modelfile.file_dtypes(tensors, "bf16"))
        self.assertFalse(out.exists())

    def test_only_linear_weights_are_converted(self):  # the engine refuses any other (model.cpp)
        tensors = export.model_tensors(self.config, self.state_dict)
        with self.assertRaisesRegex(FormatError, 'tensor "norm.weight": expected f32, found bf16'):
            modelfile.encode_file(self.config, self.tokenizer, tensors, dtypes={"norm.weight": "bf16"})
        with mock.patch.object(modelfile, "is_linear_weight", return_value=True):
            data = modelfile.encode_file(self.config, self.tokenizer, tensors,
                                         dtypes={"embed.weight": "bf16"})
        with self.assertRaisesRegex(FormatError, 'tensor "embed.weight": expected f32, found bf16'):
            modelfile.decode_file(data)


class ReaderRefusals(unittest.TestCase):
    def setUp(self):
        config = small_config()
        state_dict = export.random_model(config, 1).state_dict()
        self.data = modelfile.encode_file(config, export.make_tokenizer(256),
                                        export.model_tensors(config, state_dict),
                                        dtypes={"head.weight": "q8_0"})

    def rewrite_entry(self, **fields) -> bytes:
        """The file with head.weight's header entry changed (the header keeps its length)."""
        header_len = struct.unpack_from("<Q", self.data, 16)[0]
        header = json.loads(self.data[24:24 + header_len])
        entry = next(e for e in header["tensors"] if e["name"] == "head.weight")
        entry.update(fields)
        text = json.dumps(header, separators=(",", ":")).encode()
        start = min(e["offset"] for e in header["tensors"])
        self.assertLessEqual(24 + len(text), start)
        return (self.data[:16] + struct.pack("<Q", len(text)) + text
                + bytes(start - 24 - len(text)) + self.data[start:])

    def test_valid_file_reads(self):
        contents = modelfile.decode_file(self.data)
        self.assertEqual(contents.entries[-2].name, "head.weight")
        self.assertEqual(contents.entries[-2].dtype, "q8_0")
        self.assertEqual(contents.entries[-2].nbytes, 256 * 64 * 9 // 8)

    def test_refusals(self):
        cases = ((dict(dtype="q4_0"), "unsupported dtype 'q4_0' (this reader supports: f32, bf16, q8_0)"),
                 (dict(shape=[256 * 64]), 'tensor "head.weight": dtype "q8_0" needs a 2-D shape'),
                 (dict(shape=[384, 48]), "multiple of 32, found [384, 48]"),
                 (dict(shape=[256, 96]), "nbytes: expected 27648 for shape [256, 96] of q8_0, found 18432"),
                 (dict(dtype="bf16"), "nbytes: expected 32768 for shape [256, 64] of bf16, found 18432"),
                 # a valid q8_0 layout, but not the shape the config implies
                 (dict(shape=[512, 32]), 'tensor "head.weight": expected shape [256, 64], found [512, 32]'))
        for fields, words in cases:
            with self.subTest(fields), self.assertRaisesRegex(FormatError, re.escape(words)):
                modelfile.decode_file(self.rewrite_entry(**fields))


@unittest.skipUnless(os.environ.get("AFT_QUANTIZE"), "set AFT_QUANTIZE to aft-quantize's path")
class ExportMatchesAftQuantize(unittest.TestCase):
    def test_same_bytes(self):
        with tempfile.TemporaryDirectory() as directory:
            directory = Path(directory)
            config_file = directory / "config.json"
            config_file.write_text(json.dumps(small_config()))
            for dtype in ("f32", "bf16", "q8_0"):
                with contextlib.redirect_stderr(io.StringIO()):
                    self.assertEqual(export.main(["--random", "--config", str(config_file),
                                                      "--seed", "7", "--dtype", dtype,
                                                      "--out", str(directory / f"{dtype}.aft")]), 0)
            for dtype in ("bf16", "q8_0"):
                with self.subTest(dtype):
                    converted = directory / f"quantized-{dtype}.aft"
                    subprocess.run([os.environ["AFT_QUANTIZE"], str(directory / "f32.aft"),
                                    str(converted), dtype], check=True)
                    exported = modelfile.read_file(directory / f"{dtype}.aft")
                    quantized = modelfile.read_file(converted)
                    self.assertEqual(quantized.metadata["dtype"], dtype)
                    self.assertEqual(quantized.config, exported.config)
                    self.assertEqual([(e.name, e.dtype, e.shape, e.nbytes, e.crc32)
                                      for e in quantized.entries],
                                     [(e.name, e.dtype, e.shape, e.nbytes, e.crc32)
                                      for e in exported.entries])
                    for name, planes in exported.planes.items():
                        for ours, theirs in zip(planes, quantized.planes[name]):
                            self.assertEqual(ours.tobytes(), theirs.tobytes(), name)


if __name__ == "__main__":
    unittest.main()
