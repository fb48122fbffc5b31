"""python/pyproject.toml, the package's metadata for pip: its version is the library's."""

from __future__ import annotations

import re
import tomllib
import unittest

from package_support import REPO_DIR


class PackagingTest(unittest.TestCase):
    def test_version_is_the_librarys(self):
        cmake = re.search(r"^project\(aft VERSION (\S+)", (REPO_DIR / "CMakeLists.txt").read_text(), re.M)
        pyproject = tomllib.loads((REPO_DIR / "python" / "pyproject.toml").read_text())
        self.assertEqual(pyproject["project"]["version"], cmake.group(1))


if __name__ == "__main__":
    unittest.main()
