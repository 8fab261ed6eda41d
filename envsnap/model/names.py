"""Distribution names as pip compares them (capture records them, analysis looks them up)."""
from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: `Foo_Bar.baz` -> `foo-bar-baz`."""
    return _SEPARATORS.sub("-", name).lower()
