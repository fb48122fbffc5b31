#!/usr/bin/python3
"""Converts an RWKV-4 checkpoint (BlinkDL's PyTorch state_dict or an rwkv.cpp file) into an aft
model file: the command of aft.importers.rwkv4 (python/aft/importers/rwkv4.py; --help lists its
options).

Runs from a checkout as it is: Python puts this script's directory first on its path, where the
link tools/aft -> ../python/aft makes the package importable.
"""

import sys

from aft.importers.rwkv4 import main

if __name__ == "__main__":
    sys.exit(main())
