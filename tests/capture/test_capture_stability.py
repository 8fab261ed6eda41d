"""Two captures of an unchanged environment differ only in fields the rule table marks volatile."""
import json

from helpers import run_envsnap

from envsnap.analysis import knowledge
from envsnap.model import snapshot


def test_unchanged_environment_differs_only_in_volatile_fields(tmp_path):
    watched = tmp_path / "patch_kimik25_eagle3.py"
    watched.write_text("print('patch')\n")
    paths = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        result = run_envsnap("capture", "-o", out, "--watch", watched, "--timeout", "60", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        paths.append(out)
    a, b = (snapshot.flatten(json.loads(p.read_text())) for p in paths)
    differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    not_volatile = [k for k in differing if not knowledge.is_volatile(k)]
    assert not_volatile == [], not_volatile
    assert any(k.startswith("files.entries") for k in a)  # the watched file really was recorded
