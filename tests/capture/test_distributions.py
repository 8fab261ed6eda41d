"""distributions.find and .headers give what importlib.metadata gives, on real layouts on disk.

`find` is importlib.metadata's discovery without importing it (the import costs a warm capture
~30-45 ms of CPU); `headers` reads a plain header block without the email parser. Both are only
worth having if they answer exactly as importlib.metadata does: every test compares the two on
the same files (duplicates of one name, case, `.` `_` `-` spellings, egg-info directories and
files, an `.egg`, a zip on the path, missing and non-directory entries, the current directory;
folded, CRLF, `From `, unnamed and blank-led header lines, PKG-INFO, requires.txt).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from importlib import metadata

import pytest
from helpers import REPO_ROOT

from envsnap.capture.collectors import distributions

SAME_DISCOVERY = distributions._SAME_DISCOVERY


def _dist_info(parent, dirname: str, metadata_text: str = None, name: str = "x", version: str = "1", files=None):
    info = parent / dirname
    info.mkdir(parents=True)
    text = metadata_text if metadata_text is not None else f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    (info / "METADATA").write_bytes(text.encode("utf-8"))
    for filename, content in (files or {}).items():
        (info / filename).write_text(content)
    return info


@pytest.fixture
def layouts(tmp_path):
    """Two site directories and odd path entries, as pip, setuptools and distros leave them."""
    first = tmp_path / "site-a"
    second = tmp_path / "site-b"
    first.mkdir()
    second.mkdir()
    # One name in several spellings and versions: importlib groups them by normalised name, in
    # the order each name is first listed, and the first wins for from_name.
    _dist_info(first, "foo-1.0.dist-info", name="foo", version="1.0")
    _dist_info(first, "Foo-2.0.dist-info", name="Foo", version="2.0")
    _dist_info(first, "foo_bar-1.0.dist-info", name="foo_bar", version="1.0")
    _dist_info(first, "foo.bar-2.0.dist-info", name="foo.bar", version="2.0")
    _dist_info(first, "Zed_Pkg-3.dist-info", name="zed-pkg", version="3")
    _dist_info(first, "dbl__under-1.dist-info", name="dbl-under", version="1")
    _dist_info(first, "dbl_under-2.dist-info", name="dbl_under", version="2")
    _dist_info(first, "\u00dcn\u00efcode.Pkg-1.dist-info", name="\u00dcn\u00efcode.Pkg", version="1")
    egg_info = first / "legacy-0.1-py3.11.egg-info"  # setuptools: PKG-INFO, requires.txt
    egg_info.mkdir()
    (egg_info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 0.1\n")
    (egg_info / "requires.txt").write_text("six\n\n[extra]\nrequests\n")
    (first / "distro_file-1.0.egg-info").write_text("Metadata-Version: 1.0\nName: distro-file\nVersion: 1.0\n")
    (first / "README.txt").write_text("not a distribution\n")
    (first / "pkg").mkdir()
    _dist_info(second, "foo-0.9.dist-info", name="foo", version="0.9")
    _dist_info(second, "other-1.dist-info", name="other", version="1")
    egg = tmp_path / "Old_Egg-1.0-py3.11.egg"  # an .egg directory: its EGG-INFO is a distribution
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: Old-Egg\nVersion: 1.0\n")
    zipped = tmp_path / "bundle.zip"  # a zip on the path (zipapps, eggs)
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
    not_a_dir = tmp_path / "plain-file.txt"
    not_a_dir.write_text("x")
    return [str(first), str(tmp_path / "missing"), str(not_a_dir), str(zipped), str(egg), str(second),
            str(first) + "/", str(first) + "/./"]


def _paths(dists):
    return [(type(d._path).__name__, str(d._path)) for d in dists]


def test_find_lists_what_importlib_metadata_lists_in_its_order(layouts):
    ours = list(distributions.find(layouts))
    assert _paths(ours) == _paths(metadata.distributions(path=layouts))
    assert len(ours) >= 15  # the layout is really read (every spelling, egg, zip, both sites)


@pytest.mark.parametrize("name", ["foo", "FOO", "foo-bar", "Foo.Bar", "foo__bar", "zed-pkg", "legacy", "distro_file",
                                  "dbl-under", "DBL__UNDER", "\u00fcn\u00efcode-pkg", "\u00dcN\u00cfCODE.PKG",
                                  "old-egg", "Old_Egg", "zipped", "other", "absent", ""])
def test_find_by_name_is_importlib_metadatas_from_name(layouts, name):
    assert _paths(distributions.find(layouts, name)) == _paths(metadata.distributions(name=name, path=layouts))
    listings: dict = {}  # many names looked up over one listing of each entry: the same answers
    for _ in range(2):
        assert _paths(distributions.find(layouts, name, listings)) == _paths(distributions.find(layouts, name))
    ours = distributions.first(name, layouts) if name else None
    if name:
        theirs = next(iter(metadata.distributions(name=name, path=layouts)), None)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert str(ours._path) == str(theirs._path)
            assert ours.version == theirs.version


def test_the_current_directory_entry_is_importlib_metadatas(layouts, monkeypatch):
    monkeypatch.chdir(layouts[0])
    assert _paths(distributions.find(["", layouts[-3]])) == _paths(metadata.distributions(path=["", layouts[-3]]))


def test_a_found_distribution_reads_like_a_path_distribution(layouts):
    for ours, theirs in zip(distributions.find(layouts), metadata.distributions(path=layouts)):
        for filename in ("METADATA", "PKG-INFO", "RECORD", "requires.txt", "absent", ""):
            assert ours.read_text(filename) == theirs.read_text(filename), (ours, filename)
        assert str(ours.locate_file("")) == str(theirs.locate_file(""))
        assert str(ours.locate_file("pkg/mod.py")) == str(theirs.locate_file("pkg/mod.py"))
        assert ours.version == theirs.version
        assert ours.requires == theirs.requires
        assert distributions.header(ours, "Name") == theirs.metadata["Name"]


@pytest.mark.skipif(not SAME_DISCOVERY, reason="this Python's discovery is importlib.metadata's own")
def test_another_finder_of_distributions_hands_discovery_to_importlib_metadata(layouts, monkeypatch):
    class Finder:
        def find_spec(self, *args, **kwargs):
            return None

        def find_distributions(self, context=None):
            return iter([metadata.PathDistribution(__import__("pathlib").Path(layouts[0]) / "foo-1.0.dist-info")])

    monkeypatch.setattr(sys, "meta_path", sys.meta_path + [Finder()])
    ours = list(distributions.find(layouts))
    assert _paths(ours) == _paths(metadata.distributions(path=layouts))
    assert type(ours[-1]).__name__ == "PathDistribution"  # the finder's own answer, last


# Header blocks the email parser reads in each of its ways (email/feedparser.py).
HEADER_CASES = {
    "plain": ("Metadata-Version: 2.1\nName: plain\nVersion: 1.0\nRequires-Dist: a\n"
              "Requires-Dist: b (>=1); extra == 'x'\n\nbody\nVersion: 9\n"),
    "no_body_no_newline": "Name: nb\nVersion: 2.0",
    "no_body_newline": "Name: nb\nVersion: 2.0\n",
    "trailing_blanks": "Name: tb  \nVersion:\t 3.0 \t\n\n",
    "empty_value": "Name: ev\nVersion:\nRequires-Dist:   \n\n",
    "case": "NAME: case\nversion: 4.0\nREQUIRES-DIST: z\n\n",
    "folded": "Name: folded\nVersion: 5.0\nRequires-Dist: a;\n  extra == 'x'\nSummary: one\n two\n\n",
    "crlf": "Name: crlf\r\nVersion: 6.0\r\nRequires-Dist: q\r\n\r\nbody\r\n",
    "lone_cr": "Name: cr\rVersion: 6.5\r\rbody",
    "from_line": "From nobody Mon Jan 1\nName: fromline\nVersion: 7.0\n\n",
    "no_colon_line": "Name: nocolon\nthis line has no colon\nVersion: 8.0\n\n",
    "space_before_colon": "Name: spaced\nVersion : 9.0\n\n",
    "unnamed": "Name: unnamed\n: orphan\nVersion: 10.0\n\n",
    "first_line_folded": " leading\nName: lead\nVersion: 11.0\n\n",
    "blank_led_line": "Name: blank\n   \nVersion: 12.0\n\n",
    "empty_block": "\nName: late\nVersion: 13.0\n",
    "non_ascii": "Name: n\u00e4me\nVersion: 14.0\nSummary: caf\u00e9 \u2013 \u00fcber\n\n",
    "non_ascii_name": "Name: x\nV\u00e9rsion: 15.0\nVersion: 15.1\n\n",
    "control_in_name": "Name: x\nVer\x0bsion: 16.0\nVersion: 16.1\n\n",
    "vertical_tab_value": "Name: vt\nVersion: 17.0\x0bextra\nSummary: s\x1cs\n\n",
    "colon_in_value": "Name: cv\nVersion: 18.0\nHome-page: https://example.org:8080/x\n\n",
    "many": "".join(f"Requires-Dist: dep{i}\n" for i in range(50)) + "Name: many\nVersion: 19\n\n",
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_headers_are_the_email_parsers(tmp_path, case):
    info = _dist_info(tmp_path, f"{case}-1.dist-info", HEADER_CASES[case])
    ours = distributions.PathDist(info)
    theirs = metadata.PathDistribution(info)
    for name in ("Name", "Version", "Requires-Dist", "Summary", "Home-page", "Metadata-Version", "Absent", "Description"):
        assert distributions.headers(ours, name) == theirs.metadata.get_all(name), name
        assert distributions.header(ours, name) == theirs.metadata[name], name
    assert ours.version == theirs.version
    assert ours.requires == theirs.requires


def test_empty_metadata_falls_back_to_pkg_info_and_a_missing_one_to_the_parser(tmp_path):
    info = _dist_info(tmp_path, "e-1.dist-info", "", files={"PKG-INFO": "Name: from-pkg-info\nVersion: 1.5\n"})
    ours, theirs = distributions.PathDist(info), metadata.PathDistribution(info)
    assert ours.version == theirs.version == "1.5"
    legacy = tmp_path / "file-1.0.egg-info"  # a legacy egg-info file: the metadata is the file
    legacy.write_text("Metadata-Version: 1.0\nName: file\nVersion: 1.0\n")
    ours, theirs = distributions.PathDist(legacy), metadata.PathDistribution(legacy)
    assert ours.version == theirs.version == "1.0"
    assert ours.requires == theirs.requires


def test_egg_info_requirements_come_from_requires_txt(tmp_path):
    info = tmp_path / "eggy-1.0.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Name: eggy\nVersion: 1.0\n")
    ours, theirs = distributions.PathDist(info), metadata.PathDistribution(info)
    assert ours.requires == theirs.requires is None
    (info / "requires.txt").write_text("six>=1\n\n[socks]\nPySocks\n\n[:python_version < '3.8']\nzipp\n")
    assert ours.requires == theirs.requires and len(ours.requires) == 3


def test_undecodable_metadata_raises_as_importlib_metadata_does(tmp_path):
    info = tmp_path / "bad-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(b"Name: bad\nVersion: \xff\n")
    with pytest.raises(UnicodeDecodeError):
        assert metadata.PathDistribution(info).version
    with pytest.raises(UnicodeDecodeError):
        assert distributions.PathDist(info).version


@pytest.mark.skipif(not SAME_DISCOVERY, reason="this Python's discovery is importlib.metadata's own")
def test_collectors_that_read_distributions_import_neither_importlib_metadata_nor_email():
    """What the packages, git, torch and nvidia collectors read of the distributions, in a fresh
    interpreter: all of it without importlib.metadata or the email package."""
    script = (
        "import json, site, sys\n"
        "from envsnap.capture.collectors import distributions, git, nvidia, nvml_read, packages, torch\n"
        "path = [p for p in sys.path if p]\n"
        "data = packages.describe(path, set(site.getsitepackages()), no_cache=True)\n"
        "distributions.editable_source_dirs(path)\n"
        "torch.inspect_torch(path)\n"
        "version = nvml_read.pynvml_version()\n"
        "print(json.dumps({'count': data['count'], 'pynvml': version,\n"
        "                  'loaded': sorted(m for m in sys.modules if m.startswith(('importlib.metadata', 'email')))}))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO_ROOT,
                          timeout=120)
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["count"] > 5
    assert found["loaded"] == []
    try:
        expected = metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        expected = None
    assert found["pynvml"] == expected


def test_find_over_this_interpreters_path_is_importlib_metadatas():
    path = [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]
    ours = list(distributions.find(path))
    theirs = list(metadata.distributions(path=path))
    assert _paths(ours) == _paths(theirs) and len(ours) > 5
    for a, b in zip(ours, theirs):
        assert a.version == b.version and a.requires == b.requires
