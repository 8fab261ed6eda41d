"""A gzip-compressed snapshot is read as its content (store._gunzip_capped): the same snapshot, the same limits."""
from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from helpers import REPO_ROOT

from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.errors import EnvsnapError
from envsnap.model import store

GOOD = REPO_ROOT / "snapshots" / "eagle3-tp8-good.json"
BAD = REPO_ROOT / "snapshots" / "eagle3-tp8-bad.json"


def test_a_gzipped_snapshot_loads_as_the_plain_one(tmp_path):
    packed = tmp_path / "good.json.gz"
    packed.write_bytes(gzip.compress(GOOD.read_bytes()))
    assert store.load(str(packed), SECTION_SHAPES) == store.load(str(GOOD), SECTION_SHAPES)
    # two members, as `cat a.gz b.gz` makes them: the content is the two joined
    half = len(GOOD.read_bytes()) // 2
    two = tmp_path / "two.json.gz"
    two.write_bytes(gzip.compress(GOOD.read_bytes()[:half]) + gzip.compress(GOOD.read_bytes()[half:]))
    assert store.load(str(two), SECTION_SHAPES) == store.load(str(GOOD), SECTION_SHAPES)


@pytest.mark.parametrize("body, said", [
    (lambda raw: gzip.compress(raw)[:-40], "cut short"),
    (lambda raw: gzip.compress(raw)[:10] + b"\xff" * 64, "not a valid gzip file"),
    (lambda raw: gzip.compress(b'{"schema_version": 1}\x00'), "NUL"),
])
def test_a_broken_gzip_file_is_one_clear_error(tmp_path, body, said):
    packed = tmp_path / "bad.json.gz"
    packed.write_bytes(body(GOOD.read_bytes()))
    with pytest.raises(EnvsnapError, match=said):
        store.load(str(packed), SECTION_SHAPES)


def test_a_small_file_that_expands_past_the_cap_is_refused_as_it_grows(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "MAX_SNAPSHOT_BYTES", 4 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (16 << 20) + b"]"))
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(EnvsnapError, match="larger than 4 MiB uncompressed"):
        store.load(str(bomb), SECTION_SHAPES)


def test_diff_of_two_gzipped_snapshots_says_what_the_plain_ones_say(tmp_path):
    for source in (GOOD, BAD):
        (tmp_path / (source.name + ".gz")).write_bytes(gzip.compress(source.read_bytes()))
    plain = subprocess.run([sys.executable, "-m", "envsnap", "diff", "--format", "json", str(GOOD), str(BAD)],
                           capture_output=True, text=True)
    packed = subprocess.run([sys.executable, "-m", "envsnap", "diff", "--format", "json",
                             str(tmp_path / (GOOD.name + ".gz")), str(tmp_path / (BAD.name + ".gz"))],
                            capture_output=True, text=True)
    assert plain.returncode == packed.returncode == 1
    assert packed.stdout.replace(str(tmp_path / (GOOD.name + ".gz")), str(GOOD)).replace(
        str(tmp_path / (BAD.name + ".gz")), str(BAD)) == plain.stdout
