"""Names as tools compare them (capture records them, analysis looks them up): distribution names as pip
normalises them, and installed file names that say the file is compiled code."""
from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: `Foo_Bar.baz` -> `foo-bar-baz`."""
    return _SEPARATORS.sub("-", name).lower()


# Extension modules and shared libraries (importlib.machinery.EXTENSION_SUFFIXES end in .so on POSIX and .pyd
# on Windows, PEP 3149; macOS frameworks ship .dylib, Windows wheels .dll); a library with an soname version:
# libnccl.so.2, libz.so.1.3.
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
_VERSIONED_LIBRARY = re.compile(r"\.so(\.\d+)+$")


def is_compiled_file(path: str) -> bool:
    """Whether an installed file's name says it is compiled code the dynamic loader maps."""
    return path.endswith(COMPILED_SUFFIXES) or (".so." in path and _VERSIONED_LIBRARY.search(path) is not None)
