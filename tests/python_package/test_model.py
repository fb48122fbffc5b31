"""aft.Model: loading, info, metadata, the tokenizer, errors, lifetimes."""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

from package_support import FIXTURE_NAMES, REPO_DIR, SHIPPED_MODEL, aft, fixture, small_model
from aft import _library, modelfile


class ModelInfoTest(unittest.TestCase):
    def test_shipped_model(self):
        with aft.Model(SHIPPED_MODEL) as model:
            self.assertEqual(model.info, aft.ModelInfo(
                mixer="local", tokenizer="char", vocab_size=85, d_model=128, n_layers=4, d_ff=256,
                window=32, n_heads=1, max_positions=256, n_parameters=814_165,
                file_bytes=os.path.getsize(SHIPPED_MODEL), n_matmul_parameters=535_168))

    def test_every_field_of_the_c_struct(self):
        c_fields = [name for name, _ in _library.ModelInfoStruct._fields_]
        self.assertEqual(c_fields, [field for field in aft.ModelInfo.__dataclass_fields__])

    def test_fixtures_match_the_reference_logits(self):
        for name in FIXTURE_NAMES:
            with self.subTest(fixture=name):
                path, tokens, reference = fixture(name)
                with aft.Model(path) as model, aft.Session(model) as session:
                    self.assertEqual(model.info.vocab_size, reference.shape[1])
                    logits = session.eval(tokens, logits="all")
                    on_units = (model.metadata.get("metadata.dtype") == "bf16"
                                and aft.matrix_units() != "")
                self.assertEqual(logits.shape, reference.shape)
                self.assertEqual(logits.dtype, np.float32)
                # As the C++ golden test: max error over a row / the row's largest magnitude, 3e-4
                # where both round the products' inputs to bf16 (a float rounded either side of a
                # bf16 boundary).
                scale = np.abs(reference).max(axis=1)
                error = np.abs(logits.astype(np.float64) - reference).max(axis=1) / scale
                self.assertLess(error.max(), 3e-4 if on_units else 1e-4)

    def test_from_bytes_is_the_file(self):
        path, tokens, _ = fixture("local_q8_0")
        with aft.Model(path) as from_file, aft.Model.from_bytes(path.read_bytes()) as from_bytes:
            self.assertEqual(from_bytes.path, "<memory>")
            self.assertEqual(from_bytes.info, from_file.info)
            self.assertEqual(from_bytes.metadata, from_file.metadata)
            with aft.Session(from_file) as a, aft.Session(from_bytes) as b:
                np.testing.assert_array_equal(b.eval(tokens, logits="all"),
                                              a.eval(tokens, logits="all"))

    def test_metadata(self):
        with aft.Model(SHIPPED_MODEL) as model:
            metadata = model.metadata
        self.assertEqual(metadata["config.d_model"], "128")
        self.assertEqual(metadata["config.mixer"], "local")
        self.assertEqual(metadata["tokenizer.type"], "char")
        self.assertEqual(list(metadata), sorted(metadata))

    def test_fingerprint(self):
        with aft.Model(SHIPPED_MODEL) as model, aft.Session(model) as session:
            fingerprint = model.fingerprint
            state = session.state()
        # A saved state carries it (docs/format.md, "Session state": bytes 12 to 15).
        self.assertEqual(fingerprint, int.from_bytes(state[12:16], "little"))
        self.assertNotEqual(fingerprint, 0)


class ModelErrorsTest(unittest.TestCase):
    def test_missing_file(self):
        with self.assertRaises(aft.AftError) as caught:
            aft.Model("no/such/model.aft")
        self.assertEqual(caught.exception.status, aft.Status.IO)
        self.assertIn("no/such/model.aft", caught.exception.message)

    def test_a_path_with_a_null_byte_is_refused(self):  # the library would load the part before it
        with self.assertRaises(ValueError) as caught:
            aft.Model(str(SHIPPED_MODEL) + "\0/not/this")
        self.assertIn("null byte", str(caught.exception))

    def test_error_pickles(self):  # as a Dask worker sends it
        error = aft.AftError(aft.Status.IO, "x.aft: cannot open")
        copy = pickle.loads(pickle.dumps(error))
        self.assertEqual((copy.status, copy.message, str(copy)), (error.status, error.message,
                                                                  "io: x.aft: cannot open"))

    def test_corrupted_tensor(self):
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "flipped.aft"
            data = bytearray((REPO_DIR / "tests" / "fixtures" / "simple.aft").read_bytes())
            data[-5] ^= 0x01  # inside the last tensor's data
            path.write_bytes(bytes(data))
            with self.assertRaises(aft.AftError) as caught:
                aft.Model(path)
            self.assertEqual(caught.exception.status, aft.Status.FORMAT)
            self.assertIn("CRC", caught.exception.message.upper())
            with aft.Model(path, verify_checksums=False) as model:
                self.assertEqual(model.info.mixer, "simple")

    def test_matmul_precision(self):
        # bf16 puts a prompt's f32 products on the matrix units: the bits of the model stored in
        # bf16 (conv_bf16 is conv's weights rounded) where the CPU has them, exact f32 elsewhere.
        path, tokens, _ = fixture("conv")
        bf16_path, _, _ = fixture("conv_bf16")

        def prompt(model_path, **kwargs):
            with aft.Model(model_path, **kwargs) as model, aft.Session(model) as session:
                return session.eval(tokens, logits="all")

        at_bf16 = prompt(path, matmul_precision="bf16")
        want = prompt(bf16_path) if aft.matrix_units() else prompt(path)
        np.testing.assert_array_equal(at_bf16, want)
        with aft.Model.from_bytes(Path(path).read_bytes(), matmul_precision="bf16") as model, \
                aft.Session(model) as session:
            np.testing.assert_array_equal(session.eval(tokens, logits="all"), at_bf16)
        with self.assertRaises(aft.AftError) as caught:
            aft.Model(path, matmul_precision="f16")
        self.assertEqual(caught.exception.status, aft.Status.INVALID_ARGUMENT)
        self.assertIn("'f16' is not one of 'f32', 'bf16'", caught.exception.message)

    def test_use_mmap(self):
        # False copies the f32 weights into the process's memory: the same logits.
        path, tokens, _ = fixture("local")

        def logits(**kwargs):
            with aft.Model(path, **kwargs) as model, aft.Session(model) as session:
                return session.eval(tokens, logits="all")

        np.testing.assert_array_equal(logits(use_mmap=False), logits())

    def test_bytes_that_are_not_a_model(self):
        with self.assertRaises(aft.AftError) as caught:
            aft.Model.from_bytes(b"AFTMODEL")
        self.assertEqual(caught.exception.status, aft.Status.FORMAT)
        self.assertEqual(caught.exception.message,
                         "<memory>: file is 8 bytes, too small for the 24-byte preamble")

    def test_error_text_is_the_libraries(self):
        with self.assertRaises(aft.AftError) as caught:
            aft.Model("missing.aft")
        self.assertEqual(caught.exception.message,
                         _library.library().aft_last_error().decode())
        self.assertEqual(aft.status_string(aft.Status.IO), "i/o error")
        self.assertTrue(str(caught.exception).startswith("io: "))

    def test_library_names_what_computes(self):
        self.assertIn(aft.kernel_isa(), ("avx512amx", "avx512bf16", "avx512vnni", "avx512", "avx2", "sse2",
                                          "neondot", "neon", "scalar"))
        self.assertTrue(aft.matmul_implementation().startswith("oneDNN "))
        units = aft.matrix_units()  # "" where aft takes no matrix units here
        self.assertIn(f"bf16 weights on {units}" if units else "bf16 weights widened to f32",
                      aft.matmul_implementation())

    def test_closed_model(self):
        model = aft.Model(SHIPPED_MODEL)
        model.close()
        model.close()
        for use in (lambda: model.tokenize("a"), lambda: aft.Session(model),
                    lambda: model.token_text(1)):
            with self.assertRaises(aft.AftError) as caught:
                use()
            self.assertEqual(caught.exception.status, aft.Status.INVALID_ARGUMENT)
            self.assertIn("the model is closed", caught.exception.message)

    def test_sessions_keep_the_model_alive(self):
        model = aft.Model(SHIPPED_MODEL)
        tokens = model.tokenize("The jury said")
        session = aft.Session(model)
        expected = aft.Session(model).eval(tokens)
        model.close()
        np.testing.assert_array_equal(session.eval(tokens), expected)
        fork = session.fork()
        session.close()
        self.assertEqual(fork.position, len(tokens))

    def test_library_not_found(self):
        code = "import aft; aft.Model('x.aft')"
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO_DIR / "python", capture_output=True,
                                text=True, env={**os.environ, "AFT_LIBRARY": "no/libaft.so"})
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("AftError: AFT_LIBRARY is no/libaft.so, which is not a file", result.stderr)

    def test_library_found_in_the_checkouts_build(self):
        builds = [REPO_DIR / build / "engine" / "libaft.so" for build in _library.CHECKOUT_BUILDS]
        built = [str(path) for path in builds if path.is_file()]
        if not built:
            self.skipTest("no build of this checkout")
        environment = {name: value for name, value in os.environ.items() if name != "AFT_LIBRARY"}
        environment["PYTHONPATH"] = str(REPO_DIR / "python")
        result = subprocess.run([sys.executable, "-c", "import aft; print(aft.library_path())"],
                                cwd=tempfile.gettempdir(), capture_output=True, text=True,
                                env=environment, check=True)
        self.assertEqual(result.stdout.strip(), built[0])

    def test_missing_function_is_named_when_used(self):
        library = _library.Library.__new__(_library.Library)
        library.path = "libm.so.6"
        library._dll = ctypes.CDLL("libm.so.6")
        with self.assertRaises(aft.AftError) as caught:
            library.aft_batch_decode
        self.assertEqual(str(caught.exception), "libaft at libm.so.6 has no aft_batch_decode "
                                                "(library older than this package)")


CHAR = {"type": "char", "vocab": list("abcd")}
WORLD = {"type": "world", "vocab": [None, "61", "6263", None, "ff"]}


def with_end_of_text(tokenizer: dict, value) -> bytes:
    """A model file with this tokenizer and "end_of_text": value, unchecked: written without it,
    with room in its metadata, then its header rewritten in place (the tensors stay put)."""
    data = small_model(tokenizer, metadata={"room": " " * 200})
    header = json.loads(data[24:24 + struct.unpack_from("<Q", data, 16)[0]])
    header.update(tokenizer={**tokenizer, "end_of_text": value}, metadata={})
    text = json.dumps(header, separators=(",", ":")).encode()
    start = min(entry["offset"] for entry in header["tensors"])
    assert 24 + len(text) <= start
    return (data[:16] + struct.pack("<Q", len(text)) + text + bytes(start - 24 - len(text))
            + data[start:])


class EndOfTextTest(unittest.TestCase):
    def test_the_files_or_none(self):
        cases = ((CHAR, None), ({**CHAR, "end_of_text": 3}, 3), ({"type": "byte"}, None),
                 ({"type": "byte", "end_of_text": 0}, 0),
                 (WORLD, 0), ({**WORLD, "end_of_text": 0}, 0))  # a World vocabulary's: always 0
        for tokenizer, expected in cases:
            with self.subTest(tokenizer=tokenizer), \
                    aft.Model.from_bytes(small_model(tokenizer)) as model:
                self.assertEqual(model.end_of_text, expected)
        with aft.Model(SHIPPED_MODEL) as model:
            self.assertIsNone(model.end_of_text)

    def test_refusals_are_the_engines(self):
        """aft.modelfile refuses what the engine refuses, with its message."""
        world = "expected 0 (a World vocabulary's end of text is token 0), found "
        cases = [(CHAR, value, f"expected a token id in [0, 4), found {found}")
                 for value, found in ((4, "4"), (-1, "-1"), (True, "true"), (None, "null"),
                                      (1.0, "1.0"), ("1", 'string "1"'), ([1], "an array"))]
        cases += [({"type": "byte"}, 256, "expected a token id in [0, 256), found 256"),
                  (WORLD, 1, world + "1"), (WORLD, False, world + "false"),
                  (WORLD, 0.0, world + "0.0")]
        for tokenizer, value, words in cases:
            with self.subTest(type=tokenizer["type"], end_of_text=value):
                data = with_end_of_text(tokenizer, value)
                message = f"<memory>: tokenizer.end_of_text: {words}"
                with self.assertRaises(aft.AftError) as caught:
                    aft.Model.from_bytes(data)
                self.assertEqual((caught.exception.status, caught.exception.message),
                                 (aft.Status.FORMAT, message))
                with self.assertRaises(modelfile.FormatError) as caught:
                    modelfile.decode_file(data, where="<memory>")
                self.assertEqual(str(caught.exception), message)

    def test_an_older_library_is_named(self):
        model = aft.Model.__new__(aft.Model)
        model._lib = _library.Library.__new__(_library.Library)
        model._lib.path = "libm.so.6"
        model._lib._dll = ctypes.CDLL("libm.so.6")
        with self.assertRaises(aft.AftError) as caught:
            model.end_of_text
        self.assertEqual(str(caught.exception), "libaft at libm.so.6 has no aft_model_end_of_text "
                                                "(library older than 0.5, this package's)")


class TokenizerTest(unittest.TestCase):
    def test_char_round_trip(self):
        with aft.Model(SHIPPED_MODEL) as model:
            text = "The jury said, \"It's 1961!\"\n"
            tokens = model.tokenize(text)
            self.assertEqual(len(tokens), len(text))
            self.assertEqual(model.detokenize(tokens), text)
            every = list(range(model.info.vocab_size))
            self.assertEqual(model.tokenize(model.detokenize(every)), every)
            self.assertEqual(model.tokenize(""), [])

    def test_byte_round_trip_and_partial_utf8(self):
        with aft.Model(REPO_DIR / "tests" / "fixtures" / "local.aft") as model:
            text = "héllo — 10 € 🙂"
            tokens = model.tokenize(text)
            self.assertEqual(tokens, list(text.encode()))
            self.assertEqual(model.detokenize(tokens), text)
            self.assertEqual(model.token_text(0xC3), b"\xc3")
            self.assertEqual(model.detokenize(model.tokenize("é")[:1]), "\ufffd")

    def test_char_model_multibyte_pieces(self):
        with aft.Model(REPO_DIR / "tests" / "fixtures" / "local_learned_char.aft") as model:
            pieces = [model.token_text(token) for token in range(model.info.vocab_size)]
            for piece in ("é", "—", "€"):
                self.assertIn(piece.encode(), pieces)
            tokens = model.tokenize("é€")
            self.assertEqual(len(tokens), 2)
            self.assertEqual(model.detokenize(tokens), "é€")

    def test_errors(self):
        with aft.Model(SHIPPED_MODEL) as model:
            with self.assertRaises(aft.AftError) as caught:
                model.tokenize("日")
            self.assertEqual(caught.exception.status, aft.Status.TOKENIZE)
            self.assertIn("U+65E5", caught.exception.message)
            for token in (85, -1, 2**40):
                with self.assertRaises(aft.AftError) as caught:
                    model.token_text(token)
                self.assertEqual(caught.exception.status, aft.Status.OUT_OF_RANGE)
                self.assertIn(str(token), caught.exception.message)


if __name__ == "__main__":
    unittest.main()
