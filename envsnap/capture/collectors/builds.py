"""Which build of a distribution is installed: its wheel's tags and the compiled files it holds.

Two installs of one version can be different programs: a wheel compiled for this platform
(`cp311-cp311-manylinux_2_17_x86_64`, with `_speedups.cpython-311-x86_64-linux-gnu.so`) and the
pure-Python wheel of the same release (`py3-none-any`, the slow fallback code only), or two
compiled wheels built with other compilers, flags or libraries. The version says nothing of it;
what the installer left in the `.dist-info` directory does:

- `WHEEL` (the binary distribution format, PEP 427; packaging.python.org "Binary distribution
  format", section "The .dist-info directory": `Wheel-Version`, `Generator`, `Root-Is-Purelib`
  ("true" when the top level of the wheel belongs in purelib, i.e. no platform-specific files),
  one `Tag: {python tag}-{abi tag}-{platform tag}` line per tag the wheel supports, the optional
  `Build` number); installers copy it as is;
- `RECORD` (same spec, "The .dist-info directory"): every installed file with the sha256 of its
  content. The compiled files (extension modules and shared libraries: `.so`, `.pyd`, `.dylib`,
  `.dll`, versioned `.so.N`: model/names.py) are counted and named, and two digests summarise what was
  installed: `compiled_sha256` over the compiled files' paths and recorded hashes (another
  binary of the same version changes it), `content_sha256` over the package's own files (a
  rebuild with other sources changes it). Files whose recorded hash depends on the install rather
  than the build are left out of the latter: the `.dist-info` directory itself (INSTALLER,
  direct_url.json, RECORD), files outside the installation directory (console scripts, whose
  shebang the installer writes, and data files) and `.pth` files (an editable install writes its
  source path there).

The record is built where RECORD is parsed (integrity.py) and kept with the hash cache's verdict
for that RECORD, so a warm capture neither reads WHEEL nor parses RECORD again.
"""
from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterable, List, Optional, Tuple

# Compiled files named in the snapshot per distribution (mypyc-built wheels ship hundreds; the count
# and the digest cover them all).
MAX_NAMED = 32


def parse_wheel(text: str) -> Dict[str, Any]:
    """The fields of a WHEEL file that say which build it is: its tags (in file order, expanded from
    compressed tag sets such as `py2.py3-none-any`), Root-Is-Purelib, the optional Build number and
    the Generator. Header lines are `Name: value` (the spec's email-header format); others are skipped."""
    tags: List[str] = []
    out: Dict[str, Any] = {}
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if not colon:
            continue
        name, value = name.strip().lower(), value.strip()
        if name == "tag" and value:
            tags.extend(expand_tag(value))
        elif name == "root-is-purelib":
            out["purelib"] = value.lower() == "true"
        elif name == "build" and value:
            out["build_tag"] = value
        elif name == "generator" and value:
            out["generator"] = value[:80]
        elif name == "wheel-version" and value:
            out["wheel_version"] = value[:16]
    out["tags"] = list(dict.fromkeys(tags))
    return out


def expand_tag(tag: str) -> List[str]:
    """`py2.py3-none-any` -> ['py2-none-any', 'py3-none-any'] (compressed tag sets, PEP 425)."""
    parts = tag.split("-")
    if len(parts) != 3:
        return [tag]
    return [f"{p}-{a}-{plat}" for p in parts[0].split(".") for a in parts[1].split(".") for plat in parts[2].split(".")]


def build_record(wheel: Optional[Dict[str, Any]], compiled: Iterable[Tuple[str, str]],
                 content: Iterable[Tuple[str, str]]) -> Dict[str, Any]:
    """A distribution's build: `wheel` (parse_wheel's fields, None without a WHEEL file), its compiled
    files and its own files as (RECORD path, recorded hash) pairs."""
    record: Dict[str, Any] = dict(wheel) if wheel else {}
    if wheel is None:
        record["wheel"] = False  # no WHEEL: not installed from a wheel (egg-info, conda, a distro)
    binaries = sorted(set(compiled))
    record["compiled"] = len(binaries)
    if binaries:
        record["compiled_files"] = [rel for rel, _ in binaries[:MAX_NAMED]]
        record["compiled_sha256"] = _digest(binaries)
    files = sorted(set(content))
    if files:
        record["content_sha256"] = _digest(files)
    return record


def _digest(pairs: List[Tuple[str, str]]) -> str:
    text = "".join(f"{rel}\0{value}\n" for rel, value in pairs)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()

