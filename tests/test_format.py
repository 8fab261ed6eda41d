"""format.py's wording helpers."""
from envsnap import format as fmt


def test_plural_says_one_thing_in_the_singular():
    assert [fmt.plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert fmt.plural(1, "patch", "patches") == "1 patch" and fmt.plural(3, "patch", "patches") == "3 patches"
