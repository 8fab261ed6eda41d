"""packages collector: distributions, origins, RECORD integrity — on a real, tampered venv."""
from __future__ import annotations

import hashlib
import os
import time

import pytest
from helpers import run_envsnap
from helpers.venv import recorded_row, sha256_hex, urlsafe_hex  # noqa: F401 (fixture)

from envsnap.capture.collectors import file_hashing, integrity, packages


def _pkgs(v):
    section = v.snapshot["sections"]["packages"]
    assert section["status"] == "ok", section
    return section["data"]


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_lists_the_venvs_distributions_only(built_venv):
    data = _pkgs(built_venv)
    assert sorted(data["dists"]) == ["tinyedit", "tinypkg"]  # not the outer env's hundreds
    assert data["count"] == 2
    assert data["python"] == str(built_venv.python)
    tiny = data["dists"]["tinypkg"]
    assert tiny["version"] == "1.0" and tiny["installer"] == "pip"
    assert tiny["location"] == str(built_venv.site)


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_edited_file_is_named_with_recorded_and_actual_hash(built_venv):
    modified = _pkgs(built_venv)["integrity"]["modified"]
    assert set(modified) == {"tinypkg/core.py"}  # untouched files are not listed
    entry = modified["tinypkg/core.py"]
    row = recorded_row(built_venv, "tinypkg-1.0.dist-info", "tinypkg/core.py")
    on_disk = built_venv.site / "tinypkg" / "core.py"
    assert entry["dist"] == "tinypkg"
    assert entry["recorded_sha256"] == urlsafe_hex(row[1])
    assert entry["actual_sha256"] == sha256_hex(on_disk)
    assert entry["recorded_size"] == int(row[2])
    assert entry["actual_size"] == on_disk.stat().st_size


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_deleted_file_is_missing(built_venv):
    checks = _pkgs(built_venv)["integrity"]
    assert checks["missing"] == {"tinypkg/gone.py": {"dist": "tinypkg"}}


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_rewritten_shebangs_are_classified_not_modified(built_venv):
    checks = _pkgs(built_venv)["integrity"]
    scripts = checks["rewritten_scripts"]
    assert set(scripts) == {"../../../bin/tiny-ep", "../../../bin/tiny-script"}
    # Relocated venv: only location + shebang can be shown.
    assert scripts["../../../bin/tiny-ep"]["verified"] is False
    assert scripts["../../../bin/tiny-ep"]["shebang"] == f"#!{built_venv.python}"
    assert scripts["../../../bin/tiny-ep"]["actual_sha256"] == sha256_hex(built_venv.bin / "tiny-ep")
    # pip#10744 state: restoring `#!python` reproduces the wheel's recorded hash.
    assert scripts["../../../bin/tiny-script"]["verified"] is True
    assert not any(key.startswith("../../../bin/") for key in checks["modified"])


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_unhashable_files_are_counted(built_venv):
    unhashable = _pkgs(built_venv)["integrity"]["unhashable"]
    # Each RECORD lists itself without a hash; pip adds the .pyc files it compiled.
    assert unhashable["by_dist"]["tinypkg"] >= 2
    assert unhashable["count"] == sum(unhashable["by_dist"].values())
    assert unhashable["files"] == {}  # nothing unexpected (no .py without a hash)


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_origins_from_direct_url(built_venv):
    dists = _pkgs(built_venv)["dists"]
    archive = dists["tinypkg"]["origin"]
    assert archive["kind"] == "archive" and archive["editable"] is False
    assert archive["url"].endswith(built_venv.wheel.name)
    assert archive["hashes"]["sha256"] == hashlib.sha256(built_venv.wheel.read_bytes()).hexdigest()
    editable = dists["tinyedit"]["origin"]
    assert editable["kind"] == "editable" and editable["editable"] is True
    assert editable["path"] == str(built_venv.edit_src)


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_summary_first_line_and_show(built_venv, tmp_path):
    lines = packages.summarize(_pkgs(built_venv))
    assert lines[0] == "2 distributions, 1 modified file (tinypkg: 1), 1 missing"
    assert any(line.startswith("modified tinypkg/core.py (tinypkg): ") for line in lines)
    snap_file = built_venv.root.parent / "snap.json"
    shown = run_envsnap("show", "-v", snap_file)
    assert shown.returncode == 0, shown.stderr
    assert "2 distributions, 1 modified file (tinypkg: 1)" in shown.stdout


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_show_verbose_prints_what_the_snapshot_holds(built_venv):
    """`show -v` of a real capture of the tampered venv: the edited file with RECORD's and the disk's hash
    and size, the values the sitecustomize/.pth set (not only their names), and no empty "0 repos:" line."""
    shown = run_envsnap("show", "-v", built_venv.root.parent / "snap.json")
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines()]
    _, recorded_hash, recorded_size = recorded_row(built_venv, "tinypkg-1.0.dist-info", "tinypkg/core.py")
    core = built_venv.site / "tinypkg" / "core.py"
    assert (f"modified tinypkg/core.py (tinypkg): RECORD sha256 {urlsafe_hex(recorded_hash)[:12]}, {recorded_size} B; "
            f"on disk {sha256_hex(core)[:12]}, {core.stat().st_size} B") in lines, shown.stdout
    assert "set during startup: NCCL_PROTO: unset \u2192 LL" in lines, shown.stdout
    assert "set during startup: CUDA_DEVICE_MAX_CONNECTIONS: unset \u2192 1" in lines, shown.stdout
    hook = built_venv.site / "sitecustomize.py"
    assert any(line.startswith(f"sitecustomize: {hook} (loaded) sha256 {sha256_hex(hook)[:12]}, "
                               f"{hook.stat().st_size} B") for line in lines), shown.stdout
    assert any(line.startswith("rewritten shebang ../../../bin/tiny-script (tinypkg): ") and
               line.endswith("restoring pip's #!python line reproduces RECORD") for line in lines), shown.stdout
    assert not [line for line in lines if line.endswith(":") or " 0 repos" in line or line.startswith("0 repos")], \
        shown.stdout
    # A reason shown as the head is not repeated as the first detail line.
    assert not any(a == b for a, b in zip(lines, lines[1:])), shown.stdout  # noqa: RUF007 (Python 3.9)
    assert sum(line.endswith("torch is not installed") for line in lines) <= 1, shown.stdout


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_site_dir_api_matches_the_cli_and_deep_checks_everything(built_venv):
    site = str(built_venv.site)
    py = packages.describe([site], {site})
    assert py["integrity"]["modified"].keys() == _pkgs(built_venv)["integrity"]["modified"].keys()
    deep = packages.describe([site], {site}, deep=True)
    assert deep["integrity"]["mode"] == "all"
    # --deep also hashes METADATA, WHEEL, entry_points.txt... not only .py and scripts.
    assert deep["integrity"]["checked_files"] > py["integrity"]["checked_files"]
    assert deep["integrity"]["modified"].keys() == py["integrity"]["modified"].keys()


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_deadline_counts_what_was_not_checked(built_venv):
    site = str(built_venv.site)
    records = [("tinypkg", site, (built_venv.site / "tinypkg-1.0.dist-info" / "RECORD").read_text())]
    parsed = integrity.parse_record("tinypkg", site, records[0][2], "py")
    expected = len(parsed["entries"]) + len(parsed["sized"])  # hashed, and checked by size
    late = integrity.verify(records, stop_at=time.monotonic() - 1.0)
    assert late["checked_files"] == 0 and late["modified"] == {}
    assert late["not_checked"]["count"] == expected > 0
    assert late["not_checked"]["by_dist"] == {"tinypkg": expected}
    assert "deadline" in late["not_checked"]["reason"]


@pytest.mark.slow  # the session venv costs ~3 s, once
def test_pool_and_serial_paths_agree(built_venv):
    """The thread pool (cold cache, large files) and the serial path give the same answer."""
    site = str(built_venv.site)
    records = [(d, site, (built_venv.site / f"{d}-{ver}.dist-info" / "RECORD").read_text())
               for d, ver in (("tinypkg", "1.0"), ("tinyedit", "0.1"))]
    serial = integrity.verify(records, mode="all", workers=1)
    old_large = file_hashing.LARGE
    file_hashing.LARGE = 0  # every file counts as large: all of them go through the pool
    try:
        pooled = integrity.verify(records, mode="all", workers=4)
    finally:
        file_hashing.LARGE = old_large
    assert pooled == serial
    assert pooled["checked_files"] > 5


def test_fifo_and_bad_hash_are_errors_not_passes(tmp_path):
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    os.mkfifo(site / "pkg" / "pipe.py")  # opening it for reading must not hang the capture
    (site / "pkg" / "ok.py").write_text("x = 1\n")
    digest = integrity.base64.urlsafe_b64encode(hashlib.sha256(b"x = 1\n").digest()).rstrip(b"=").decode()
    record = ("pkg/pipe.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
              "pkg/bad.py,sha256=not-base64!,3\n"
              f"pkg/ok.py,sha256={digest},6\n")
    result = integrity.verify([("pkg", str(site), record)])
    assert result["errors"]["pkg/pipe.py"]["error"] == "not a regular file"
    assert "unreadable hash" in result["errors"]["pkg/bad.py"]["error"]
    assert result["checked_files"] == 1 and result["modified"] == {}
