#!/usr/bin/python3
"""Trains a small character-level AFT language model on a plain-text corpus: the command of
aft.train (python/aft/train.py; --help lists its options).

Runs from a checkout as it is: Python puts this script's directory first on its path, where the
link tools/aft -> ../python/aft makes the package importable.
"""

import sys

from aft.train import main

if __name__ == "__main__":
    sys.exit(main())
