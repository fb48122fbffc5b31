#!/usr/bin/env python3
"""Writes the tokenizer test fixtures of tests/fixtures/tokenizers/, built here rather than
downloaded: gpt_neox_like.tokenizer.json, a byte-level BPE in GPT-NeoX-20B's tokenizer.json layout
(NFC, ByteLevel without a prefix space, <|endoftext|> 0 and <|padding|> 1, the byte alphabet, a
run of spaces as a normalized added token) whose merges are learned here on Debian's licence
texts, and world_vocab.txt, an RWKV World vocabulary (rwkv_vocab_v20230424.txt's format) of every
byte, frequent words, multi-byte characters and byte strings that are not UTF-8; and both as the
model file's tokenizer descriptions (*.description.json, by aft.tokenizers), which the fuzz target
fuzz_tokenizer loads.

    /usr/bin/python3 tests/make_tokenizer_fixtures.py
"""
import collections
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "fixtures" / "tokenizers"
LICENSES = pathlib.Path("/usr/share/common-licenses")
N_MERGES = 400

EXTRA = ("Café, naïve, déjà vu, Ελληνικά, русский текст, 中文字符和汉字, 日本語のテキスト, "
         "한국어 문장, emoji 😀🎉 and 1234567890 numbers. ") * 20


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of bytes to printable characters."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def training_text() -> str:
    names = ["GPL-3", "Apache-2.0", "MPL-2.0", "BSD"]
    return "\n".join((LICENSES / n).read_text(encoding="utf-8") for n in names) + EXTRA


def train_bpe(text: str, n_merges: int):
    byte_chars = bytes_to_unicode()
    # A rough GPT-2 split is enough to learn merges from.
    words = collections.Counter(re.findall(r" ?[^\W\d_]+| ?\d+| ?[^\w\s]+|\s+", text))
    corpus = {tuple(byte_chars[b] for b in w.encode()): c for w, c in words.items()}
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for symbols, count in corpus.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda item: (item[1], item[0]))[0]
        merges.append(best)
        merged = {}
        for symbols, count in corpus.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        corpus = merged
    return merges


def neox_tokenizer_json(merges) -> dict:
    vocab = {"<|endoftext|>": 0, "<|padding|>": 1}
    for ch in sorted(bytes_to_unicode().values()):
        vocab[ch] = len(vocab)
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    spaces = "    "
    added = [{"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True},
             {"id": 1, "content": "<|padding|>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True},
             {"id": len(vocab), "content": spaces, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": True, "special": False}]
    vocab[spaces] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "NFC"}, "pre_tokenizer": byte_level,
            "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                               "trim_offsets": True, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                      "merges": [f"{a} {b}" for a, b in merges]}}


def world_vocab(text: str) -> str:
    tokens = [bytes([b]) for b in range(256)]
    words = collections.Counter(re.findall(r" ?\w+|[^\w\s]{2,}|\n\n", text))
    tokens += [w.encode() for w, _ in words.most_common(300) if len(w.encode()) > 1]
    tokens += [c.encode() for c in "éèàüöñçαβγ中文字符日本語한국어😀🎉"]
    # Byte strings that are not UTF-8: a character's first bytes, a lone continuation run.
    tokens += [b"\xe4\xb8", b"\xe6\x96", b"\x80\x80", b"\xf0\x9f\x98", b"\xff\xfe"]
    lines, seen = [], set()
    for token in tokens:
        if token in seen:
            continue
        seen.add(token)
        try:
            literal = repr(token.decode("utf-8"))
        except UnicodeDecodeError:
            literal = repr(token)
        lines.append(f"{len(lines) + 1} {literal} {len(token)}")
    return "\n".join(lines) + "\n"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    text = training_text()
    merges = train_bpe(text, N_MERGES)
    (OUT / "gpt_neox_like.tokenizer.json").write_text(
        json.dumps(neox_tokenizer_json(merges), ensure_ascii=False, indent=1) + "\n",
        encoding="utf-8")
    (OUT / "world_vocab.txt").write_text(world_vocab(text), encoding="utf-8")
    sys.path.insert(0, str(HERE.parent / "python"))
    from aft import tokenizers
    for name, source in (("gpt_neox_like", "gpt_neox_like.tokenizer.json"),
                         ("world", "world_vocab.txt")):
        description = tokenizers.tokenizer_from_file(OUT / source)
        (OUT / f"{name}.description.json").write_text(
            json.dumps(description, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(merges)} merges; world vocabulary and descriptions written")


if __name__ == "__main__":
    main()
