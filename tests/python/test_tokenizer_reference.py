"""The BPE and World tokenizers, converted by aft.tokenizers and run by the engine
(tokenizer_probe, AFT_TOKENIZER_PROBE), against their references token for token: Hugging Face's
tokenizer (tests/node, @huggingface/tokenizers) and a greedy longest match written here. Then the
converters' refusals, and the Python validator against the engine's on tokenizer descriptions.

    AFT_TOKENIZER_PROBE=build/tests/tokenizer_probe python3 -m unittest -v test_tokenizer_reference
"""
import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import unittest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "python"))

from aft import tokenizers  # noqa: E402
from aft.modelfile import FormatError  # noqa: E402
from tokenizer_corpus import TEXTS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "tokenizers"
NEOX = FIXTURES / "gpt_neox_like.tokenizer.json"
WORLD = FIXTURES / "world_vocab.txt"
NODE_DIR = ROOT / "tests" / "node"


def probe(description: dict, texts: list[bytes] | None = None):
    """The engine on a description: "ok N" / "error ..." without texts, else {"ids", "pieces"}."""
    path = os.environ.get("AFT_TOKENIZER_PROBE")
    if not path:
        raise unittest.SkipTest("AFT_TOKENIZER_PROBE is not set (ctest sets it)")
    with tempfile.TemporaryDirectory() as tmp:
        desc_path = pathlib.Path(tmp) / "description.json"
        desc_path.write_text(json.dumps(description))
        args = [path, str(desc_path)]
        if texts is not None:
            texts_path = pathlib.Path(tmp) / "texts.json"
            texts_path.write_text(json.dumps([t.hex() for t in texts]))
            args.append(str(texts_path))
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return out.strip() if texts is None else json.loads(out)


def mismatch(texts, expected, found) -> str | None:
    for text, want, got in zip(texts, expected, found):
        if want != got:
            at = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b),
                      min(len(want), len(got))) if isinstance(got, list) else 0
            return (f"text {text[:80]!r} (length {len(text)}): first difference at token {at}: "
                    f"expected {want[at:at + 8]}, engine {got if not isinstance(got, list) else got[at:at + 8]}")
    return None


class BpeMatchesHuggingFace(unittest.TestCase):
    def test_corpus_token_for_token(self):
        node = shutil.which("node")
        if node is None:
            self.skipTest("node is not installed (tools/install-deps.sh installs nodejs)")
        if not (NODE_DIR / "node_modules" / "@huggingface" / "tokenizers").is_dir():
            self.skipTest("@huggingface/tokenizers is not installed: run `npm ci` in tests/node "
                          "(tools/install-deps.sh does)")
        description = tokenizers.tokenizer_from_file(NEOX)
        with tempfile.TemporaryDirectory() as tmp:
            texts_path = pathlib.Path(tmp) / "texts.json"
            texts_path.write_text(json.dumps(TEXTS))
            out = subprocess.run([node, str(NODE_DIR / "hf_encode.mjs"), str(NEOX),
                                  str(texts_path)], check=True, capture_output=True, text=True,
                                 cwd=NODE_DIR).stdout
        expected = json.loads(out)
        engine = probe(description, [t.encode() for t in TEXTS])
        self.assertIsNone(mismatch(TEXTS, expected, engine["ids"]))
        # Decoding: the tokens' bytes are the text, normalized.
        pieces = [bytes.fromhex(p) for p in engine["pieces"]]
        for text, ids in zip(TEXTS, engine["ids"]):
            self.assertEqual(b"".join(pieces[i] for i in ids),
                             unicodedata.normalize("NFC", text).encode(), text[:80])


def greedy_longest_match(vocab: dict[bytes, int], data: bytes) -> list[int]:
    longest = max(map(len, vocab))
    out, pos = [], 0
    while pos < len(data):
        for length in range(min(longest, len(data) - pos), 0, -1):
            token = vocab.get(data[pos:pos + length])
            if token is not None:
                out.append(token)
                pos += length
                break
        else:
            raise ValueError(f"no token at byte {pos}")
    return out


class WorldMatchesGreedyMatch(unittest.TestCase):
    def test_corpus_token_for_token(self):
        description = tokenizers.tokenizer_from_file(WORLD)
        vocab = {bytes.fromhex(h): i for i, h in enumerate(description["vocab"]) if h is not None}
        self.assertGreater(len(vocab), 500)
        texts = [t.encode() for t in TEXTS] + [b"\xff\xfe\x80\x80abc", b"\xe4\xb8", b"\xe4\xb8\xad",
                                               b"\x00\x01\x02 \xf0\x9f\x98\x80\xf0\x9f\x98"]
        engine = probe(description, texts)
        expected = [greedy_longest_match(vocab, t) for t in texts]
        self.assertIsNone(mismatch(texts, expected, engine["ids"]))
        pieces = [bytes.fromhex(p) for p in engine["pieces"]]
        self.assertEqual(pieces[0], b"")
        for text, ids in zip(texts, engine["ids"]):
            self.assertEqual(b"".join(pieces[i] for i in ids), text)

    def test_size_and_padding(self):
        description = tokenizers.tokenizer_from_file(WORLD)
        size = tokenizers.tokenizer_size(description)
        self.assertEqual(size, len(WORLD.read_text().splitlines()) + 1)
        padded = tokenizers.pad_tokenizer(description, size + 7)
        self.assertEqual(tokenizers.tokenizer_size(padded), size + 7)
        self.assertEqual(probe(padded), f"ok {size + 7}")
        with self.assertRaisesRegex(FormatError, "more than the model's"):
            tokenizers.pad_tokenizer(description, size - 1)


def neox_json() -> dict:
    return json.loads(NEOX.read_text(encoding="utf-8"))


class ConverterRefusals(unittest.TestCase):
    def convert(self, document):
        return tokenizers.bpe_from_tokenizer_json(document, "t.json")

    def refused(self, document, *words):
        with self.assertRaises(FormatError) as caught:
            self.convert(document)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_the_fixture_converts(self):
        description = self.convert(neox_json())
        self.assertEqual(description["type"], "bpe")
        self.assertEqual(description["normalizer"], "nfc")
        self.assertEqual(description["vocab"][:2], ["<|endoftext|>", "<|padding|>"])
        self.assertEqual(description["end_of_text"], 0)
        self.assertEqual(tokenizers.tokenizer_size(description), len(description["vocab"]))
        self.assertEqual(probe(description), f"ok {len(description['vocab'])}")

    def test_unsupported_features_are_named(self):
        cases = [
            (("model", "type"), "WordPiece", "model.type 'WordPiece'"),
            (("model", "unk_token"), "<unk>", "model.unk_token '<unk>'"),
            (("model", "dropout"), 0.1, "model.dropout"),
            (("model", "continuing_subword_prefix"), "##", "continuing_subword_prefix"),
            (("normalizer",), {"type": "NFKC"}, "normalizer 'NFKC'"),
            (("normalizer",), {"type": "Sequence", "normalizers": []}, "normalizer 'Sequence'"),
            (("pre_tokenizer",), {"type": "Metaspace"}, "pre_tokenizer 'Metaspace'"),
            (("pre_tokenizer", "add_prefix_space"), True, "add_prefix_space true"),
            (("pre_tokenizer", "use_regex"), False, "use_regex false"),
            (("post_processor",), {"type": "TemplateProcessing"}, "post_processor 'TemplateProcessing'"),
            (("decoder",), {"type": "WordPiece"}, "decoder 'WordPiece'"),
            (("truncation",), {"max_length": 5}, "truncation"),
        ]
        for path, value, words in cases:
            with self.subTest(path=path):
                document = neox_json()
                target = document
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = value
                self.refused(document, "t.json", words, "is not supported")

    def test_added_token_options(self):
        for key in ("lstrip", "rstrip", "single_word"):
            document = neox_json()
            document["added_tokens"][0][key] = True
            self.refused(document, f"added_tokens[0]", f"{key} true", "<|endoftext|>")

    def test_bad_vocab_and_merges(self):
        document = neox_json()
        document["model"]["vocab"]["zzq"] = 5
        self.refused(document, "id 5 is also")
        document = neox_json()
        document["model"]["merges"].append("Ġ q\u00ff")
        self.refused(document, "merges[400]", "'qÿ' is not in the vocabulary")
        document = neox_json()
        document["model"]["merges"].append(document["model"]["merges"][3])
        self.refused(document, "merges[400]: duplicate of tokenizer.merges[3]")
        document = neox_json()
        first = document["model"]["merges"][0].split(" ")
        del document["model"]["vocab"][first[0] + first[1]]
        self.refused(document, "merges[0]", "(the merge's result) is not in the vocabulary")
        document = neox_json()
        document["model"]["merges"][2] = "a b c"
        self.refused(document, "model.merges[2]: expected")
        document = neox_json()
        document["model"]["vocab"]["x"] = -1
        self.refused(document, "model.vocab['x']")

    def test_end_of_text_is_the_special_endoftext(self):
        document = neox_json()
        document["added_tokens"][0]["special"] = False
        self.assertNotIn("end_of_text", self.convert(document))
        document = neox_json()
        document["model"]["vocab"]["<|endoftext|>"] = 659
        document["model"]["vocab"]["zzq"] = 0
        document["added_tokens"][0]["id"] = 659
        self.assertEqual(self.convert(document)["end_of_text"], 659)
        document = neox_json()
        del document["added_tokens"][0]
        self.assertNotIn("end_of_text", self.convert(document))

    def test_gaps_in_ids_are_unused_tokens(self):
        document = neox_json()
        document["model"]["vocab"]["late"] = 1000
        description = self.convert(document)
        self.assertEqual(tokenizers.tokenizer_size(description), 1001)
        self.assertIsNone(description["vocab"][999])
        self.assertEqual(probe(description), "ok 1001")

    def test_merges_as_pairs(self):
        document = neox_json()
        document["model"]["merges"] = [m.split(" ") for m in document["model"]["merges"]]
        self.assertEqual(self.convert(document), self.convert(neox_json()))

    def test_content_not_extension_decides(self):
        with tempfile.TemporaryDirectory() as tmp:
            swapped_json = pathlib.Path(tmp) / "vocab.txt"
            swapped_json.write_bytes(NEOX.read_bytes())
            swapped_world = pathlib.Path(tmp) / "tokenizer.json"
            swapped_world.write_bytes(WORLD.read_bytes())
            self.assertEqual(tokenizers.tokenizer_from_file(swapped_json)["type"], "bpe")
            self.assertEqual(tokenizers.tokenizer_from_file(swapped_world)["type"], "world")
            other = pathlib.Path(tmp) / "other"
            other.write_text("hello\n")
            with self.assertRaisesRegex(FormatError, "neither a Hugging Face tokenizer.json"):
                tokenizers.tokenizer_from_file(other)

    def test_world_refusals(self):
        cases = [
            (b"1 'a' 2\n", "vocabulary:1: the token has 1 bytes, but the line says 2"),
            (b"1 'a' 1\n1 'b' 1\n", "vocabulary:2: id 1 appears twice"),
            (b"1 'a' 1\n2 'a' 1\n", "tokenizer.vocab[2]: duplicate of tokenizer.vocab[1] (61)"),
            (b"1 foo(1) 1\n", "vocabulary:1: expected `id literal length`"),
            (b"1 12 1\n", "expected a str or bytes literal, found int"),
            (b"0 'a' 1\n", "id 0 outside"),
            (b"1 '' 0\n", "the token is empty"),
            (b"1 'a'\n", "vocabulary:1: expected"),
        ]
        for data, words in cases:
            with self.subTest(data=data):
                with self.assertRaises(FormatError) as caught:
                    tokenizers.world_from_vocab(data)
                self.assertIn(words, str(caught.exception))
        description = tokenizers.world_from_vocab(b"1 'a' 1\n3 b'\\xff\\x00' 2\n2 '\\u00e9 x' 4\n")
        self.assertEqual(description, {"type": "world", "vocab": [None, "61", "c3a92078", "ff00"]})


class UnicodeMatchesPython(unittest.TestCase):
    """The engine's NFC and character classes against unicodedata (the tables' source; the
    version may differ from the Python running this: only characters of both are compared)."""

    def test_nfc_and_classes(self):
        path = os.environ.get("AFT_TOKENIZER_PROBE")
        if not path:
            raise unittest.SkipTest("AFT_TOKENIZER_PROBE is not set (ctest sets it)")
        every = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
        texts = [every]
        # Each character followed by combining marks out of order, and Hangul jamo sequences.
        marks = [0x0323, 0x0302, 0x031B, 0x0301, 0x0345, 0x0308]
        texts += [[cp] + marks for cp in range(0x20, 0x3000)]
        texts += [[0x1100 + l, 0x1161 + v, 0x11A7 + t] for l in range(0, 19, 3)
                  for v in range(0, 21, 4) for t in range(0, 28, 5)]
        with tempfile.TemporaryDirectory() as tmp:
            texts_path = pathlib.Path(tmp) / "texts.json"
            texts_path.write_text(json.dumps(texts))
            out = json.loads(subprocess.run([path, "--nfc", str(texts_path)], check=True,
                                            capture_output=True, text=True).stdout)
        for text, found in zip(texts, out["nfc"]):
            expected = [ord(c) for c in unicodedata.normalize("NFC", "".join(map(chr, text)))]
            if found != expected:
                diff = next(i for i, (a, b) in enumerate(zip(found + [-1], expected + [-1]))
                            if a != b)
                self.fail(f"NFC differs at {diff}: engine {found[diff:diff + 4]}, Python "
                          f"{expected[diff:diff + 4]}")
        white = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
        for cp, found in enumerate(out["classes"]):
            category = unicodedata.category(chr(cp))
            expected = ("L" if category[0] == "L" else "N" if category[0] == "N"
                        else "S" if cp in white else "-")
            self.assertEqual(found, expected, f"U+{cp:04X} ({category})")


class ModelFileRoundTrip(unittest.TestCase):
    """aft.modelfile writes and reads files with the converted tokenizers, and holds their size to
    config.vocab_size."""

    def test_write_and_read(self):
        import numpy as np
        from aft import modelfile
        for path in (NEOX, WORLD):
            description = tokenizers.tokenizer_from_file(path)
            size = tokenizers.tokenizer_size(description) + 3
            description = tokenizers.pad_tokenizer(description, size)
            config = {"vocab_size": size, "d_model": 8, "n_layers": 1, "d_ff": 8,
                      "activation": "gelu", "mixer": "simple", "window": 0, "n_heads": 1,
                      "full_bias": "table", "bias_rank": 0, "max_seq_len": 16,
                      "pos_encoding": "none", "embed_scale": 1.0, "tied_embeddings": True,
                      "head_bias": False, "norm_eps": 1e-5, "token_shift": False}
            config = modelfile.validate_config(config)
            tensors = [(name, np.zeros(shape, np.float32))
                       for name, shape in modelfile.expected_tensors(config)]
            with tempfile.TemporaryDirectory() as tmp:
                out = pathlib.Path(tmp) / "m.aft"
                modelfile.write_file(out, config, description, tensors)
                self.assertEqual(modelfile.read_file(out).tokenizer, description)
                with self.assertRaisesRegex(FormatError, "tokens, but config.vocab_size is"):
                    modelfile.write_file(out, {**config, "vocab_size": size + 1}, description,
                                         tensors)


def small_bpe() -> dict:
    return {"type": "bpe", "normalizer": "nfc", "pre_tokenizer": "gpt2",
            "vocab": ["<|endoftext|>", "a", "b", "ab", None, "Ġ"],
            "merges": [["a", "b"]],
            "added_tokens": [{"id": 0, "content": "<|endoftext|>", "special": True,
                              "normalized": False}]}


class DescriptionConformance(unittest.TestCase):
    """The Python validator (aft.modelfile.tokenizer_size) and the engine's accept the same
    descriptions, give the same size, and name the same entry when they refuse."""

    def cases(self):
        def edit(base, **changes):
            d = copy.deepcopy(base)
            for key, value in changes.items():
                if value is KeyError:
                    del d[key]
                else:
                    d[key] = value
            return d
        bpe, world = small_bpe(), {"type": "world", "vocab": [None, "61", "6263", None, "ff"]}
        return [
            bpe, world, tokenizers.tokenizer_from_file(NEOX), tokenizers.tokenizer_from_file(WORLD),
            edit(bpe, normalizer=None), edit(bpe, byte_fallback=True, ignore_merges=True),
            edit(bpe, normalizer="nfkc"), edit(bpe, pre_tokenizer="metaspace"),
            edit(bpe, pre_tokenizer=KeyError), edit(bpe, vocab=[]), edit(bpe, vocab="ab"),
            edit(bpe, vocab=["a", "b", "a"]), edit(bpe, vocab=["a", 3]), edit(bpe, vocab=["a", ""]),
            edit(bpe, merges=[["a", "c"]]), edit(bpe, merges=[["a", "b"], ["a", "b"]]),
            edit(bpe, merges=[["b", "a"]]), edit(bpe, merges=[["a"]]), edit(bpe, merges=KeyError),
            edit(bpe, added_tokens=[{"id": 6, "content": "x"}]),
            edit(bpe, added_tokens=[{"id": 1, "content": ""}]),
            edit(bpe, added_tokens=[{"id": 1, "content": "x"}, {"id": 1, "content": "y"}]),
            edit(bpe, added_tokens=[{"id": "1", "content": "x"}]),
            edit(bpe, added_tokens=[{"id": 1, "content": "x", "normalized": 1}]),
            edit(bpe, byte_fallback="yes"),
            edit(world, vocab=["61"]), edit(world, vocab=[None, "6"]), edit(world, vocab=[None, "zz"]),
            edit(world, vocab=[None, ""]), edit(world, vocab=[None, "61", "61"]),
            edit(world, vocab=[None, 5]), edit(world, vocab=[]), edit(world, vocab=KeyError),
            {"type": "sentencepiece"},
        ] + self.end_of_text_cases()

    def end_of_text_cases(self):
        """Every kind with an end of text accepted and refused; refused vocabularies first."""
        char = {"type": "char", "vocab": ["a", "b", "c"]}
        bpe, world = small_bpe(), {"type": "world", "vocab": [None, "61", "6263", None, "ff"]}
        cases = [{**char, "end_of_text": 2}, {"type": "byte", "end_of_text": 255},
                 {"type": "byte", "end_of_text": 0}, {**bpe, "end_of_text": 0},
                 {**bpe, "end_of_text": 4}, {**world, "end_of_text": 0}]
        for base, size in ((char, 3), ({"type": "byte"}, 256), (bpe, 6)):
            cases += [{**base, "end_of_text": value} for value in
                      (size, -1, 2**63, 2**64 - 1, True, None, 1.0, 0.5, "0", [0], {"id": 0})]
        cases += [{**world, "end_of_text": value}
                  for value in (1, 4, -1, False, None, 0.0, "0", [0])]
        cases += [{**char, "vocab": ["a", "a"], "end_of_text": 5},
                  {**bpe, "merges": [["a", "c"]], "end_of_text": "x"},
                  {**world, "vocab": [None, "zz"], "end_of_text": 1}]
        return cases

    def test_same_verdicts(self):
        for description in self.cases():
            with self.subTest(description=json.dumps(description)[:120]):
                engine = probe(description)
                try:
                    size = tokenizers.tokenizer_size(description)
                except FormatError as e:
                    self.assertTrue(engine.startswith("error "), f"engine accepts: {engine}; "
                                                                f"Python: {e}")
                    # The same key or entry: what follows "tokenizer" up to the first ": ".
                    python_where = str(e).split(": ")[0].removeprefix("tokenizer")
                    engine_where = engine.split("probe: tokenizer", 1)[1].split(": ")[0]
                    self.assertEqual(python_where, engine_where, f"{e} / {engine}")
                    continue
                self.assertEqual(engine, f"ok {size}")

    def test_end_of_text_same_messages(self):
        """Its refusals word for word (the other messages show values as Python writes them)."""
        for description in self.end_of_text_cases():
            with self.subTest(description=json.dumps(description)[:120]):
                try:
                    tokenizers.tokenizer_size(description)
                except FormatError as e:
                    if str(e).startswith("tokenizer.end_of_text: "):
                        self.assertEqual(probe(description), f"error probe: {e}")


if __name__ == "__main__":
    unittest.main()
