"""Tests of the Python side: the PyTorch reference (aft.reference), the file writer/reader
(aft.modelfile, aft.export) and the golden fixtures (tests/fixtures).

    /usr/bin/python3 -m unittest discover -s tests/python
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

from aft import export, modelfile
from aft.modelfile import FormatError
from aft.reference import (AftLM, AftStream, causal_weighted_average, default_config,
                           max_positions, sinusoidal_encoding)

REPO_DIR = Path(__file__).resolve().parent.parent.parent
# make_fixtures is a script, not a module of the package: it is imported from its directory.
sys.path.insert(0, str(REPO_DIR / "tests" / "fixtures"))
import make_fixtures  # noqa: E402

torch.set_num_threads(1)

FIXTURES_DIR = REPO_DIR / "tests" / "fixtures"


def all_variant_configs() -> dict[str, dict]:
    """The fixture configs: every mixer, activation, position encoding, head option, tokenizer."""
    return {name: make_fixtures.fixture_config(name)[0] for name in make_fixtures.FIXTURES}


def random_tokens(vocab_size: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab_size, (length,), generator=torch.Generator().manual_seed(seed))


def reference_average(w: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """causal_weighted_average's definition, literally, in float64 (one row at a time)."""
    w, k, v = w.double(), k.double(), v.double()
    out = torch.zeros(v.shape, dtype=torch.float64)
    for t in range(v.shape[1]):
        scores = k[:, : t + 1] + w[:, t, : t + 1].t()[None, :, :, None]   # [B, t+1, H, Ck]
        weights = torch.exp(scores)
        out[:, t] = (weights * v[:, : t + 1]).sum(dim=1) / weights.sum(dim=1)
    return out


class ParallelMatchesNaive(unittest.TestCase):
    def test_every_variant(self):
        for seed, (name, config) in enumerate(all_variant_configs().items()):
            with self.subTest(variant=name):
                model = export.random_model(config, seed)
                tokens = random_tokens(config["vocab_size"], 40, seed)
                with torch.no_grad():
                    logits = model(tokens)
                self.assertEqual(logits.dtype, torch.float32)
                reference = model.forward_naive(tokens.tolist())
                np.testing.assert_allclose(logits.double().numpy(), reference.numpy(), atol=1e-5, rtol=0)

    def test_batch_rows_are_independent(self):
        config = all_variant_configs()["conv"]
        model = export.random_model(config, 3)
        batch = torch.stack([random_tokens(config["vocab_size"], 24, seed) for seed in range(3)])
        with torch.no_grad():
            together = model(batch)
            for row in range(3):
                torch.testing.assert_close(together[row], model(batch[row]), atol=1e-6, rtol=1e-6)

    def test_sinusoidal_formula(self):
        pe = sinusoidal_encoding(50, 10)
        for p in (0, 1, 7, 49):
            for i in range(5):
                f = math.exp(-2 * i * math.log(10000.0) / 10)
                self.assertEqual(float(pe[p, 2 * i]), float(np.float32(math.sin(p * f))))
                self.assertEqual(float(pe[p, 2 * i + 1]), float(np.float32(math.cos(p * f))))
        self.assertEqual(sinusoidal_encoding(3, 5).shape, (3, 5))  # odd width: last channel sin

    def test_absolute_models_refuse_positions_past_max_seq_len(self):
        config = all_variant_configs()["local"]
        model = AftLM(config)
        with self.assertRaisesRegex(ValueError, "longer than"):
            model(torch.zeros(config["max_seq_len"] + 1, dtype=torch.long))
        unlimited = AftLM(all_variant_configs()["conv_sinusoidal_gelu"])
        self.assertEqual(unlimited(torch.zeros(70, dtype=torch.long)).shape, (70, 40))

    def test_training_step_runs(self):
        config = all_variant_configs()["full_factorized"]
        model = AftLM(config, dropout=0.1).train()
        tokens = torch.stack([random_tokens(config["vocab_size"], 33, seed) for seed in range(2)])
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        self.assertTrue(all(torch.isfinite(p.grad).all() for p in model.parameters()))
        self.assertGreater(float(model.layers[0].mixer.pos_v.grad.abs().sum()), 0)


class Stability(unittest.TestCase):
    def check_average(self, key_scale, bias_scale, heads, key_width, value_width, offset=0.0):
        generator = torch.Generator().manual_seed(7)
        T = 40
        w = (torch.rand(heads, T, T, generator=generator) * 2 - 1) * bias_scale
        k = (torch.rand(2, T, heads, key_width, generator=generator) * 2 - 1) * key_scale + offset
        v = torch.randn(2, T, heads, value_width, generator=generator)
        y = causal_weighted_average(w, k, v)
        self.assertTrue(torch.isfinite(y).all())
        np.testing.assert_allclose(y.double().numpy(), reference_average(w, k, v).numpy(),
                                   atol=2e-5, rtol=0)

    def test_large_keys_and_biases(self):
        for heads, key_width, value_width in ((1, 16, 16), (4, 1, 8)):
            for key_scale, bias_scale in ((80, 0.5), (0.5, 80), (80, 80)):
                with self.subTest(heads=heads, keys=key_scale, biases=bias_scale):
                    self.check_average(key_scale, bias_scale, heads, key_width, value_width)

    def test_large_common_key_offset(self):
        # exp(K) alone overflows float32 beyond 88: the shifts must absorb it.
        for offset in (-300.0, 300.0):
            with self.subTest(offset=offset):
                self.check_average(5, 5, 1, 8, 8, offset)

    def test_model_with_extreme_keys_and_biases(self):
        for name in ("local", "conv", "full_table"):
            with self.subTest(variant=name):
                config = all_variant_configs()[name]
                model = export.random_model(config, 11)
                generator = torch.Generator().manual_seed(5)
                with torch.no_grad():
                    for layer in model.layers:
                        mixer = layer.mixer
                        mixer.key.weight.mul_(40.0)   # keys spread over about +-80
                        mixer.key.bias.copy_((torch.rand(mixer.key.bias.shape, generator=generator) * 2 - 1) * 80)
                        mixer.pos_bias.copy_((torch.rand(mixer.pos_bias.shape, generator=generator) * 2 - 1) * 80)
                    tokens = random_tokens(config["vocab_size"], 40, 9)
                    logits = model(tokens)
                self.assertTrue(torch.isfinite(logits).all())
                reference = model.forward_naive(tokens.tolist())
                np.testing.assert_allclose(logits.double().numpy(), reference.numpy(), atol=1e-4, rtol=0)


class FileRoundTrip(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def export(self, name: str, seed: int = 0) -> tuple[Path, dict, dict, dict]:
        config, tokenizer = make_fixtures.fixture_config(name)
        state_dict = export.random_model(config, seed).state_dict()
        path = self.dir / f"{name}.aft"
        export.write_model(path, config, state_dict, tokenizer, {"test": True})
        return path, config, state_dict, tokenizer

    def test_round_trip_every_variant(self):
        for name in make_fixtures.FIXTURES:
            with self.subTest(variant=name):
                path, config, state_dict, tokenizer = self.export(name)
                contents = modelfile.read_file(path)
                self.assertEqual(contents.config, config)
                self.assertEqual(contents.tokenizer, tokenizer)
                self.assertEqual(contents.metadata, {"producer": "aft-export", "test": True})
                self.assertEqual(set(contents.tensors), set(state_dict))
                self.assertEqual([e.name for e in contents.entries],
                                 [n for n, _ in modelfile.expected_tensors(config)])
                for tensor_name, tensor in state_dict.items():
                    stored = contents.tensors[tensor_name]
                    self.assertEqual(stored.dtype, np.dtype("<f4"))
                    self.assertEqual(stored.tobytes(), tensor.numpy().astype("<f4").tobytes(), tensor_name)
                for entry in contents.entries:
                    self.assertEqual(entry.offset % 64, 0)
                self.assertEqual(contents.file_size, path.stat().st_size)
                last = max(contents.entries, key=lambda e: e.offset)
                self.assertEqual(last.offset + last.nbytes, contents.file_size)

    def test_layout_prefix(self):
        path, *_ = self.export("simple")
        data = path.read_bytes()
        self.assertEqual(data[:8], b"AFTMODEL")
        version, reserved, header_len = struct.unpack_from("<IIQ", data, 8)
        self.assertEqual((version, reserved), (1, 0))
        header = json.loads(data[24:24 + header_len].decode("utf-8"))
        first = min(entry["offset"] for entry in header["tensors"])
        self.assertEqual(first, (24 + header_len + 63) // 64 * 64)
        self.assertEqual(data[24 + header_len:first], bytes(first - 24 - header_len))

    def test_reader_rejects_a_flipped_bit(self):
        path, *_ = self.export("local")
        data = bytearray(path.read_bytes())
        contents = modelfile.read_file(path)
        entry = contents.entries[3]
        for position, message in ((entry.offset + 5, f'tensor "{entry.name}": checksum mismatch'),
                                  (2, "bad magic"), (8, "format version"), (12, "reserved")):
            with self.subTest(byte=position):
                corrupt = bytearray(data)
                corrupt[position] ^= 0x10
                with self.assertRaisesRegex(FormatError, message):
                    modelfile.decode_file(bytes(corrupt))
        truncated = bytes(data[:-1])
        with self.assertRaisesRegex(FormatError, "past the end of the file"):
            modelfile.decode_file(truncated)

    def rewrite_header(self, path: Path, edit) -> bytes:
        """The file with its header edited; tensor data moves by a multiple of 64 if needed."""
        data = path.read_bytes()
        old_len = struct.unpack_from("<Q", data, 16)[0]
        header = json.loads(data[24:24 + old_len])
        old_start = (24 + old_len + 63) // 64 * 64
        edit(header)
        for _ in range(2):  # the shift can change the header's length once more
            text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
            delta = (24 + len(text) + 63) // 64 * 64 - old_start
            if delta == 0:
                break
            for entry in header["tensors"]:
                entry["offset"] += delta
            old_start += delta
        new_start = 24 + len(text)
        padding = bytes(-new_start % 64)
        return data[:16] + struct.pack("<Q", len(text)) + text + padding + data[(24 + old_len + 63) // 64 * 64:]

    def test_reader_rejects_bad_headers(self):
        path, *_ = self.export("conv")

        def set_dtype(header):
            header["tensors"][1]["dtype"] = "f16"

        def misalign(header):
            header["tensors"][1]["offset"] += 4

        def overlap(header):
            header["tensors"][2]["offset"] = header["tensors"][1]["offset"]

        def drop_tensor(header):
            del header["tensors"][-1]

        def drop_config_key(header):
            del header["config"]["window"]

        def bad_window(header):
            header["config"]["window"] = 0

        def unknown_keys_ignored(header):
            header["future"] = 1
            header["config"]["future"] = 2

        cases = ((set_dtype, 'unsupported dtype \'f16\''), (misalign, "not a multiple of 64"),
                 (overlap, "overlap"), (drop_tensor, "missing tensor"),
                 (drop_config_key, "missing key.*window"), (bad_window, "config.window"))
        for edit, message in cases:
            with self.subTest(edit=edit.__name__):
                with self.assertRaisesRegex(FormatError, message):
                    modelfile.decode_file(self.rewrite_header(path, edit))
        modelfile.decode_file(self.rewrite_header(path, unknown_keys_ignored))

    def test_writer_errors_name_the_problem(self):
        config, tokenizer = make_fixtures.fixture_config("local")
        state_dict = export.random_model(config, 0).state_dict()
        out = self.dir / "x.aft"

        wrong = dict(state_dict)
        wrong["layers.1.mixer.pos_bias"] = torch.zeros(32, 32)
        with self.assertRaisesRegex(FormatError, r'"layers.1.mixer.pos_bias": expected shape \[64, 64\], found \[32, 32\]'):
            export.write_model(out, config, wrong, tokenizer)
        missing = {k: v for k, v in state_dict.items() if k != "norm.bias"}
        with self.assertRaisesRegex(FormatError, 'missing tensor "norm.bias"'):
            export.write_model(out, config, missing, tokenizer)
        extra = dict(state_dict, **{"layers.0.mixer.pos_u": torch.zeros(64, 4)})
        with self.assertRaisesRegex(FormatError, "unexpected tensor.*layers.0.mixer.pos_u"):
            export.write_model(out, config, extra, tokenizer)
        with self.assertRaisesRegex(FormatError, "missing key.*d_ff"):
            export.write_model(out, {k: v for k, v in config.items() if k != "d_ff"}, state_dict, tokenizer)
        with self.assertRaisesRegex(FormatError, "tokenizer: 40 tokens, but config.vocab_size is 256"):
            export.write_model(out, config, state_dict, make_fixtures.fixture_config("local_window1")[1])
        with self.assertRaisesRegex(FormatError, "duplicate"):
            export.write_model(out, dict(config, vocab_size=2), {}, {"type": "char", "vocab": ["a", "a"]})
        nan = dict(state_dict, **{"norm.weight": torch.full((32,), float("nan"))})
        with self.assertRaisesRegex(FormatError, '"norm.weight" contains NaN'):
            export.write_model(out, config, nan, tokenizer)
        self.assertFalse(out.exists())

    def test_token_shift_absent_from_the_header_is_false(self):
        """Files written before the key existed have none."""
        def drop_token_shift(header):
            del header["config"]["token_shift"]

        path, config, *_ = self.export("decay")
        contents = modelfile.decode_file(self.rewrite_header(path, drop_token_shift))
        self.assertEqual(contents.config, config)
        self.assertIs(contents.config["token_shift"], False)
        path, *_ = self.export("decay_shift")
        with self.assertRaisesRegex(FormatError, r"unexpected tensor.*layers\.0\.mixer\.shift\."):
            modelfile.decode_file(self.rewrite_header(path, drop_token_shift))

    def test_cli_decay(self):
        out = self.dir / "decay.aft"
        for flag in (["--token-shift"], ["--set", "token_shift=true"]):
            with self.subTest(flag=flag), contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(export.main(["--random", "--preset", "tiny", "--mixer", "decay",
                                              *flag, "--out", str(out)]), 0)
                self.assertIn("AFT-decay (token shift), 6 layers x 128", err.getvalue())
                contents = modelfile.read_file(out)
                self.assertEqual((contents.config["mixer"], contents.config["token_shift"]),
                                 ("decay", True))
                self.assertIn("layers.5.mixer.shift.value", contents.tensors)
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(export.main(["--random", "--preset", "tiny", "--mixer", "conv",
                                          "--token-shift", "--out", str(out)]), 1)
        self.assertIn('config.token_shift: expected false unless mixer is "decay"', err.getvalue())

    def test_cli_checkpoint_and_random(self):
        config, tokenizer = make_fixtures.fixture_config("full_factorized")
        model = export.random_model(config, 4)
        checkpoint = self.dir / "ckpt.pt"
        torch.save({"config": config, "model": model.state_dict(), "tokenizer": tokenizer,
                    "metadata": {"val_bits_per_char": 1.5}}, checkpoint)
        out = self.dir / "from_ckpt.aft"
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(export.main(["--checkpoint", str(checkpoint), "--out", str(out)]), 0)
        self.assertIn("parameters", err.getvalue())
        contents = modelfile.read_file(out)
        self.assertEqual(contents.metadata["val_bits_per_char"], 1.5)
        for name, tensor in model.state_dict().items():
            self.assertTrue(np.array_equal(contents.tensors[name], tensor.numpy()), name)

        config_file = self.dir / "cfg.json"
        config_file.write_text(json.dumps(config))
        out = self.dir / "random.aft"
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(export.main(["--random", "--config", str(config_file), "--seed", "3",
                                              "--set", "window=0", "--out", str(out)]), 0)
        self.assertEqual(modelfile.read_file(out).config["mixer"], "full")
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(export.main(["--random", "--config", str(config_file),
                                              "--set", "window=3", "--out", str(out)]), 1)
        self.assertIn("config.window: expected 0", err.getvalue())

    def test_cli_errors_are_one_line(self):
        """A bad config value, seed or input file: exit 1 (2 for a bad argument) and a line naming
        it, no traceback (these raised math, torch and codec errors), and no file written."""
        not_utf8 = self.dir / "not_utf8.txt"
        not_utf8.write_bytes(b"\xff\xfe{}")
        out = self.dir / "refused.aft"
        tool = [sys.executable, str(REPO_DIR / "tools" / "aft_export.py"), "--random", "--out", str(out)]
        seed_range = "argument --seed: expected an integer in [0, 2^64), found"
        cases = [(["--preset", "tiny", "--set", "d_model=-5"], 1,
                  "config.d_model: expected an integer > 0, found -5"),
                 (["--preset", "tiny", "--set", "d_model=nan"], 1,
                  "config.d_model: expected an integer > 0, found 'nan'"),
                 (["--preset", "tiny", "--vocab-file", str(not_utf8)], 1,
                  f"{not_utf8}: not UTF-8 text (byte 0: invalid start byte)"),
                 (["--config", str(not_utf8)], 1, f"{not_utf8}: not UTF-8 text (byte 0: invalid start byte)"),
                 (["--preset", "tiny", "--seed", str(10**23)], 2, f"{seed_range} '{10**23}'"),
                 (["--preset", "tiny", "--seed", "-1"], 2, f"{seed_range} '-1'"),
                 (["--preset", "tiny", "--seed", "one"], 2, f"{seed_range} 'one'")]
        for args, status, message in cases:
            with self.subTest(args=args):
                result = subprocess.run(tool + args, capture_output=True, text=True)
                self.assertEqual(result.returncode, status, result.stderr)
                self.assertNotIn("Traceback", result.stderr)
                lines = result.stderr.splitlines()
                self.assertEqual(lines[-1], f"aft_export: error: {message}")
                if status == 1:
                    self.assertEqual(len(lines), 1, result.stderr)
        self.assertFalse(out.exists())
        # The largest seed is taken (the test randomization's seed + 1 wraps to 0).
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(export.main(["--random", "--preset", "tiny", "--seed", str(2**64 - 1),
                                          "--out", str(out)]), 0)
        self.assertEqual(modelfile.read_file(out).metadata["seed"], 2**64 - 1)

    def test_cli_refuses_to_overwrite_an_input(self):
        """--out naming the checkpoint, the config or the vocabulary file (or a link to one): exit 1
        naming it, the input unchanged."""
        config, tokenizer = make_fixtures.fixture_config("local_window1")
        checkpoint = self.dir / "ckpt.pt"
        torch.save({"config": config, "model": export.random_model(config, 1).state_dict(),
                    "tokenizer": tokenizer}, checkpoint)
        config_file, vocab_file, link = self.dir / "cfg.json", self.dir / "vocab.txt", self.dir / "link.aft"
        config_file.write_text(json.dumps(config))
        vocab_file.write_text("abc\n")
        link.symlink_to(checkpoint.name)
        kept = {path: path.read_bytes() for path in (checkpoint, config_file, vocab_file)}
        tool = [sys.executable, str(REPO_DIR / "tools" / "aft_export.py")]
        cases = [(["--checkpoint", str(checkpoint), "--out", str(checkpoint)], f"{checkpoint} is the input file"),
                 (["--checkpoint", str(checkpoint), "--out", str(link)], f"{link} is the input file {checkpoint}"),
                 (["--random", "--config", str(config_file), "--out", str(config_file)],
                  f"{config_file} is the input file"),
                 (["--random", "--preset", "tiny", "--vocab-file", str(vocab_file), "--out", str(vocab_file)],
                  f"{vocab_file} is the input file")]
        for args, message in cases:
            with self.subTest(args=args):
                result = subprocess.run(tool + args, capture_output=True, text=True)
                self.assertEqual((result.returncode, result.stderr),
                                 (1, f"aft_export: error: {message}: refusing to overwrite it\n"))
        for path, data in kept.items():
            self.assertEqual(path.read_bytes(), data, path)


# The fixtures' computed floats go through PyTorch's BLAS and libm, whose kernels differ between
# CPUs (OpenBLAS picks Haswell, Zen, SkylakeX, Cooperlake or SapphireRapids kernels by CPU): the last
# bits of a regenerated fixture may differ from the kept one's without it being stale. Across those
# kernels the float32 logits differ by at most 4e-7 of their row's largest magnitude; a fixture made
# from other weights, tokens or reference code differs by orders of magnitude more.
LOGITS_ROW_TOLERANCE = 2e-6
# The unit references round the products' inputs to bf16: a value within those last bits of a bf16
# rounding boundary rounds the other way, moving the logits by about 1e-5 of their largest.
UNIT_LOGITS_ROW_TOLERANCE = 1e-4
# The float64 measures are stored to 10 significant digits.
MEASURE_TOLERANCE = 1e-9


def assert_same_logits(test: unittest.TestCase, name: str, fresh: bytes, kept: bytes, vocab: int):
    test.assertEqual(len(fresh), len(kept), f"{name} is stale: its size differs")
    fresh = np.frombuffer(fresh, "<f4").astype(np.float64).reshape(-1, vocab)
    kept = np.frombuffer(kept, "<f4").astype(np.float64).reshape(-1, vocab)
    error = (np.abs(fresh - kept).max(axis=1) / np.abs(kept).max(axis=1)).max()
    tolerance = UNIT_LOGITS_ROW_TOLERANCE if name.endswith(".unit_logits.f32") else LOGITS_ROW_TOLERANCE
    test.assertLessEqual(error, tolerance, f"{name} is stale")


def assert_same_measures(test: unittest.TestCase, name: str, fresh, kept, where: str = ""):
    """Equal JSON, floats within MEASURE_TOLERANCE (relative), everything else exactly."""
    if isinstance(kept, float) or isinstance(fresh, float):
        test.assertTrue(math.isclose(fresh, kept, rel_tol=MEASURE_TOLERANCE, abs_tol=0.0),
                        f"{name}{where}: {fresh} != {kept}: stale")
    elif isinstance(kept, dict) and isinstance(fresh, dict):
        test.assertEqual(sorted(fresh), sorted(kept), f"{name}{where}: other keys: stale")
        for key in kept:
            assert_same_measures(test, name, fresh[key], kept[key], f"{where}.{key}")
    elif isinstance(kept, list) and isinstance(fresh, list):
        test.assertEqual(len(fresh), len(kept), f"{name}{where}: other length: stale")
        for i, (a, b) in enumerate(zip(fresh, kept)):
            assert_same_measures(test, name, a, b, f"{where}[{i}]")
    else:
        test.assertEqual(fresh, kept, f"{name}{where} is stale")


class FixturesUpToDate(unittest.TestCase):
    def test_regenerated_fixtures_are_identical(self):
        """Seeded data (weights, tokens, text) bit for bit; computed floats within rounding."""
        with tempfile.TemporaryDirectory() as tmp:
            files = make_fixtures.generate(Path(tmp))
            stored = sorted(p.name for p in FIXTURES_DIR.iterdir()
                            if p.is_file() and p.name != "make_fixtures.py")
            self.assertEqual(stored, files, "run tests/fixtures/make_fixtures.py")
            for name in files:
                with self.subTest(file=name):
                    fresh, kept = (Path(tmp) / name).read_bytes(), (FIXTURES_DIR / name).read_bytes()
                    if name.endswith(".f32"):
                        expected = json.loads((FIXTURES_DIR / f"{name.split('.')[0]}.expected.json")
                                              .read_text())
                        assert_same_logits(self, name, fresh, kept, expected["logits_shape"][1])
                    elif name.endswith(".measures.json"):
                        assert_same_measures(self, name, json.loads(fresh), json.loads(kept))
                    else:
                        self.assertEqual(fresh, kept, f"{name} is stale: run tests/fixtures/make_fixtures.py")

    def test_the_check_refuses_a_stale_fixture(self):
        kept = (FIXTURES_DIR / "simple.logits.f32").read_bytes()
        logits = np.frombuffer(kept, "<f4").copy()
        logits[300] += np.float32(1e-4) * np.abs(logits[256:512]).max()
        with self.assertRaisesRegex(AssertionError, "simple.logits.f32 is stale"):
            assert_same_logits(self, "simple.logits.f32", logits.tobytes(), kept, 256)
        assert_same_logits(self, "simple.logits.f32", np.nextafter(
            np.frombuffer(kept, "<f4"), np.float32(np.inf)).tobytes(), kept, 256)
        measures = json.loads((FIXTURES_DIR / "eval_text.measures.json").read_text())
        changed = json.loads(json.dumps(measures))
        changed["simple"]["bits_per_char"] *= 1 + 1e-6
        with self.assertRaisesRegex(AssertionError, r"simple.bits_per_char.*stale"):
            assert_same_measures(self, "eval_text.measures.json", changed, measures)
        changed["simple"]["bits_per_char"] = measures["simple"]["bits_per_char"] * (1 + 1e-11)
        assert_same_measures(self, "eval_text.measures.json", changed, measures)
        changed["simple"]["tokens"] += 1
        with self.assertRaisesRegex(AssertionError, r"simple.tokens is stale"):
            assert_same_measures(self, "eval_text.measures.json", changed, measures)

    def test_fixtures_are_small_and_consistent(self):
        total = 0
        for name in make_fixtures.FIXTURES:
            expected = json.loads((FIXTURES_DIR / f"{name}.expected.json").read_text())
            contents = modelfile.read_file(FIXTURES_DIR / expected["model"])
            T, V = expected["logits_shape"]
            self.assertEqual(len(expected["tokens"]), T)
            self.assertEqual(V, contents.config["vocab_size"])
            self.assertGreater(T, contents.config["window"])
            logits = np.fromfile(FIXTURES_DIR / expected["logits_file"], dtype="<f4")
            self.assertEqual(logits.size, T * V)
            total += sum((FIXTURES_DIR / f).stat().st_size
                         for f in (expected["model"], expected["logits_file"]))
        self.assertLess(total, 2_000_000)


class StreamingMatchesParallel(unittest.TestCase):
    """AftStream (one token at a time, running state) against the parallel forward."""

    def check(self, name: str, length: int, seed: int):
        config = make_fixtures.fixture_config(name)[0]
        model = export.random_model(config, seed)
        tokens = random_tokens(config["vocab_size"], length, seed)
        with torch.inference_mode():
            want = model(tokens)
            stream = AftStream(model)
            got = torch.stack([stream.step(int(t)) for t in tokens])
        scale = float(want.abs().max())
        self.assertLess(float((got - want).abs().max()), 1e-5 * scale, name)

    def test_every_variant(self):
        for seed, name in enumerate(make_fixtures.FIXTURES):
            with self.subTest(variant=name):
                self.check(name, 40, seed)

    def test_past_the_sinusoidal_table(self):   # no position limit: the encoding is computed
        for name in ("simple_sinusoidal_gelu", "conv_sinusoidal_gelu"):
            with self.subTest(variant=name):
                self.check(name, 100, 7)

    def test_decay_over_long_sequences(self):   # biases down to -(T - 2) exp(3), in float32
        for name in ("decay", "decay_shift"):
            with self.subTest(variant=name):
                self.check(name, 300, 8)


class DecayMixer(unittest.TestCase):
    """The decay mixer (and its token shift) beyond the fixtures."""

    def test_three_forms_agree_with_extreme_keys_over_long_sequences(self):
        """The parallel form, the float64 loop and the stream, with keys and bonuses of +-80 and
        decays from exp(-6) (nearly none over the sequence) to exp(4) (a token's memory)."""
        for name in ("decay", "decay_shift"):
            with self.subTest(variant=name):
                config = all_variant_configs()[name]
                model = export.random_model(config, 12)
                generator = torch.Generator().manual_seed(6)

                def uniform(tensor, low, high):
                    tensor.copy_(low + (high - low) * torch.rand(tensor.shape, generator=generator))

                with torch.no_grad():
                    for layer in model.layers:
                        mixer = layer.mixer
                        mixer.key.weight.mul_(40.0)   # keys spread over about +-80
                        uniform(mixer.key.bias, -80, 80)
                        uniform(mixer.bonus, -80, 80)
                        uniform(mixer.decay, -6, 4)
                tokens = random_tokens(config["vocab_size"], 200, 4)
                with torch.inference_mode():
                    logits = model(tokens)
                    stream = AftStream(model)
                    streamed = torch.stack([stream.step(int(t)) for t in tokens])
                self.assertTrue(torch.isfinite(logits).all() and torch.isfinite(streamed).all())
                reference = model.forward_naive(tokens.tolist()).numpy()
                for got in (logits, streamed):
                    np.testing.assert_allclose(got.double().numpy(), reference, atol=1e-4, rtol=0)

    def test_training_step_reaches_every_parameter(self):
        config = all_variant_configs()["decay_shift"]
        model = AftLM(config, dropout=0.1).train()
        tokens = torch.stack([random_tokens(config["vocab_size"], 33, seed) for seed in range(2)])
        logits = model(tokens[:, :-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
        for name, param in model.named_parameters():
            self.assertTrue(torch.isfinite(param.grad).all(), name)
            if ".mixer." in name:
                self.assertGreater(float(param.grad.abs().sum()), 0, name)

    def test_initial_values(self):
        """RWKV-4's: per layer, log lambda from -5 to 3 over the channels, deeper layers' slower;
        the bonus log(0.3) +- 0.5; the mixes in [0, 1.3]."""
        model = AftLM(default_config(mixer="decay", token_shift=True, d_model=16, n_layers=3))
        decays = [layer.mixer.decay.detach() for layer in model.layers]
        for decay in decays:
            self.assertAlmostEqual(float(decay[0]), -5.0, places=5)
            self.assertAlmostEqual(float(decay[-1]), 3.0, places=5)
            self.assertTrue(bool((decay[1:] > decay[:-1]).all()))
        self.assertTrue(decays[0][8] > decays[1][8] > decays[2][8])
        bonus = model.layers[0].mixer.bonus.detach()
        np.testing.assert_allclose(bonus[:3].numpy(), math.log(0.3) + np.array([0.0, 0.5, -0.5]),
                                   rtol=1e-6)
        for layer in model.layers:
            for mu in layer.mixer.shift.values():
                self.assertTrue(bool((mu >= 0).all() and (mu <= 1.3).all()))


class DecayConfig(unittest.TestCase):
    """The schema of the decay mixer and token_shift (docs/format.md)."""

    def config(self, **overrides) -> dict:
        return {**all_variant_configs()["decay"], **overrides}

    def test_token_shift_only_with_decay(self):
        for name in ("simple", "local", "conv", "full_table", "full_factorized"):
            with self.subTest(variant=name):
                config = dict(all_variant_configs()[name], token_shift=True)
                with self.assertRaisesRegex(FormatError, r'^config\.token_shift: expected false '
                                                         r'unless mixer is "decay", found True$'):
                    modelfile.validate_config(config)
        self.assertIs(modelfile.validate_config(self.config(token_shift=True))["token_shift"], True)
        for value in (1, 0, "true", None):
            with self.subTest(value=value), \
                    self.assertRaisesRegex(FormatError, r"^config\.token_shift: expected true or false"):
                modelfile.validate_config(self.config(token_shift=value))

    def test_token_shift_may_be_absent(self):
        for strict_keys in (False, True):
            config = {k: v for k, v in self.config(token_shift=True).items() if k != "token_shift"}
            validated = modelfile.validate_config(config, strict_keys=strict_keys)
            self.assertEqual(list(validated), list(modelfile.CONFIG_KEYS))
            self.assertIs(validated["token_shift"], False)

    def test_neutral_keys_and_no_length_limit(self):
        for key, value in (("window", 2), ("n_heads", 2), ("bias_rank", 1)):
            with self.subTest(key=key), self.assertRaisesRegex(FormatError, f"^config\\.{key}: "):
                modelfile.validate_config(self.config(**{key: value}))
        self.assertEqual(max_positions(self.config()), 0)
        self.assertEqual(max_positions(self.config(pos_encoding="learned")), 64)

    def test_tensors(self):
        """After the output projection: decay and bonus, then the token shift's mixes."""
        for token_shift, extra in ((False, []),
                                   (True, ["shift.query", "shift.key", "shift.value"])):
            config = modelfile.validate_config(self.config(token_shift=token_shift))
            names = [name for name, _ in modelfile.expected_tensors(config)]
            first = names.index("layers.0.mixer.output.bias") + 1
            mixer = ["layers.0.mixer." + name for name in ["decay", "bonus", *extra]]
            self.assertEqual(names[first:first + len(mixer)], mixer)
            self.assertEqual(names[first + len(mixer)], "layers.0.norm2.weight")
            self.assertEqual({shape for name, shape in modelfile.expected_tensors(config)
                              if name in mixer}, {(32,)})
            self.assertFalse(any(modelfile.is_linear_weight(name) for name in mixer))
            self.assertEqual(set(AftLM(config).state_dict()), set(names))


if __name__ == "__main__":
    unittest.main()
