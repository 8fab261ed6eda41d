"""Installed builds and files checked by size (capture/collectors/builds.py, integrity.py) on real wheels.

rowkit 1.4 is built here twice from one source (tests/helpers/ext_wheels.py): with its C extension
compiled by the system's compiler, and as the pure-Python wheel of the same version. Both are
installed by the real pip into a real venv; the default capture (no --deep) must tell the two builds
apart and find a deleted or resized compiled file, through the hash cache as well as without it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.ext_wheels import NAME, VERSION, ext_wheels, install  # noqa: F401 (fixture)

from envsnap.capture import filestat, hashcache
from envsnap.capture.collectors import builds, integrity, packages
from envsnap.model.names import is_compiled_file

SHORT_WINDOW_NS = 50_000_000  # 50 ms: files written by the test count as settled after a short sleep


def test_wheel_file_fields():
    """PEP 427's WHEEL: Tag lines (a compressed tag set expanded, PEP 425), Root-Is-Purelib, Build."""
    text = ("Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\nRoot-Is-Purelib: false\n"
            "Tag: cp311-cp311-manylinux_2_17_x86_64\nTag: cp311-cp311-manylinux2014_x86_64\nBuild: 2\n\n")
    assert builds.parse_wheel(text) == {
        "wheel_version": "1.0", "generator": "bdist_wheel (0.45.1)", "purelib": False, "build_tag": "2",
        "tags": ["cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"]}
    pure = builds.parse_wheel("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py2.py3-none-any\n")
    assert pure["tags"] == ["py2-none-any", "py3-none-any"] and pure["purelib"] is True
    assert [rel for rel in ("a/_x.cpython-311-x86_64-linux-gnu.so", "a/x.pyd", "lib/libnccl.so.2", "lib/libz.so.1.3",
                            "a/x.py", "a/so.py", "a/x.so.txt", "share/x.dylib", "bin/x.dll")
            if is_compiled_file(rel)] == ["a/_x.cpython-311-x86_64-linux-gnu.so", "a/x.pyd", "lib/libnccl.so.2",
                                            "lib/libz.so.1.3", "share/x.dylib", "bin/x.dll"]


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """A fresh venv (no pip of its own) and what packages.describe needs to describe it in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", SHORT_WINDOW_NS)
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    facts = json.loads(subprocess.run([str(python), "-c", "import json, sys, sysconfig; print(json.dumps("
                                       "[sys.path, sysconfig.get_paths()['purelib']]))"],
                                      capture_output=True, text=True, check=True).stdout)

    class Venv:
        pass

    v = Venv()
    v.python, v.path, v.site = python, [p for p in facts[0] if p], Path(facts[1])

    def describe(**kwargs):
        import time

        time.sleep(2 * SHORT_WINDOW_NS / 1e9)  # what was just written is settled (not racy)
        return packages.describe(v.path, {str(v.site)}, **kwargs)

    v.describe = describe
    return v


@pytest.mark.slow  # builds two wheels with a C compiler (~3 s, once) and installs twice
def test_two_builds_of_one_version_are_told_apart(ext_wheels, venv):  # noqa: F811
    install(ext_wheels.compiled, venv.python)
    compiled = venv.describe()["dists"][NAME]
    install(ext_wheels.pure, venv.python, reinstall=True)
    pure = venv.describe()["dists"][NAME]
    assert compiled["version"] == pure["version"] == VERSION
    plat = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    cb, pb = compiled["build"], pure["build"]
    assert cb["tags"][0].startswith(f"{plat}-{plat}-") and cb["purelib"] is False
    assert cb["compiled"] == 1 and cb["compiled_files"] == [ext_wheels.ext_rel] and len(cb["compiled_sha256"]) == 64
    assert pb["tags"] == ["py3-none-any"] and pb["purelib"] is True
    assert pb["compiled"] == 0 and "compiled_files" not in pb and "compiled_sha256" not in pb
    # What the builds installed differs (the extension, its source); the installer's own files do not count.
    assert cb["content_sha256"] != pb["content_sha256"]
    assert cb["generator"].startswith("setuptools")
    # Reinstalling the compiled wheel gives back the same record: it describes the build, not the install.
    install(ext_wheels.compiled, venv.python, reinstall=True)
    assert venv.describe()["dists"][NAME]["build"] == cb


@pytest.mark.slow  # builds two wheels with a C compiler (~3 s, once)
def test_deleted_extension_is_missing_without_deep_and_through_a_warm_cache(ext_wheels, venv):  # noqa: F811
    install(ext_wheels.compiled, venv.python)
    cold = venv.describe()
    warm = venv.describe()
    assert cold["integrity"]["missing"] == warm["integrity"]["missing"] == {}
    assert cold["integrity"]["mode"] == "py" and cold["integrity"]["size_checked"] >= 5  # the .so, .c, METADATA...
    # The warm capture's verdict vouched for the whole RECORD: nothing hashed, every file stat'ed.
    assert warm["hash_cache"]["misses"] == 0 and warm["hash_cache"]["hits"] == warm["integrity"]["checked_files"]
    assert warm["integrity"]["size_checked"] == cold["integrity"]["size_checked"]
    assert warm["dists"][NAME]["build"] == cold["dists"][NAME]["build"]  # from the verdict, WHEEL not read
    ext = venv.site / ext_wheels.ext_rel
    data = ext.read_bytes()
    ext.unlink()
    gone = venv.describe()
    assert gone["integrity"]["missing"] == {ext_wheels.ext_rel: {"dist": NAME}}
    assert venv.describe()["integrity"]["missing"] == gone["integrity"]["missing"]  # no verdict hides it later
    assert packages.describe(venv.path, {str(venv.site)}, no_cache=True)["integrity"]["missing"] == \
        gone["integrity"]["missing"]
    assert "1 missing" in packages.summarize(gone)[0]
    assert f"missing  {ext_wheels.ext_rel} ({NAME})" in packages.summarize(gone)
    # The build record is RECORD's and WHEEL's: the file gone does not change it.
    assert gone["dists"][NAME]["build"] == cold["dists"][NAME]["build"]
    ext.write_bytes(data)
    back = venv.describe()
    assert back["integrity"]["missing"] == {} and back["integrity"]["modified"] == {}


@pytest.mark.slow  # builds two wheels with a C compiler (~3 s, once)
def test_resized_compiled_file_is_modified_without_deep(ext_wheels, venv):  # noqa: F811
    install(ext_wheels.compiled, venv.python)
    venv.describe()  # a verdict for the intact install
    ext = venv.site / ext_wheels.ext_rel
    with open(ext, "ab") as handle:
        handle.write(b"\0" * 16)  # what a botched strip or a partial copy leaves
    found = venv.describe()["integrity"]["modified"]
    import hashlib

    entry = found[ext_wheels.ext_rel]
    assert entry["actual_sha256"] == hashlib.sha256(ext.read_bytes()).hexdigest()
    assert entry["actual_size"] == entry["recorded_size"] + 16 and entry["dist"] == NAME


def test_a_verdict_from_before_size_checks_is_not_trusted(tmp_path, monkeypatch):
    """A verdict an older envsnap wrote (no build, its paths the hashed files only) cannot vouch for
    a file it never stat'ed: it is not used, and the distribution is checked file by file."""
    import base64
    import hashlib
    import time

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", SHORT_WINDOW_NS)
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    lines = []
    for rel, data in (("pkg/__init__.py", b"x = 1\n"), ("pkg/_fast.so", b"\x7fELF" + b"\0" * 60)):
        (site / rel).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{rel},sha256={digest},{len(data)}")
    record = "\n".join(lines) + "\n"
    time.sleep(2 * SHORT_WINDOW_NS / 1e9)
    first = integrity.verify([("pkg", str(site), record)], use_cache=True)
    assert first["checked_files"] == 1 and first["size_checked"] == 1 and first["builds"]["pkg"]["compiled"] == 1
    # Rewrite the verdict as the older format had it.
    cache = hashcache.HashCache.open([str(site)])
    table = cache._verdict_table("py")
    (key, found), = table.items()
    old = found._replace(findings=json.dumps({"errors": {}, "named": []}), paths=[str(site / "pkg/__init__.py")],
                         stats=filestat.packed_stats([str(site / "pkg/__init__.py")]).hex())
    head = found.head.split(" ")
    table[key] = old._replace(head=" ".join(head[:3] + ["1"]))
    cache._changed.add("verdicts:py")
    cache._dirty = True
    cache.save()
    (site / "pkg/_fast.so").unlink()
    again = integrity.verify([("pkg", str(site), record)], use_cache=True)
    assert again["missing"] == {"pkg/_fast.so": {"dist": "pkg"}}
