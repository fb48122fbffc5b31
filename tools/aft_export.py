#!/usr/bin/python3
"""Writes an aft model file (docs/format.md) from random weights or from a trainer checkpoint: the
command of aft.export (python/aft/export.py; --help lists its options).

Runs from a checkout as it is: Python puts this script's directory first on its path, where the
link tools/aft -> ../python/aft makes the package importable.
"""

import sys

from aft.export import main

if __name__ == "__main__":
    sys.exit(main())
