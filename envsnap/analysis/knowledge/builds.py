"""What a change of an installed build means: another build of the same version, a compiled file gone.

A distribution's build (capture/collectors/builds.py) is what its WHEEL and RECORD say: the wheel's tags
(`{python}-{abi}-{platform}`, PEP 425/427) and Root-Is-Purelib, its compiled files (model/names.py) and
digests of what it installed. Two builds of one version are compared here; analysis/rank/domain.py takes
each kind's prior and component, and says what differed as evidence.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from envsnap.model.rules import CPU_HOST


class BuildChange(NamedTuple):
    kind: str
    label: str
    prior: float
    component: str  # what the change acts on; "" = the package's own rule's component
    why: str


BUILD_CHANGES: Dict[str, BuildChange] = {c.kind: c for c in [
    # PEP 399 ("Pure Python/C Accelerator Module Compatibility Requirements"): an accelerated module has a
    # pure-Python counterpart that runs where the compiled one is not there; packages follow the same
    # pattern (markupsafe 3.0.4 src/markupsafe/__init__.py, lines 7-10: `try: from ._speedups import ...` /
    # `except ImportError: from ._native import ...`; CPython 3.11 Lib/heapq.py, lines 582-585 for _heapq). The
    # pure build of a version is that fallback code alone, run by the interpreter: more host CPU work.
    BuildChange("compiled_to_pure", "compiled \u2192 pure", 0.6, CPU_HOST,
                "the compiled code is gone: the package runs its pure-Python fallback (PEP 399), in the "
                "interpreter"),
    # The same version compiled otherwise: another compiler, its flags and instruction sets, other linked
    # libraries (a manylinux wheel, PEP 600, against a local `linux_x86_64` build; the binary distribution
    # format's optional Build tag marks rebuilds of one version).
    BuildChange("other_binary", "another compiled build", 0.45, "",
                "other machine code for the same version: another compiler, flags, instruction sets or "
                "linked libraries"),
    # The other way round: compiled code replaces the Python code (usually faster; it can still behave
    # otherwise, e.g. another numeric path).
    BuildChange("pure_to_compiled", "pure \u2192 compiled", 0.25, "",
                "compiled code replaces the pure-Python code of the same version"),
    # Same tags, same compiled files, other files: a patched or rebuilt source released under the same version.
    BuildChange("other_files", "other files", 0.3, "",
                "the same version with other files (a patched or rebuilt source)"),
]}


class FileLoss(NamedTuple):
    prior: float
    component: str
    why: str


# A compiled file RECORD lists that is gone: importing the extension module raises ImportError (the import
# system finds no file to load; a shared library it links fails in dlopen the same way), so the package runs
# its pure-Python fallback where it has one (PEP 399; markupsafe 3.0.4 as above) or does not import at all.
# The fallback is Python code, run by the interpreter on the host CPU.
MISSING_COMPILED = FileLoss(0.6, CPU_HOST,
                            "a compiled file its RECORD lists is gone: importing it fails, so the package falls "
                            "back to its pure-Python code (PEP 399) or does not import")
# A compiled file replaced in place (another size or hash than RECORD's): other machine code under the same
# version, as BUILD_CHANGES["other_binary"].
REPLACED_COMPILED = FileLoss(0.45, "", "a compiled file differs from the one installed: other machine code")

# The fields of a build record that say which build it is (the generator and wheel version do not: the same
# files from another packaging tool are the same program).
IDENTITY_FIELDS = ("tags", "purelib", "build_tag", "compiled", "compiled_files", "compiled_sha256", "content_sha256")


class Found(NamedTuple):
    change: BuildChange
    text: str  # "cp311-cp311-linux_x86_64 → py3-none-any (compiled → pure)"
    evidence: List[str]  # what differs, one line each


def _names(value: Any) -> List[str]:
    """A list of names (tags, compiled files) as strings: a damaged record's null or number items are no
    names, and one that is not a list names nothing."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def build_identity(build: Any) -> Optional[Dict[str, Any]]:
    """The part of a build record that says which build it is (None: no record)."""
    if not isinstance(build, dict):
        return None
    return {k: build[k] for k in IDENTITY_FIELDS if k in build}


def is_pure(build: Dict[str, Any]) -> Optional[bool]:
    """True: no compiled file and no platform tag; False: compiled files or platform tags; None: unknown."""
    compiled = build.get("compiled")
    tags = _names(build.get("tags"))
    if (isinstance(compiled, int) and compiled > 0) or any(not t.endswith("-any") for t in tags) \
            or build.get("purelib") is False:
        return False
    return True if compiled == 0 else None


def tags_text(build: Dict[str, Any]) -> str:
    tags = _names(build.get("tags"))
    if not tags:
        return "no WHEEL tags" if build.get("wheel") is False else "untagged"
    return tags[0] + (f" (+{len(tags) - 1} tag{'s' if len(tags) > 2 else ''})" if len(tags) > 1 else "")


def build_summary(build: Any) -> str:
    """One side's build, short: 'cp311-cp311-linux_x86_64, 1 compiled file' / 'py3-none-any, pure'."""
    if not isinstance(build, dict):
        return ""
    pure = is_pure(build)
    count = build.get("compiled")
    kind = ("pure" if pure else f"{count} compiled file{'s' if count != 1 else ''}" if isinstance(count, int)
            else "compiled")
    return f"{tags_text(build)}, {kind}"


def build_change(good: Any, bad: Any) -> Optional[Found]:
    """What changed between two builds of one version, or None when they are the same build."""
    g, b = build_identity(good), build_identity(bad)
    if g is None or b is None or g == b:
        return None
    gp, bp = is_pure(g), is_pure(b)
    if gp is False and bp is True:
        kind = "compiled_to_pure"
    elif gp is True and bp is False:
        kind = "pure_to_compiled"
    elif gp is False and bp is False:
        kind = "other_binary" if (g.get("tags") != b.get("tags") or g.get("build_tag") != b.get("build_tag")
                                  or g.get("compiled_sha256") != b.get("compiled_sha256")) else "other_files"
    else:
        kind = "other_files"
    change = BUILD_CHANGES[kind]
    gt, bt = tags_text(g), tags_text(b)
    text = f"{gt} \u2192 {bt} ({change.label})" if gt != bt else f"{gt}, {change.label}"
    return Found(change, text, _differences(g, b))


def _differences(g: Dict[str, Any], b: Dict[str, Any]) -> List[str]:
    out = []
    if g.get("tags") != b.get("tags"):
        out.append(f"WHEEL Tag: {', '.join(_names(g.get('tags')) or ['none'])} \u2192 "
                   f"{', '.join(_names(b.get('tags')) or ['none'])}")
    if g.get("purelib") != b.get("purelib"):
        out.append(f"WHEEL Root-Is-Purelib: {_word(g.get('purelib'))} \u2192 {_word(b.get('purelib'))}")
    if g.get("build_tag") != b.get("build_tag"):
        out.append(f"WHEEL Build: {g.get('build_tag') or 'none'} \u2192 {b.get('build_tag') or 'none'}")
    gf, bf = _names(g.get("compiled_files")), _names(b.get("compiled_files"))
    if g.get("compiled") != b.get("compiled") or gf != bf:
        gone = [f for f in gf if f not in bf]
        new = [f for f in bf if f not in gf]
        named = "; ".join(part for part in (f"gone: {', '.join(gone[:3])}{' ...' if len(gone) > 3 else ''}" if gone else "",
                                            f"new: {', '.join(new[:3])}{' ...' if len(new) > 3 else ''}" if new else "")
                          if part)
        out.append(f"compiled files {g.get('compiled', '?')} \u2192 {b.get('compiled', '?')}"
                   + (f" ({named})" if named else ""))
    elif g.get("compiled_sha256") != b.get("compiled_sha256"):
        out.append("compiled files: the same names, other binaries (their RECORD sha256 differ)")
    if g.get("content_sha256") != b.get("content_sha256"):
        out.append("the files it installed differ (RECORD hashes)")
    return out


def _word(value: Any) -> str:
    return "unknown" if value is None else ("true" if value else "false")
