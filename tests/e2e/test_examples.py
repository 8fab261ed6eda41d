"""The shipped example pair (snapshots/eagle3-tp8-{good,bad}.json): its story, and that the committed
script reproduces it byte for byte from the committed base capture."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from helpers import REPO_ROOT, run_envsnap, run_envsnap_in_process

from envsnap.analysis import result as result_mod
from envsnap.model import store

SNAPSHOTS = REPO_ROOT / "snapshots"
GOOD, BAD = SNAPSHOTS / "eagle3-tp8-good.json", SNAPSHOTS / "eagle3-tp8-bad.json"
# The planted story: what differs on purpose. Everything else that differs is innocent.
PLANTED = {"workers.env.NCCL_NVLS_ENABLE", "workers.parent_only.NCCL_NVLS_ENABLE", "nccl.env.NCCL_NVLS_ENABLE",
           "nccl.algorithms", "nccl.protocols", "nccl.channel_counts.nvls",
           "integrity.sglang/srt/entrypoints/engine.py", "integrity.sglang/srt/managers/scheduler.py"}


@pytest.fixture(scope="module")
def pair():
    return store.load(str(GOOD)), store.load(str(BAD))


@pytest.fixture(scope="module")
def result(pair):
    return result_mod.analyze(*pair, good_file=str(GOOD), bad_file=str(BAD))


def test_provenance_says_illustrative(pair):
    for snap in pair:
        assert snap["provenance"]["kind"] == "illustrative"
        assert snap["provenance"]["note"] == "illustrative reconstruction, not a measurement"


def test_the_story_is_in_the_data(pair):
    good, bad = pair
    sections = bad["sections"]
    assert all(s["status"] == "ok" for s in sections.values())
    procs = sections["processes"]["data"]["processes"]
    assert {"sglang-main", "detokenizer"} | {f"scheduler_TP{i}" for i in range(8)} <= set(procs)
    records = sections["probe"]["data"]["records"]
    assert {records[f"scheduler_TP{i}"]["env_at_init"]["NCCL_NVLS_ENABLE"] for i in range(8)} == {"0"}
    assert sections["env"]["data"]["vars"]["NCCL_NVLS_ENABLE"] == "1"  # the shell exports it
    good_records = good["sections"]["probe"]["data"]["records"]
    assert {good_records[f"scheduler_TP{i}"]["env_at_init"]["NCCL_NVLS_ENABLE"] for i in range(8)} == {"1"}
    modified = sections["packages"]["data"]["integrity"]["modified"]
    assert {"sglang/srt/layers/moe/topk.py", "sglang/srt/layers/attention/flashinfer_mla_backend.py",
            "sglang/srt/entrypoints/engine.py", "sglang/srt/managers/scheduler.py"} <= set(modified)
    hooks = sections["python"]["data"]["startup_hooks"]
    assert any(path.endswith("/sitecustomize.py") and h["kind"] == "sitecustomize" for path, h in hooks.items())
    repo = sections["git"]["data"]["repos"]["/home/ops/sglang"]
    assert repo["dirty"] and repo["stash"]
    for snap in pair:
        assert len(snap["sections"]["nccl"]["data"]["ranks"]) == 8
        assert snap["sections"]["nvidia"]["data"]["count"] == 8
        assert snap["sections"]["sglang"]["data"]["server_args"]["disable_custom_all_reduce"] is True


def test_verdict_and_top_cause(result):
    verdict = result["verdict"]
    assert verdict["metric"] == "output_throughput" and verdict["significant"]
    assert 93 <= verdict["good"]["median"] <= 95 and 59 <= verdict["bad"]["median"] <= 61
    assert verdict["good"]["n"] == verdict["bad"]["n"] == 6
    dec = verdict["decomposition"]
    assert dec["side"] == "verify" and dec["accept_length"]["holds"]
    assert dec["cycle_time"]["metric"] == "verify_ms"
    assert round(dec["cycle_time"]["good"]) == 19 and round(dec["cycle_time"]["bad"]) == 29
    # One change, one cause: the engine.py edit, which sets NCCL_NVLS_ENABLE for the workers; the workers'
    # variable (NCCL's log confirms it), the parent's, NCCL's log line and NCCL's changed choices folded in.
    top = result["causes"][0]
    assert top["key"] == "integrity.sglang/srt/entrypoints/engine.py" and top["component"] == "communication"
    assert top["tied"] == 0 and top["reach"]["tier"] == "acted"
    assert top["reach"]["through"] == "workers.env.NCCL_NVLS_ENABLE" and top["reach"]["basis"] == "nccl_log_confirms"
    folded = {f["key"]: f["relation"] for f in top["folded"]}
    assert folded["workers.env.NCCL_NVLS_ENABLE"] == "set by it" and folded["nccl.algorithms"] == "its effect"
    assert {"workers.parent_only.NCCL_NVLS_ENABLE", "nccl.env.NCCL_NVLS_ENABLE", "nccl.protocols"} <= set(folded)
    assert not [c for c in result["causes"][1:] if "NCCL_NVLS_ENABLE" in c["key"]]
    innocent = [d for d in result["differences"] if d["key"] not in PLANTED]
    assert len(innocent) >= 20
    assert any("NCCL_NVLS_ENABLE=1 is set in the shell" in w for w in result["warnings"])


def test_readme_main_job_command():
    proc = run_envsnap("diff", "snapshots/eagle3-tp8-good.json", "snapshots/eagle3-tp8-bad.json", cwd=REPO_ROOT)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REGRESSION output_throughput 94")
    assert "accept length holds" in lines[0] and "verify side" in lines[0]
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("1. "))
    assert "integrity.sglang/srt/entrypoints/engine.py" in lines[first]
    assert lines[first + 2].strip().startswith("acted through workers.env.NCCL_NVLS_ENABLE (set by it)")


def test_the_pair_carries_the_edits_as_text_and_diff_shows_the_removed_guard(pair):
    """The turning point of the story is reading the patches: the engine.py edit (site-packages and the
    ops checkout), the scheduler.py edit, the stash, the sitecustomize.py, all held as text."""
    good, bad = pair
    sections = bad["sections"]
    modified = sections["packages"]["data"]["integrity"]["modified"]
    engine = modified["sglang/srt/entrypoints/engine.py"]["content"]
    assert engine["status"] == "text" and "redacted" not in engine
    assert 'os.environ["NCCL_NVLS_ENABLE"] = str(' in engine["text"]
    assert '"NCCL_NVLS_ENABLE" not in os.environ' not in engine["text"]  # the guard is gone
    for entry in modified.values():  # each text is the file whose hash the integrity check reports
        assert hashlib.sha256(entry["content"]["text"].encode()).hexdigest() == entry["actual_sha256"]
    hooks = sections["python"]["data"]["startup_hooks"]
    site = next(h for p, h in hooks.items() if p.endswith("/sitecustomize.py"))
    assert 'os.environ.setdefault("HF_HUB_OFFLINE", "1")' in site["content"]["text"]
    repo = sections["git"]["data"]["repos"]["/home/ops/sglang"]
    assert "WIP split-kv" in repo["stash"]["stash@{0}"]["patch"]["text"]
    assert repo["dirty"]["python/sglang/srt/entrypoints/engine.py"]["content"]["text"] == engine["text"]

    proc = run_envsnap_in_process("diff", "-v", "--no-pip-cache", GOOD, BAD, cwd=REPO_ROOT)
    lines = proc.stdout.splitlines()
    assert '-    if "NCCL_NVLS_ENABLE" not in os.environ or nvls_wanted:' in lines
    assert "+    # synced with main: NVLS follows --enable-nccl-nvls / --enable-symm-mem only" in lines
    assert any(line.startswith("@@ ") and line.endswith("def _set_envs_and_config(server_args: ServerArgs):")
               for line in lines)
    top = next(i for i, line in enumerate(lines) if line.strip().startswith("1. "))
    evidence = lines[top:top + 12]
    assert any("removes `if \"NCCL_NVLS_ENABLE\" not in os.environ or nvls_wanted:`" in line for line in evidence)


def test_the_pair_holds_only_our_own_file_texts(pair):
    """The edited files' texts are envsnap's short stand-ins (snapshots/illustrative-src/README.md), not
    SGLang's files: each says so at its top, in the source tree and in both snapshots."""
    sources = sorted((SNAPSHOTS / "illustrative-src").rglob("*.py"))
    assert len(sources) == 4
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert text.startswith('"""STAND-IN for sglang/') and len(text.splitlines()) < 100, path
    for snap in pair:
        modified = snap["sections"]["packages"]["data"]["integrity"]["modified"]
        for rel, entry in modified.items():
            assert entry["content"]["text"].startswith(f'"""STAND-IN for {rel}'), rel
            assert entry["recorded_sha256"] != entry["actual_sha256"]  # the RECORD hash is the real wheel's
    # A third-party licence header, put together here so that this file is no hit of a grep for it.
    header = " ".join(("Licensed", "under", "the", "Apache"))
    for name in (GOOD, BAD):
        assert header not in name.read_text(encoding="utf-8")


def test_run_records_match_their_output(pair):
    """The planted bench_serving output parses (envsnap's own parser) to the metrics recorded with it."""
    from envsnap.measure import parsers

    for snap in pair:
        for run in snap["runs"]:
            if run["source"] != "run":
                continue
            metrics, _ = parsers.parse_bench_serving(run["output_tail"])
            assert metrics == pytest.approx(run["metrics"], rel=1e-3)


def test_generator_reproduces_the_committed_files(tmp_path):
    proc = subprocess.run([sys.executable, str(SNAPSHOTS / "make_illustrative.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name in ("eagle3-tp8-good.json", "eagle3-tp8-bad.json"):
        assert (tmp_path / name).read_bytes() == (SNAPSHOTS / name).read_bytes(), f"{name}: regenerate it"
    base = json.loads((SNAPSHOTS / "illustrative-base.json").read_text())
    assert set(base) >= {"good", "bad"} and base["good"]["sections"]["processes"]["status"] == "ok"


def test_measured_h200_pair_ranks_the_real_slowdown_first():
    """The pair measured on a real H200: CUDA_LAUNCH_BLOCKING=1 among 25 differing variables."""
    import json as _json

    from helpers import REPO_ROOT, run_envsnap_in_process

    good = REPO_ROOT / "snapshots" / "h200-spec-decode-good.json"
    bad = REPO_ROOT / "snapshots" / "h200-spec-decode-bad.json"
    for path in (good, bad):
        assert _json.loads(path.read_text())["provenance"]["kind"] == "measured"
    result = run_envsnap_in_process("diff", good, bad, "--format", "json")
    assert result.returncode == 1, result.stderr
    data = _json.loads(result.stdout)
    assert data["causes"][0]["key"] == "env.CUDA_LAUNCH_BLOCKING"
    assert data["verdict"]["significant"] is True
    assert data["verdict"]["decomposition"]["side"] == "verify"
    assert data["verdict"]["decomposition"]["accept_length"]["holds"] is True
