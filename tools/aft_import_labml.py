#!/usr/bin/python3
"""Converts a checkpoint of labml.ai's annotated AFT into an aft model file: the command of
aft.importers.labml (python/aft/importers/labml.py; --help lists its options).

Runs from a checkout as it is: Python puts this script's directory first on its path, where the
link tools/aft -> ../python/aft makes the package importable.
"""

import sys

from aft.importers.labml import main

if __name__ == "__main__":
    sys.exit(main())
