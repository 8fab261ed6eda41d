"""The trusted hash cache (envsnap/capture/hashcache.py) on real files: it never hides an edit.

Files are real, in tmp_path, with a real RECORD; edits are made the way people make them
(rewrites that keep the size, `touch -r` / os.utime putting the mtime back). Most tests
shorten the racy window so files the test just wrote count as settled after a short sleep;
the racy rule itself is tested with the real window.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envsnap.capture import cachefile, filestat, hashcache
from envsnap.capture.collectors import integrity

SHORT_WINDOW_NS = 50_000_000  # 50 ms


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class Site:
    """A site directory with one distribution whose RECORD hashes its files as installed."""

    def __init__(self, root: Path, count: int = 20):
        self.root = root
        self.pkg = root / "pkg"
        self.pkg.mkdir(parents=True)
        lines = []
        for i in range(count):
            data = f"VALUE_{i:03d} = {i}\n".encode()
            (self.pkg / f"m{i:03d}.py").write_bytes(data)
            lines.append(f"pkg/m{i:03d}.py,sha256={_digest(data)},{len(data)}")
        lines.append("pkg-1.0.dist-info/RECORD,,")
        self.record = "\n".join(lines) + "\n"
        self.count = count

    def verify(self, use_cache=True, mode="py"):
        return integrity.verify([("pkg", str(self.root), self.record)], mode=mode, use_cache=use_cache)

    def settle(self) -> None:
        """Wait until every file is older than the (shortened) racy window."""
        time.sleep(2 * SHORT_WINDOW_NS / 1e9)


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


@pytest.fixture
def site(tmp_path, cache_home, monkeypatch):
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", SHORT_WINDOW_NS)
    s = Site(tmp_path / "site")
    s.settle()
    return s


def _without_bookkeeping(result):
    return {k: v for k, v in result.items() if k != "hash_cache"}


def _cache_file(cache_home: Path) -> Path:
    files = list((cache_home / "envsnap").glob("hashes-*.cache"))
    assert len(files) == 1, files
    return files[0]


def _rewrite_keeping_size_and_mtime(path: Path, data: bytes) -> None:
    before = path.stat()
    assert len(data) == before.st_size
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size


def test_second_verify_takes_every_hash_from_the_cache_and_reports_the_same(site, cache_home):
    cold = site.verify()
    assert cold["hash_cache"]["hits"] == 0 and cold["hash_cache"]["misses"] == site.count
    assert "first capture" in cold["hash_cache"]["note"]
    warm = site.verify()
    assert warm["hash_cache"] == {"used": True, "hits": site.count, "misses": 0,
                                  "path": str(_cache_file(cache_home))}
    uncached = site.verify(use_cache=False)
    assert uncached["hash_cache"]["used"] is False and uncached["hash_cache"]["misses"] == site.count
    assert _without_bookkeeping(cold) == _without_bookkeeping(warm) == _without_bookkeeping(uncached)
    assert cold["checked_files"] == site.count and cold["modified"] == {}


def test_edit_with_size_and_mtime_put_back_by_utime_is_caught(site):
    site.verify()
    target = site.pkg / "m007.py"
    _rewrite_keeping_size_and_mtime(target, b"VALUE_007 = 9\n")  # same length, new content
    warm = site.verify()
    assert set(warm["modified"]) == {"pkg/m007.py"}
    assert warm["modified"]["pkg/m007.py"]["actual_sha256"] == hashlib.sha256(b"VALUE_007 = 9\n").hexdigest()
    assert warm["hash_cache"]["hits"] == site.count - 1 and warm["hash_cache"]["misses"] == 1


@pytest.mark.skipif(shutil.which("touch") is None, reason="needs touch(1)")
def test_edit_with_mtime_put_back_by_touch_r_is_caught(site, tmp_path):
    site.verify()
    target = site.pkg / "m003.py"
    reference = tmp_path / "reference"
    reference.write_bytes(b"")
    subprocess.run(["touch", "-r", str(target), str(reference)], check=True)
    target.write_bytes(b"VALUE_003 = 7\n")
    subprocess.run(["touch", "-r", str(reference), str(target)], check=True)
    assert target.stat().st_mtime_ns == reference.stat().st_mtime_ns
    assert set(site.verify()["modified"]) == {"pkg/m003.py"}


def test_a_file_replaced_by_another_inode_is_caught(site):
    site.verify()
    target = site.pkg / "m001.py"
    before = target.stat()
    replacement = site.pkg / "m001.py.new"
    replacement.write_bytes(b"VALUE_001 = 5\n")
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, target)  # what an installer or an editor's atomic save does
    assert set(site.verify()["modified"]) == {"pkg/m001.py"}


def test_deleted_and_restored_files_are_never_served_from_the_cache(site):
    site.verify()
    target = site.pkg / "m010.py"
    data = target.read_bytes()
    target.unlink()
    gone = site.verify()
    assert set(gone["missing"]) == {"pkg/m010.py"}
    target.write_bytes(data)
    site.settle()
    back = site.verify()
    assert back["missing"] == {} and back["modified"] == {}


def test_racy_entries_are_not_trusted_with_the_real_window(tmp_path, cache_home):
    """git's racy rule: a file whose mtime/ctime is within the window of the moment its
    stat was taken is hashed again next time; an edit within the same timestamp granule
    (same size, mtime put back, ctime unchanged on a coarse clock) cannot hide."""
    assert filestat.RACY_WINDOW_NS >= 1_000_000_000
    site = Site(tmp_path / "site", count=5)  # just written: every file is racy
    first = site.verify()
    assert first["hash_cache"]["racy"] == site.count and first["hash_cache"]["hits"] == 0
    for attempt in range(20):
        target = site.pkg / "m002.py"
        new = f"VALUE_002 = {attempt % 10}\n".encode()
        _rewrite_keeping_size_and_mtime(target, new)  # right after the previous stat: same granule
        result = site.verify()
        recorded = b"VALUE_002 = 2\n"
        if new == recorded:
            assert result["modified"] == {}
        else:
            assert result["modified"]["pkg/m002.py"]["actual_sha256"] == hashlib.sha256(new).hexdigest()
        assert result["hash_cache"]["hits"] == 0  # nothing settled long enough to be trusted


def test_record_refuses_a_stat_within_the_window_of_its_recording(tmp_path, cache_home):
    """The rule at its root: the stat of a file changed just now is never recorded, because a
    later edit in the same timestamp granule could leave exactly the same stat behind."""
    path = tmp_path / "f.py"
    path.write_bytes(b"x = 1\n")
    cache = hashcache.HashCache.open([str(tmp_path)])
    st = os.stat(path)
    assert cache.record(str(path), st, {"sha256": hashlib.sha256(b"x = 1\n").digest()}) is False
    assert cache.racy == 1 and str(path) not in cache._fresh
    # The same file as it would look after the window: recorded.
    old = os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
                          0, 0, 0, 0, 0, 0, 0, 0, 0))
    assert cache.record(str(path), old, {"sha256": hashlib.sha256(b"x = 1\n").digest()}) is True


def test_record_many_keeps_exactly_what_record_keeps_one_by_one(tmp_path, cache_home):
    """The bulk recorder (a first capture's every hashed file) applies record()'s rules to each
    entry: racy ones left out and counted, several digests, a path with a newline (not storable)
    and a stat out of the stored range (one by one) mixed with the common single-digest entries."""
    def stat_of(ino, mtime_ns, ctime_ns=None, size=10):
        return os.stat_result((0o100644, ino, 1, 1, 0, 0, size, 0, 0, 0, 0, 0, 0,
                               mtime_ns, ctime_ns if ctime_ns is not None else mtime_ns, 0))

    old, now = 1_000_000_000, time.time_ns()
    one = {"sha256": hashlib.sha256(b"a").digest()}
    two = {"sha256": hashlib.sha256(b"b").digest(), "sha512": hashlib.sha512(b"b").digest()}
    items = [(f"/p/m{i}.py", stat_of(100 + i, old + i), one) for i in range(50)]
    items += [("/p/racy.py", stat_of(7, now), one), ("/p/racy-ctime.py", stat_of(8, old, now), one),
              ("/p/two.py", stat_of(9, old), two), ("/p/new\nline.py", stat_of(10, old), one),
              ("/p/huge.py", stat_of(2 ** 64, old), one), ("/p/last.py", stat_of(11, old), one)]
    bulk, single = _recorded_in_bulk_and_one_by_one(tmp_path, items)
    assert bulk._fresh == single._fresh and bulk.racy == single.racy == 2
    assert len(bulk._fresh) == 52 and bulk.pending == []
    assert bulk._fresh["/p/m3.py"] == (filestat.packed_stat(items[3][1]), "sha256:" + one["sha256"].hex())


def _recorded_in_bulk_and_one_by_one(tmp_path, items):
    """Two caches given the same entries: one by record_many, one by record() each."""
    bulk = hashcache.HashCache.open([str(tmp_path)])
    single = hashcache.HashCache.open([str(tmp_path)])
    bulk.pending = list(items)
    bulk.record_many()
    for path, st, digests in items:
        single.record(path, st, digests)
    return bulk, single


def test_record_many_of_only_common_entries_is_record_one_by_one(tmp_path, cache_home):
    """A first capture's usual batch (nothing racy, one digest each, no newline in a path) is
    recorded without looking at the entries one by one: the same entries as record() keeps, with
    several algorithms across the batch; one racy entry sends the whole batch the careful way."""
    def stat_of(ino, mtime_ns):
        return os.stat_result((0o100644, ino, 1, 1, 0, 0, 10 + ino, 0, 0, 0, 0, 0, 0, mtime_ns, mtime_ns + 1, 0))

    old = 1_000_000_000
    items = [(f"/p/m{i}.py", stat_of(100 + i, old + i),
              {"sha256" if i % 3 else "sha384": (hashlib.sha256 if i % 3 else hashlib.sha384)(b"%d" % i).digest()})
             for i in range(40)]
    for batch in (items, items + [("/p/racy.py", stat_of(7, time.time_ns()), items[0][2])]):
        bulk, single = _recorded_in_bulk_and_one_by_one(tmp_path, batch)
        assert bulk._fresh == single._fresh and len(bulk._fresh) == 40 and bulk.racy == single.racy
    assert bulk._fresh["/p/m3.py"] == (filestat.packed_stat(items[3][1]), "sha384:" + items[3][2]["sha384"].hex())


@pytest.mark.parametrize("damage", ["flip a payload byte", "flip a header byte", "truncate", "empty",
                                    "wrong version", "foreign uid in header", "another host",
                                    "writable by others", "garbage", "count mismatch", "symlink"])
def test_damaged_or_foreign_cache_is_ignored_with_a_note_then_replaced(site, cache_home, tmp_path, damage):
    site.verify()
    path = _cache_file(cache_home)
    # Make the cache lie about one file: if it were trusted, this edit would be hidden.
    target = site.pkg / "m005.py"
    _rewrite_keeping_size_and_mtime(target, b"VALUE_005 = 0\n")
    stale_key = filestat.stat_key(target.stat())
    text = path.read_bytes()
    header, payload = text.split(b"\n", 1)
    lines = payload.decode().split("\n")
    index = lines.index(str(target))
    old_digest = hashlib.sha256(b"VALUE_005 = 5\n").hexdigest()
    lines[index + 1] = f"{stale_key}sha256:{old_digest}"
    payload = "\n".join(lines).encode()
    meta = json.loads(header)
    meta["sha256"] = hashlib.sha256(payload).hexdigest()
    expected_note = {
        "flip a payload byte": "checksum", "flip a header byte": "header", "truncate": "checksum",
        "empty": "no header", "wrong version": "format version", "foreign uid in header": "written by uid",
        "another host": "another host", "writable by others": "writable by others", "garbage": "no header",
        "count mismatch": "count mismatch", "symlink": "symlink",
    }[damage]
    if damage == "wrong version":
        meta["version"] = 99
    elif damage == "foreign uid in header":
        meta["uid"] = os.geteuid() + 1
    elif damage == "another host":
        meta["host"] = "some-other-node"
    elif damage == "count mismatch":
        meta["entries"] += 1
    data = json.dumps(meta).encode() + b"\n" + payload
    if damage == "flip a payload byte":
        data = data[:-40] + bytes([data[-40] ^ 0x01]) + data[-39:]
    elif damage == "flip a header byte":
        data = b"[" + data[1:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    elif damage == "garbage":
        data = os.urandom(4096).replace(b"\n", b" ")
    path.write_bytes(data)
    os.chmod(path, 0o600)
    if damage == "writable by others":
        os.chmod(path, 0o666)
    if damage == "symlink":
        planted = tmp_path / "planted.cache"
        planted.write_bytes(data)
        path.unlink()
        path.symlink_to(planted)
    result = site.verify()
    assert set(result["modified"]) == {"pkg/m005.py"}, damage
    assert result["hash_cache"]["hits"] == 0 and result["hash_cache"]["used"] is False
    assert "cache ignored" in result["hash_cache"]["note"] and expected_note in result["hash_cache"]["note"]
    # The next capture finds a sound cache again (written by this one) and still sees the edit.
    site.settle()
    again = site.verify()
    assert set(again["modified"]) == {"pkg/m005.py"}
    assert "note" not in again["hash_cache"] and again["hash_cache"]["hits"] >= site.count - 1
    assert not path.is_symlink() and (path.stat().st_mode & 0o077) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_cache_file_owned_by_another_user_is_ignored(site, cache_home):
    site.verify()
    path = _cache_file(cache_home)
    os.chown(path, 65534, 65534)
    result = site.verify()
    assert result["hash_cache"]["hits"] == 0 and "owned by uid 65534" in result["hash_cache"]["note"]
    assert result["checked_files"] == site.count


def test_random_damage_never_crashes_nor_changes_the_report(site, cache_home):
    import random

    site.verify()
    path = _cache_file(cache_home)
    good = path.read_bytes()
    expected = _without_bookkeeping(site.verify(use_cache=False))
    rnd = random.Random(16)
    for _ in range(40):
        data = bytearray(good)
        for _ in range(rnd.randint(1, 4)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        path.write_bytes(bytes(data[: rnd.randint(0, len(data))] if rnd.random() < 0.3 else data))
        result = site.verify()
        assert _without_bookkeeping(result) == expected


def test_no_cache_hashes_everything_and_leaves_the_cache_untouched(site, cache_home):
    site.verify()
    path = _cache_file(cache_home)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    target = site.pkg / "m000.py"
    _rewrite_keeping_size_and_mtime(target, b"VALUE_000 = 1\n")
    result = site.verify(use_cache=False)
    assert result["hash_cache"] == hashcache.disabled_summary(site.count)
    assert set(result["modified"]) == {"pkg/m000.py"}
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_deep_and_default_captures_share_one_cache_without_losing_each_others_entries(site, cache_home):
    blob = b"\x00" * 100
    (site.pkg / "data.bin").write_bytes(blob)
    site.record += f"pkg/data.bin,sha256={_digest(blob)},100\n"
    site.settle()
    site.verify(mode="all")
    site.verify(mode="py")  # looks at the .py files only: must keep data.bin's entry
    deep = site.verify(mode="all")
    assert deep["hash_cache"]["hits"] == site.count + 1 and deep["hash_cache"]["misses"] == 0


def test_an_edit_seen_only_by_a_deep_capture_is_not_hidden_from_the_next_default_one(site):
    """A default capture's whole-RECORD verdict is kept while --deep captures run (they check
    another set of files): it must still not vouch for a file edited in between."""
    site.verify(mode="py")
    site.verify(mode="py")  # the verdict ("every file as recorded") is in the cache now
    target = site.pkg / "m004.py"
    _rewrite_keeping_size_and_mtime(target, b"VALUE_004 = 0\n")
    assert set(site.verify(mode="all")["modified"]) == {"pkg/m004.py"}
    site.settle()
    assert set(site.verify(mode="all")["modified"]) == {"pkg/m004.py"}  # the deep one's cache hit
    after = site.verify(mode="py")
    assert set(after["modified"]) == {"pkg/m004.py"}
    assert after["hash_cache"]["hits"] == site.count  # from the file entries, the verdict was refused


def test_a_changed_record_with_unchanged_files_is_checked_again(site):
    site.verify()
    warm = site.verify()
    assert warm["modified"] == {} and warm["hash_cache"]["hits"] == site.count
    # The installer rewrote RECORD (a reinstall of another build): same files, other hash.
    data = (site.pkg / "m009.py").read_bytes()
    site.record = site.record.replace(_digest(data), _digest(b"something else\n"))
    result = site.verify()
    assert set(result["modified"]) == {"pkg/m009.py"}
    assert result["modified"]["pkg/m009.py"]["actual_sha256"] == hashlib.sha256(data).hexdigest()


def test_what_a_record_says_by_itself_is_reported_the_same_from_the_cache(site):
    """Unreadable hash lines and files listed without a hash come from RECORD, not the files:
    a capture whose files all come from the cache still reports them, identically."""
    site.record += "pkg/nohash.py,,\npkg/m000.pyc,,\npkg/broken.py,sha256=not-base64!,3\n"
    cold = site.verify()
    site.verify()
    warm = site.verify()
    assert warm["hash_cache"]["hits"] == site.count and warm["hash_cache"]["misses"] == 0
    assert _without_bookkeeping(warm) == _without_bookkeeping(cold) == _without_bookkeeping(site.verify(False))
    assert set(warm["unhashable"]["files"]) == {"pkg/nohash.py"} and warm["unhashable"]["count"] == 3
    assert "unreadable hash" in warm["errors"]["pkg/broken.py"]["error"]


def test_an_unusable_cache_directory_costs_a_note_not_the_capture(site, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the cache dir would have to be inside a file
    result = site.verify()
    assert result["checked_files"] == site.count and result["modified"] == {}
    assert "cache not updated" in result["hash_cache"]["note"]


def test_a_relative_xdg_cache_home_is_ignored_as_the_spec_says(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cachefile.cache_dir() == str(tmp_path / ".cache" / "envsnap")


def test_no_cache_write_once_the_capture_deadline_has_passed(site, cache_home):
    late = integrity.verify([("pkg", str(site.root), site.record)], use_cache=True, stop_at=time.monotonic() - 1)
    assert late["not_checked"]["count"] == site.count and late["hash_cache"]["misses"] == 0
    cache = hashcache.HashCache.open([str(site.root)])
    target = str(site.pkg / "m000.py")
    assert cache.record(target, os.stat(target), {"sha256": hashlib.sha256(b"VALUE_000 = 0\n").digest()})
    cache.save(stop_at=time.monotonic() - 1.0)  # something to write, but the capture must finish first
    assert "deadline" in cache.summary()["note"]
    assert not (cache_home / "envsnap").exists()


def test_cache_directory_is_bounded(tmp_path, cache_home, monkeypatch):
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", SHORT_WINDOW_NS)
    monkeypatch.setattr(cachefile, "MAX_FILES", 3)
    sites = [Site(tmp_path / f"site{i}", count=2) for i in range(5)]
    time.sleep(0.1)
    for s in sites:
        s.verify()
        time.sleep(0.01)  # distinct mtimes: the eviction order is by last use
    names = sorted((cache_home / "envsnap").glob("hashes-*.cache"))
    assert len(names) == 3
    assert sites[-1].verify()["hash_cache"]["hits"] == 2  # the most recent one was kept


def test_entries_are_bounded(site, cache_home, monkeypatch):
    monkeypatch.setattr(hashcache, "MAX_ENTRIES", 5)
    site.verify()
    assert json.loads(_cache_file(cache_home).read_bytes().split(b"\n", 1)[0])["entries"] == 5
    assert site.verify()["hash_cache"]["hits"] == 5


_CONCURRENT = r"""
import json, sys
from envsnap.capture import filestat
from envsnap.capture.collectors import integrity
filestat.RACY_WINDOW_NS = int(sys.argv[3])
record = open(sys.argv[2]).read()
out = []
for _ in range(int(sys.argv[4])):
    result = integrity.verify([("pkg", sys.argv[1], record)], use_cache=True)
    out.append({"modified": sorted(result["modified"]), "checked": result["checked_files"],
                "hits": result["hash_cache"]["hits"], "note": result["hash_cache"].get("note")})
print(json.dumps(out))
"""


def test_concurrent_captures_sharing_the_cache_stay_correct(site, cache_home, tmp_path):
    record_file = tmp_path / "RECORD"
    record_file.write_text(site.record)
    target = site.pkg / "m011.py"
    _rewrite_keeping_size_and_mtime(target, b"VALUE_011 = 00\n")
    site.settle()

    def run_many(n_procs, rounds):
        procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(site.root), str(record_file),
                                   str(SHORT_WINDOW_NS), str(rounds)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(n_procs)]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.extend(json.loads(out))
        return results

    for result in run_many(4, 5):
        assert result["modified"] == ["pkg/m011.py"] and result["checked"] == site.count
        assert "cache ignored" not in (result["note"] or "")  # never a torn read
    # Another edit; every concurrent capture after it sees it.
    target2 = site.pkg / "m012.py"
    _rewrite_keeping_size_and_mtime(target2, b"VALUE_012 = 00\n")
    for result in run_many(4, 5):
        assert result["modified"] == ["pkg/m011.py", "pkg/m012.py"]
    assert cachefile.read_cache_file(str(_cache_file(cache_home)))  # a whole, sound file remains


# --- the packages section of real captures, on real venvs ---------------------------------------

def _wait_until_settled(root: Path) -> None:
    """Sleep until every file under root is older than the real racy window (at most ~3 s)."""
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in root.rglob("*") if p.is_file())
    wait = (newest + filestat.RACY_WINDOW_NS + 100_000_000 - time.time_ns()) / 1e9
    if wait > 0:
        time.sleep(wait)


def _capture_packages(python: Path, out: Path, cache_home: Path, *extra):
    from helpers import run_envsnap

    proc = run_envsnap("capture", "-o", out, "--force", "--timeout", "60", *extra,
                       env={"ENVSNAP_PYTHON": str(python), "XDG_CACHE_HOME": str(cache_home)}, cwd=str(out.parent))
    assert proc.returncode == 0, proc.stderr
    section = json.loads(out.read_text())["sections"]["packages"]
    assert section["status"] == "ok", section
    return section


@pytest.mark.slow  # the session venv (~3 s, shared) plus up to 3 s for its files to settle
def test_cold_warm_and_no_cache_captures_report_the_same_packages(built_venv, tmp_path):
    _wait_until_settled(built_venv.root)
    home = tmp_path / "xdg"
    cold = _capture_packages(built_venv.python, tmp_path / "cold.json", home)
    warm = _capture_packages(built_venv.python, tmp_path / "warm.json", home)
    bypass = _capture_packages(built_venv.python, tmp_path / "nocache.json", home, "--no-cache")
    checked = cold["data"]["integrity"]["checked_files"]
    missing = len(cold["data"]["integrity"]["missing"])  # looked for, not found: a miss every time
    assert cold["data"]["hash_cache"]["hits"] == 0 and cold["data"]["hash_cache"]["misses"] == checked + missing
    assert warm["data"]["hash_cache"]["hits"] == checked and warm["data"]["hash_cache"]["misses"] == missing
    assert warm["data"]["hash_cache"]["used"] is True
    assert bypass["data"]["hash_cache"]["used"] is False and bypass["data"]["hash_cache"]["path"] is None
    sections = []
    for section in (cold, warm, bypass):
        data = dict(section["data"])
        data.pop("hash_cache")
        sections.append(data)
    assert sections[0] == sections[1] == sections[2]
    assert set(sections[1]["integrity"]["modified"]) == {"tinypkg/core.py"}  # the venv's edited file
    from envsnap.capture.collectors import packages

    read = f"{missing} file{'s' if missing != 1 else ''}"  # "1 file", not "1 files"
    assert f"hash cache: {checked} hashes reused, {read} read and hashed" in packages.summarize(warm["data"])
    # A diff of the two captures does not report the cache's bookkeeping as a difference.
    from envsnap.analysis import result as result_mod

    good, bad = (json.loads((tmp_path / n).read_text()) for n in ("cold.json", "nocache.json"))
    keys = [d["key"] for d in result_mod.analyze(good, bad, include_volatile=False)["differences"]]
    assert not any("hash_cache" in k for k in keys), keys


@pytest.mark.slow  # builds its own venv (~3 s): the session one must stay as it is
def test_edit_to_an_installed_file_after_a_warm_capture_is_reported(tmp_path):
    from helpers.venv import build

    venv = build(tmp_path / "own")
    _wait_until_settled(venv.root)
    home = tmp_path / "xdg"
    _capture_packages(venv.python, tmp_path / "a.json", home)
    _capture_packages(venv.python, tmp_path / "b.json", home)  # warm now
    target = venv.site / "tinypkg" / "__init__.py"
    data = target.read_bytes()
    edited = data.replace(b"print('tiny')", b"print('TINY')")
    assert len(edited) == len(data) and edited != data
    _rewrite_keeping_size_and_mtime(target, edited)
    warm = _capture_packages(venv.python, tmp_path / "c.json", home)
    bypass = _capture_packages(venv.python, tmp_path / "d.json", home, "--no-cache")
    assert set(warm["data"]["integrity"]["modified"]) == {"tinypkg/core.py", "tinypkg/__init__.py"}
    assert warm["data"]["integrity"] == bypass["data"]["integrity"]
    assert warm["data"]["hash_cache"]["misses"] == 1 + len(warm["data"]["integrity"]["missing"])
    assert warm["data"]["hash_cache"]["hits"] == warm["data"]["integrity"]["checked_files"] - 1


def _record_file(site: Site) -> Path:
    info = site.root / "pkg-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "RECORD").write_text(site.record)
    return info / "RECORD"


def test_a_record_given_as_a_file_is_not_read_while_its_verdict_holds(site, monkeypatch):
    record = _record_file(site)
    site.settle()

    def verify():
        return integrity.verify([("pkg", str(site.root), integrity.RecordFile(str(record)))], use_cache=True)

    cold = verify()
    reads = []
    real = integrity._record_text
    monkeypatch.setattr(integrity, "_record_text", lambda r: reads.append(r) or real(r))
    warm = verify()
    assert reads == [] and warm["hash_cache"]["hits"] == site.count
    assert _without_bookkeeping(warm) == _without_bookkeeping(cold)


def test_a_record_file_rewritten_with_size_and_mtime_put_back_is_read_again(site):
    record = _record_file(site)
    site.settle()

    def verify():
        return integrity.verify([("pkg", str(site.root), integrity.RecordFile(str(record)))], use_cache=True)

    verify()
    assert verify()["modified"] == {}
    # Another build's hash for m009.py in RECORD: same length, the RECORD's mtime put back.
    data = (site.pkg / "m009.py").read_bytes()
    _rewrite_keeping_size_and_mtime(record, site.record.replace(_digest(data), _digest(b"something else\n")).encode())
    result = verify()
    assert set(result["modified"]) == {"pkg/m009.py"}


def test_file_entries_read_back_as_written():
    """The file entries section is indexed when read and each entry cut out on demand (_FileEntries):
    every entry comes back exactly as it was written, paths of any text included."""
    import random

    rnd = random.Random(16)
    names = ["/site/pkg/m.py", "/site/with space/é.py", "/site/\udcff-undecodable.py", "/x"]
    names += [f"/site/pkg/m{i:05d}.py" for i in range(500)]
    entries = {name: (bytes(rnd.randrange(256) for _ in range(filestat.STAT.size)),
                      f"sha256:{rnd.getrandbits(256):064x}" + (" md5:00" if rnd.random() < 0.1 else ""))
               for name in names}
    text = hashcache._join(hashcache._files_lines(entries)).decode("utf-8", "surrogateescape")
    parsed = hashcache._parse_files(text, len(entries))
    assert len(parsed) == len(entries)
    assert all(parsed.get(name) == value for name, value in entries.items())
    assert parsed.get("/site/pkg/absent.py") is None
    assert dict(parsed.items()) == entries
    assert hashcache._parse_files("", 0) == {}


@pytest.mark.parametrize("damage", ["a digest line dropped", "a path listed twice", "a stat cut short"])
def test_a_sound_checksum_over_a_broken_file_entries_section_is_not_used(site, cache_home, damage):
    """A cache whose checksum holds but whose file entries do not add up (a writer's bug) is not used
    for them: a note, and the report of a capture without the cache."""
    site.verify()
    path = _cache_file(cache_home)
    sections = cachefile.read_cache_file(str(path))
    count, raw = sections[hashcache.FILES]
    lines = raw.decode().split("\n")[:-1]
    if damage == "a digest line dropped":
        lines.pop()
    elif damage == "a path listed twice":
        lines[1] = lines[0]
    else:
        lines[count] = lines[count][:-2]
    broken = ("\n".join(lines) + "\n").encode()
    cachefile.write_cache_file(str(path), [(name, n, broken if name == hashcache.FILES else body)
                                           for name, (n, body) in sections.items()])
    # A touched file (content as recorded, stat moved): its distribution is checked file by file.
    os.utime(site.pkg / "m003.py")
    site.settle()
    result = site.verify()
    assert "section of file entries unreadable" in result["hash_cache"]["note"], damage
    assert _without_bookkeeping(result) == _without_bookkeeping(site.verify(use_cache=False))


# Run in a process of its own with no other thread (as the capture command's packages child is): three
# distributions of 700 files, verified cold, then warm with the verdicts' files stat'ed by 3 processes, then
# again after one file changed size.
SHARED_STATS = r"""
import hashlib, base64, json, os, sys, time
from envsnap import subproc
from envsnap.capture import filestat, hashcache
from envsnap.capture.collectors import file_hashing, integrity
filestat.RACY_WINDOW_NS = 10_000_000
root = sys.argv[1]
records = []
for dist in ("alpha", "beta", "gamma"):
    lines = []
    os.makedirs(os.path.join(root, dist))
    for i in range(700):
        data = f"{dist}_{i} = {i}\n".encode()
        with open(os.path.join(root, dist, f"m{i:03d}.py"), "wb") as handle:
            handle.write(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{dist}/m{i:03d}.py,sha256={digest},{len(data)}")
    records.append((dist, root, "\n".join(lines) + "\n"))
forks = []
real_fork = subproc.fork_child
def counting_fork(body):
    child = real_fork(body)
    forks.append(child is not None)
    return child
subproc.fork_child = counting_fork
file_hashing.stat_processes = lambda: int(sys.argv[2])
time.sleep(0.05)
cold = integrity.verify(records, use_cache=True)
warm = integrity.verify(records, use_cache=True)
with open(os.path.join(root, "beta", "m456.py"), "ab") as handle:
    handle.write(b"# edited\n")
time.sleep(0.05)
edited = integrity.verify(records, use_cache=True)
print(json.dumps({"forks": forks, "cold_hits": cold["hash_cache"]["hits"], "warm": warm["hash_cache"],
                  "warm_modified": warm["modified"], "edited_modified": sorted(edited["modified"]),
                  "edited_checked": edited["checked_files"]}))
"""


@pytest.mark.parametrize("processes", [1, 3])
def test_verdicts_checked_by_forked_processes_hold_and_an_edit_is_caught(tmp_path, processes):
    import json
    import subprocess
    import sys

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    done = subprocess.run([sys.executable, "-c", SHARED_STATS, str(tmp_path / "site"), str(processes)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # 2,100 files in 5 chunks of at most 512: shared by 3 processes, 2 forked (the warm and the edited check).
    assert found["forks"] == ([True, True] * 2 if processes == 3 else [])
    assert found["cold_hits"] == 0 and found["warm"]["hits"] == 2100 and found["warm_modified"] == {}
    assert found["edited_modified"] == ["beta/m456.py"] and found["edited_checked"] == 2100


def test_stats_shared_among_processes_are_those_taken_in_one(tmp_path):
    import subprocess
    import sys

    for i in range(5):
        (tmp_path / f"f{i}").write_text("x" * i)
    script = (
        "import sys, json\n"
        "from envsnap.capture import hashcache, filestat\n"
        "d = sys.argv[1]\n"
        "groups = [[f'{d}/f{i}' for i in range(j, 5)] for j in range(5)] + [[f'{d}/gone', f'{d}/f0']]\n"
        "one = [filestat.packed_stats(g) for g in groups]\n"
        "print(hashcache._packed_stats_shared(groups, 4) == one, one[-1] is None)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
