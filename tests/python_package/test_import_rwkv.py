"""aft.importers.rwkv4 (tools/aft_import_rwkv.py): an RWKV-4 checkpoint, BlinkDL's state_dict or an
rwkv.cpp file, becomes the same tensors either way, and a file whose logits are the float64
reference's (aft.rwkv4_reference) on every kernel path, a prompt at once and token by token; what
the engine cannot represent is refused, naming the reason."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

import rwkv4_support as support
from aft import modelfile, rwkv4_reference, tokenizers
from aft.importers import rwkv4
from aft.importers.checkpoint import ImportRefused
import package_support
from package_support import REPO_DIR, aft

VOCAB, WIDTH, N_LAYERS = 256, 64, 2  # 4 x 64 = 256 hidden: every matrix has q8_0 blocks
TOKENS = [int(t) for t in np.random.default_rng(5).integers(0, VOCAB, 24)]
IMPORTER = REPO_DIR / "tools" / "aft_import_rwkv.py"
ENGINE_LOGITS = Path(__file__).resolve().parent / "engine_logits.py"
TOKENIZERS = REPO_DIR / "tests" / "fixtures" / "tokenizers"
BPE, BPE_SIZE = "gpt_neox_like.tokenizer.json", 659
WORLD, WORLD_SIZE = "world_vocab.txt", 575
# The kernel paths of x86-64 and Arm (AFT_ISA); those this CPU lacks are skipped.
ISAS = ("scalar", "sse2", "avx2", "avx512", "avx512vnni", "avx512bf16", "avx512amx", "neon", "neondot")
# Relative to each row's largest |logit| (package_support.assert_rows_close's measure), the largest
# seen on x86-64 in the comments. Against the reference of the file's own weights (bf16 and q8_0
# widened exactly): f32 arithmetic against float64 (6e-7), except q8_0, whose products round their
# inputs to 8-bit blocks too (2e-2), a prompt's as a token's. Against the checkpoint's weights, bf16
# and q8_0 also carry the rounding of the weights (bf16 3.6e-3, q8_0 1.2e-2 prompt, 1.8e-2 by token).
TOLERANCE = {("f32", "prefill"): 1e-4, ("f32", "steps"): 1e-4,
             ("bf16", "prefill"): 1e-4, ("bf16", "steps"): 1e-4,
             ("q8_0", "prefill"): 5e-2, ("q8_0", "steps"): 5e-2}
TOLERANCE_TO_CHECKPOINT = {"f32": 1e-4, "bf16": 1e-2, "q8_0": 5e-2}
# A bf16 model on matrix units (aft.matrix_units()) rounds its products' inputs to bf16 as well,
# prompt and decode, which this reference does not (3.5e-3 seen with AVX512-BF16);
# tests/golden_test.cpp holds that path to a reference that rounds them too.
TOLERANCE_ON_UNITS = {("bf16", "prefill"): 1e-2, ("bf16", "steps"): 1e-2}
# aft tensor -> BlinkDL key, to run the reference on a file's weights
SOURCE_KEY = {target: key for key, _, target in rwkv4.GLOBAL_KEYS} | {
    f"layers.{i}.{target}": f"blocks.{i}.{key}" for i in range(N_LAYERS) for key, _, target in rwkv4.LAYER_KEYS}


def checkpoint(seed: int = 1, dtype=torch.float32) -> dict:
    return support.random_checkpoint(VOCAB, WIDTH, N_LAYERS, seed, dtype)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over a row / the row's largest |want|, the worst row."""
    return float((np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)).max())


class Case(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.dir = Path(self.directory.name)
        self.model_path = self.dir / "rwkv.aft"

    def tearDown(self):
        self.directory.cleanup()

    def save(self, state_dict: dict, name: str = "model.pth") -> Path:
        path = self.dir / name
        torch.save(state_dict, path)
        return path

    def save_rwkv_cpp(self, state_dict: dict, name: str = "model.bin", **options) -> Path:
        path = self.dir / name
        support.write_rwkv_cpp(path, state_dict, **options)
        return path


class ReferenceTest(unittest.TestCase):
    """The two forms of the reference, each wkv from its definition and the running state, agree."""

    def test_whole_sequence_and_stream_agree(self):
        state_dict = support.as_numpy(checkpoint())
        whole = rwkv4_reference.logits(state_dict, TOKENS)
        stream = rwkv4_reference.Stream(state_dict)
        steps = np.stack([stream.step(token) for token in TOKENS])
        self.assertGreater(np.abs(whole).max(), 1.0)  # logits of real size
        self.assertLess(relative_error(steps, whole), 1e-12)
        other = rwkv4_reference.logits(support.as_numpy(checkpoint(seed=2)), TOKENS)
        self.assertGreater(relative_error(other, whole), 0.1)


class MappingTest(Case):
    """The imported config and tensors mean RWKV-4 to the aft family's own reference
    (aft.reference.forward_naive, from docs/format.md's definitions): the mapping, without the engine."""

    def test_aft_reference_of_the_import_is_rwkv4(self):
        state_dict = checkpoint()
        config, tensors, _ = rwkv4.read_checkpoint(self.save(state_dict))
        from aft import reference
        aft_logits = reference.forward_naive(config, {name: torch.from_numpy(value) for name, value in
                                                       tensors.items()}, TOKENS).numpy()
        rwkv_logits = rwkv4_reference.logits(support.as_numpy(state_dict), TOKENS)
        # float64 both; the decay's float32 round trip (an ulp of exp(time_decay)) is the difference
        self.assertLess(relative_error(aft_logits, rwkv_logits), 1e-7)  # 4.8e-9 seen


class SameTensorsTest(Case):
    """Both inputs of the same weights give the same config and the same tensor bytes."""

    def assertSameModel(self, first: Path, second: Path):
        a, b = rwkv4.read_checkpoint(first), rwkv4.read_checkpoint(second)
        self.assertEqual(a[0], b[0])
        self.assertEqual(sorted(a[1]), sorted(b[1]))
        for name in a[1]:
            self.assertEqual(a[1][name].dtype, np.float32, name)
            self.assertEqual(a[1][name].tobytes(), b[1][name].tobytes(), name)
        # and as files
        files = []
        for source in (first, second):
            out = self.dir / f"{source.name}.aft"
            rwkv4.import_checkpoint(source, out)
            files.append(modelfile.read_file(out))
        self.assertEqual(files[0].config, files[1].config)
        self.assertEqual([(e.name, e.dtype, e.shape, e.crc32) for e in files[0].entries],
                         [(e.name, e.dtype, e.shape, e.crc32) for e in files[1].entries])

    def test_fp32(self):
        state_dict = checkpoint()
        self.assertSameModel(self.save(state_dict), self.save_rwkv_cpp(state_dict))

    def test_fp16(self):
        """rwkv.cpp's FP16 keeps the matrices in fp16 and the vectors in fp32, as its converter."""
        state_dict = checkpoint(dtype=torch.float16)
        self.assertSameModel(self.save(state_dict), self.save_rwkv_cpp(state_dict, matrices=support.FP16))

    def test_bf16(self):
        state_dict = checkpoint(dtype=torch.bfloat16)
        self.assertSameModel(self.save(state_dict), self.save_rwkv_cpp(state_dict))

    def test_time_vectors_of_either_shape(self):
        state_dict = checkpoint()
        for key in list(state_dict):
            if ".time_" in key:
                state_dict[key] = state_dict[key].reshape(1, 1, WIDTH)  # time_decay, time_first too
        self.assertSameModel(self.save(state_dict), self.save(checkpoint(), "flat.pth"))

    def test_values(self):
        state_dict = checkpoint()
        config, tensors, metadata = rwkv4.read_checkpoint(self.save(state_dict))
        self.assertEqual({key: config[key] for key in ("vocab_size", "d_model", "n_layers", "d_ff")},
                         {"vocab_size": VOCAB, "d_model": WIDTH, "n_layers": N_LAYERS, "d_ff": 4 * WIDTH})
        self.assertEqual({key: config[key] for key in ("mixer", "token_shift", "ffn", "activation",
                                                       "embed_norm", "linear_bias", "pos_encoding")},
                         {"mixer": "decay", "token_shift": True, "ffn": "channel_mix",
                          "activation": "relu_squared", "embed_norm": True, "linear_bias": False,
                          "pos_encoding": "none"})
        pairs = {"embed.weight": "emb.weight", "embed_norm.bias": "blocks.0.ln0.bias",
                 "layers.1.mixer.query.weight": "blocks.1.att.receptance.weight",
                 "layers.1.mixer.bonus": "blocks.1.att.time_first",
                 "layers.1.mixer.shift.value": "blocks.1.att.time_mix_v",
                 "layers.0.ffn.up.weight": "blocks.0.ffn.key.weight",
                 "layers.0.ffn.down.weight": "blocks.0.ffn.value.weight",
                 "layers.0.ffn.gate.weight": "blocks.0.ffn.receptance.weight",
                 "layers.0.ffn.shift.gate": "blocks.0.ffn.time_mix_r", "norm.weight": "ln_out.weight"}
        for name, key in pairs.items():
            np.testing.assert_array_equal(tensors[name], state_dict[key].numpy().reshape(tensors[name].shape))
        # decay = log(exp(time_decay)) through float32: within an ulp or two of time_decay
        np.testing.assert_allclose(tensors["layers.0.mixer.decay"], state_dict["blocks.0.att.time_decay"],
                                   rtol=0, atol=3e-7)
        self.assertEqual(len(tensors), len(modelfile.expected_tensors(config)))

    def test_q8_0_is_converted_exactly(self):
        state_dict = checkpoint()
        _, tensors, metadata = rwkv4.read_checkpoint(self.save_rwkv_cpp(state_dict, matrices=support.Q8_0))
        self.assertEqual(metadata["source"], "RWKV-4 rwkv.cpp file (version 101, Q8_0)")
        np.testing.assert_array_equal(tensors["layers.1.ffn.down.weight"],
                                      support.q8_0_values(state_dict["blocks.1.ffn.value.weight"].numpy()))
        np.testing.assert_array_equal(tensors["head.weight"], support.q8_0_values(state_dict["head.weight"].numpy()))
        np.testing.assert_array_equal(tensors["norm.bias"], state_dict["ln_out.bias"].numpy())


class EngineTest(Case):
    """The engine against the float64 reference, on every kernel path this CPU runs."""

    def engine_runs(self, dtype: str):
        """(isa, prefill logits, token-by-token logits) per kernel path this CPU has."""
        rwkv4.import_checkpoint(self.save(checkpoint()), self.model_path, dtype=dtype)
        for isa in ISAS:
            out = self.dir / f"{isa}.npz"
            result = subprocess.run([sys.executable, str(ENGINE_LOGITS), str(self.model_path), str(out),
                                     *map(str, TOKENS)], env={**os.environ, "AFT_ISA": isa},
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            run = np.load(out)
            if str(run["isa"]) != isa:  # the engine said AFT_ISA is not available here
                continue
            yield isa, run["prefill"].astype(np.float64), run["steps"].astype(np.float64)

    def file_weights(self) -> dict:
        """The file's tensors in BlinkDL's layout (bf16 and q8_0 dequantized, exactly as the engine
        widens them; the decay as a time_decay: exp(decay) is the decay a step)."""
        tensors = modelfile.read_file(self.model_path).tensors
        return {SOURCE_KEY[name]: value.astype(np.float64) for name, value in tensors.items()}

    def check(self, dtype: str):
        checkpoint_reference = rwkv4_reference.logits(support.as_numpy(checkpoint()), TOKENS)
        paths = []
        for isa, prefill, steps in self.engine_runs(dtype):
            paths.append(isa)
            reference = rwkv4_reference.logits(self.file_weights(), TOKENS)
            for fed, logits in (("prefill", prefill), ("steps", steps)):
                error = relative_error(logits, reference)
                to_checkpoint = relative_error(logits, checkpoint_reference)
                print(f"\n  {dtype} {isa} {fed}: {error:.2e} (to the checkpoint: {to_checkpoint:.2e})",
                      end="", file=sys.stderr)
                with self.subTest(isa=isa, fed=fed):
                    on_units = aft.matrix_units() != ""
                    self.assertLess(error, TOLERANCE_ON_UNITS.get((dtype, fed), TOLERANCE[dtype, fed])
                                    if on_units else TOLERANCE[dtype, fed])
                    self.assertLess(to_checkpoint, TOLERANCE_TO_CHECKPOINT[dtype])
        self.assertIn("scalar", paths)

    def test_f32(self):
        self.check("f32")

    def test_bf16(self):
        self.check("bf16")

    def test_q8_0(self):
        self.check("q8_0")


class RefusalTest(Case):
    def assertRefused(self, path: Path, *fragments: str, tokenizer=None):
        with self.assertRaises(ImportRefused) as caught:
            rwkv4.import_checkpoint(path, self.model_path, tokenizer)
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))
        self.assertFalse(self.model_path.exists())

    def assertRefusedBoth(self, state_dict: dict, *fragments: str):
        """Refused as a state_dict and as an rwkv.cpp file."""
        with self.subTest(input="state_dict"):
            self.assertRefused(self.save(state_dict), *fragments)
        tensors = support.converted_tensors(state_dict)
        with self.subTest(input="rwkv.cpp"):
            self.assertRefused(self.save_rwkv_cpp(checkpoint(), tensors=tensors), *fragments)

    def test_later_versions(self):
        cases = {"blocks.0.att.time_faaaa": "RWKV-5", "blocks.3.att.ln_x.weight": "RWKV-5",
                 "blocks.0.att.time_maa_x": "RWKV-6", "blocks.1.att.time_decay_w1": "RWKV-6",
                 "blocks.0.att.x_r": "RWKV-7", "blocks.0.att.w0": "RWKV-7", "blocks.0.att.a0": "RWKV-7",
                 "blocks.0.att.v0": "RWKV-7"}
        for key, version in cases.items():
            with self.subTest(key=key):
                state_dict = checkpoint()
                state_dict[key] = torch.zeros(1, 1, WIDTH)
                self.assertRefusedBoth(state_dict, f'key "{key}" is a {version} key',
                                       f"a {version} checkpoint", "RWKV-4 only")

    def test_missing_key(self):
        for key in ("blocks.1.att.time_first", "blocks.0.ln0.weight", "head.weight", "blocks.0.ffn.time_mix_r"):
            with self.subTest(key=key):
                state_dict = checkpoint()
                del state_dict[key]
                self.assertRefusedBoth(state_dict, f'missing key "{key}" (expected shape [')

    def test_misshapen_key(self):
        cases = {"blocks.0.att.key.weight": ((WIDTH, WIDTH + 1), f"[{WIDTH}, {WIDTH}]"),
                 "blocks.1.ffn.value.weight": ((WIDTH, 2 * WIDTH), f"[{WIDTH}, {4 * WIDTH}]"),
                 "blocks.1.att.time_mix_k": ((1, WIDTH), f"[{WIDTH}] or [1, 1, {WIDTH}]"),
                 "ln_out.bias": ((WIDTH - 1,), f"[{WIDTH}]")}
        for key, (shape, expected) in cases.items():
            with self.subTest(key=key):
                state_dict = checkpoint()
                state_dict[key] = torch.zeros(shape)
                self.assertRefused(self.save(state_dict), f'key "{key}": expected shape {expected}',
                                   f"found {list(shape)}")

    def test_unexpected_key(self):
        state_dict = checkpoint()
        state_dict["blocks.1.ln0.weight"] = torch.ones(WIDTH)  # ln0 belongs to block 0 only
        self.assertRefusedBoth(state_dict, "unexpected key(s) blocks.1.ln0.weight")

    def test_tensor_dtype(self):
        for dtype in (torch.float64, torch.int32):
            with self.subTest(dtype=dtype):
                state_dict = checkpoint()
                state_dict["blocks.0.ln2.bias"] = state_dict["blocks.0.ln2.bias"].to(dtype)
                self.assertRefused(self.save(state_dict), '"blocks.0.ln2.bias": dtype',
                                   "expected float32, float16 or bfloat16")

    def test_decay_beyond_float32(self):
        state_dict = checkpoint()
        state_dict["blocks.1.att.time_decay"][5] = -200.0  # exp underflows: w = -0
        self.assertRefusedBoth(state_dict, '"blocks.1.att.time_decay": channel 5', "no finite decay")

    def test_quantized_rwkv_cpp_types(self):
        names = {support.Q4_0: "Q4_0", support.Q4_1: "Q4_1", support.Q4_1_O: "Q4_1_O",
                 support.Q4_2: "Q4_2", support.Q4_3: "Q4_3", support.Q5_0: "Q5_0", support.Q5_1: "Q5_1"}
        for data_type, name in names.items():
            with self.subTest(type=name, where="header"):
                self.assertRefused(self.save_rwkv_cpp(checkpoint(), matrices=data_type),
                                   f"header: data type {name}", "fewer than 8 bits")
            with self.subTest(type=name, where="tensor"):
                tensors = support.converted_tensors(checkpoint())
                tensors = [(key, data_type if key == "head.weight" else kind, array)
                           for key, kind, array in tensors]
                self.assertRefused(self.save_rwkv_cpp(checkpoint(), tensors=tensors),
                                   f'key "head.weight": data type {name}')
        self.assertRefused(self.save_rwkv_cpp(checkpoint(), header={"data_type": 12}), "unknown data type 12")
        self.assertRefused(self.save_rwkv_cpp(checkpoint(), matrices=support.Q8_0, version=100),
                           "Q8_0 of file version 100")

    def test_rwkv_cpp_header(self):
        cases = {"n_embed": (WIDTH * 2, f"header n_embed is {WIDTH * 2}, but the tensors have {WIDTH}"),
                 "n_vocab": (50277, "header n_vocab is 50277"), "n_layer": (3, "header n_layer is 3"),
                 "version": (102, "version 102, expected one of 100, 101")}
        for field, (value, fragment) in cases.items():
            with self.subTest(field=field):
                self.assertRefused(self.save_rwkv_cpp(checkpoint(), header={field: value}), fragment)

    def test_truncated_rwkv_cpp_file(self):
        path = self.save_rwkv_cpp(checkpoint())
        path.write_bytes(path.read_bytes()[:-10])
        self.assertRefused(path, 'key "', "bytes of data expected, the file has")

    def test_vocabulary_needs_a_tokenizer(self):
        state_dict = support.random_checkpoint(300, WIDTH, 1)
        self.assertRefused(self.save(state_dict), "300 tokens: give its tokenizer with --tokenizer")

class TokenizerTest(Case):
    """--tokenizer through aft.tokenizers, with the tokenizer fixtures (a GPT-NeoX-like BPE of 659
    tokens, an RWKV World vocabulary of 575)."""

    def convert(self, vocab: int, tokenizer: str, pad: bool = False) -> None:
        rwkv4.import_checkpoint(self.save(support.random_checkpoint(vocab, WIDTH, 1)), self.model_path,
                                TOKENIZERS / tokenizer, pad_tokenizer=pad)

    def test_bpe(self):
        self.convert(BPE_SIZE, BPE)
        contents = modelfile.read_file(self.model_path)
        self.assertEqual(contents.tokenizer, tokenizers.tokenizer_from_file(TOKENIZERS / BPE))
        with aft.Model(self.model_path) as model:
            self.assertEqual(model.info.vocab_size, BPE_SIZE)
            self.assertEqual(model.end_of_text, 0)  # <|endoftext|>, where generation stops
            tokens = model.tokenize("The quick brown fox")
            self.assertTrue(tokens and all(0 <= token < BPE_SIZE for token in tokens))

    def test_size_mismatch(self):
        with self.assertRaises(ImportRefused) as caught:
            self.convert(VOCAB, BPE)
        self.assertIn(f"tokenizer {BPE}: {BPE_SIZE} tokens, but the checkpoint has {VOCAB} (emb.weight's rows)",
                      str(caught.exception))
        self.assertNotIn("--pad-tokenizer", str(caught.exception))  # a larger tokenizer is never cut
        with self.assertRaises(ImportRefused):
            self.convert(VOCAB, BPE, pad=True)
        self.assertFalse(self.model_path.exists())

    def test_pad(self):
        with self.assertRaises(ImportRefused) as caught:
            self.convert(640, WORLD)
        self.assertIn(f"{WORLD_SIZE} tokens, but the checkpoint has 640", str(caught.exception))
        self.assertIn(f"--pad-tokenizer leaves ids {WORLD_SIZE} to 639 unused", str(caught.exception))
        self.convert(640, WORLD, pad=True)
        self.assertEqual(modelfile.tokenizer_size(modelfile.read_file(self.model_path).tokenizer), 640)
        with aft.Model(self.model_path) as model:
            self.assertEqual(model.end_of_text, 0)


class CommandLineTest(Case):
    def run_main(self, *args: str) -> tuple[int, str]:
        return package_support.run_main(rwkv4.main, *args)

    def test_dtypes(self):
        source = self.save_rwkv_cpp(checkpoint(), matrices=support.FP16)
        for dtype in ("f32", "bf16", "q8_0"):
            with self.subTest(dtype=dtype):
                out = self.dir / f"{dtype}.aft"
                status, message = self.run_main(str(source), str(out), "--dtype", dtype)
                self.assertEqual(status, 0, message)
                self.assertIn(f"AFT-decay (token shift), {N_LAYERS} layers x {WIDTH}", message)
                entries = {entry.name: entry.dtype for entry in modelfile.read_file(out).entries}
                self.assertEqual(entries["layers.0.ffn.gate.weight"], dtype)
                self.assertEqual(entries["head.weight"], dtype)
                self.assertEqual(entries["embed.weight"], "f32")
                self.assertEqual(entries["layers.0.mixer.decay"], "f32")

    def test_refusal_exits_1_naming_the_key(self):
        state_dict = checkpoint()
        del state_dict["blocks.0.ln1.bias"]
        result = subprocess.run([sys.executable, str(IMPORTER), str(self.save(state_dict)), str(self.model_path)],
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr, 'aft_import_rwkv: error: rwkv: missing key "blocks.0.ln1.bias" '
                                        f'(expected shape [{WIDTH}])\n')
        self.assertFalse(self.model_path.exists())

    def test_rwkv_cpp_file_needs_no_torch(self):
        source = self.save_rwkv_cpp(checkpoint())
        script = ("import sys; from aft.importers import rwkv4; "
                  f"rwkv4.read_checkpoint({str(source)!r}); print('torch' in sys.modules)")
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent)
        self.assertEqual((result.returncode, result.stdout, result.stderr), (0, "False\n", ""))

    def test_output_that_is_an_input_is_refused(self):
        """The checkpoint or the tokenizer as the output, by its name or through a symbolic or hard
        link: exit 1 naming the file, before anything is written (it used to replace the input)."""
        source = self.save(checkpoint())
        tokenizer = self.dir / "tokenizer.json"
        tokenizer.write_bytes((TOKENIZERS / BPE).read_bytes())
        symlink, hard_link = self.dir / "symlink.aft", self.dir / "hard_link.aft"
        symlink.symlink_to(source.name)
        hard_link.hardlink_to(source)
        cases = [((source, source), f"{source} is the input file"),
                 ((source, symlink), f"{symlink} is the input file {source}"),
                 ((source, hard_link), f"{hard_link} is the input file {source}"),
                 ((source, tokenizer, "--tokenizer", tokenizer), f"{tokenizer} is the input file")]
        package_support.assert_inputs_kept(self, IMPORTER, "aft_import_rwkv", cases, (source, tokenizer))

    def test_bad_inputs(self):
        notes, out = self.dir / "notes.txt", str(self.dir / "out.aft")
        notes.write_text("not a checkpoint")
        cases = [((str(notes), out), 1, "cannot load as a PyTorch state_dict"),
                 ((str(self.dir / "missing.pth"), out), 1, "missing.pth"),
                 ((str(notes), out, "--dtype", "q4"), 2, "invalid choice: 'q4'")]
        package_support.assert_refusals(self, rwkv4.main, cases, out)


if __name__ == "__main__":
    unittest.main()
