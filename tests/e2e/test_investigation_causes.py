"""The investigation of issue "Causes from what acted", rebuilt on real processes: one cause, the one that acted.

A real venv has the package `tinymoe` installed by pip and the in-process probe. A patch script's patch has
three hunks of tinymoe/topk.py; the third removes a redundant sweep (ten times the work per step). GOOD ran
with all three applied; on BAD the script's "SKIP / WARN" left hunk 3 un-applied: the benchmark, which imports
tinymoe, is ten times slower. BAD also has a changed start-up hook (sitecustomize.py) that mentions
NCCL_IB_DISABLE in a comment and sets NCCL_PROTO, and the shell exports NCCL_PROTO and 27 other innocent
variables (NCCL, CUDA, SGLang settings on a machine with no GPU and no SGLang; everyday shell variables).

What must hold: the un-applied hunk ranks first alone, as a change that acted (the benchmark imported the
package whose file it edits); the hook that mentions an out-of-context variable ranks below it and is not
lifted by the mention; NCCL_PROTO is one cause (the shell's, the benchmark's and the hook's are one change).
"""
from __future__ import annotations

import subprocess

import pytest
from helpers.git import git, init_repo
from helpers.patches import install_package
from helpers.planted import assert_outputs_agree, figures, outputs, side_env

pytestmark = pytest.mark.slow

_FILLER = "".join(f"# filler line {i}\n" for i in range(12))
TOPK = ("import math\n\n\n"
        "def select_experts(scores, k):\n"
        "    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])\n"
        "    return ranked[:k]\n\n\n" + _FILLER +
        "def renormalize(weights):\n"
        "    total = sum(weights)\n"
        "    return [w / total for w in weights]\n\n\n" + _FILLER.replace("filler", "spacer") +
        "def step(n):\n"
        "    return sum(i * i for i in range(n * 10))\n")
EDITS = (("    return ranked[:k]\n", "    return ranked[:k]  # eagle3: keep the top-k order\n"),
         ("    total = sum(weights)\n", "    total = math.fsum(weights)  # eagle3: exact sum\n"),
         ("    return sum(i * i for i in range(n * 10))\n", "    return sum(i * i for i in range(n))  # eagle3: one sweep\n"))
BENCH = '''\
import json, time
from tinymoe import topk
REPS = 20
start = time.process_time()
for _ in range(REPS):
    topk.step(20000)
print(json.dumps({"steps_per_cpu_second": round(REPS / (time.process_time() - start), 3)}))
'''
HOOK_GOOD = "import os\n"
HOOK_BAD = ("import os\n"
            "# NCCL_IB_DISABLE is left to the fabric's default here\n"
            "os.environ.setdefault('NCCL_PROTO', 'Simple')\n")


def _edited(applied):
    text = TOPK
    for number in applied:
        old, new = EDITS[number - 1]
        text = text.replace(old, new, 1)
    return text


@pytest.fixture(scope="module")
def investigation(tmp_path_factory):
    from envsnap.probe import install as install_mod

    base = tmp_path_factory.mktemp("investigation-causes")
    python, site = install_package(base, "tinymoe", {"topk.py": TOPK})
    install_mod.install(str(site))
    src = init_repo(base / "tinymoe-checkout", {"python/tinymoe/topk.py": TOPK})
    (src / "python/tinymoe/topk.py").write_text(_edited((1, 2, 3)))
    patch = base / "eagle3.patch"
    patch.write_text(git(src, "diff", "--no-color"))
    git(src, "checkout", "--", ".")
    (base / "bench.py").write_text(BENCH)
    snaps = {}
    for label, applied, hook in (("good", (1, 2, 3), HOOK_GOOD), ("bad", (1, 2), HOOK_BAD)):
        (site / "tinymoe" / "topk.py").write_text(_edited(applied))
        (site / "sitecustomize.py").write_text(hook)
        probe_dir = base / f"probe-{label}"
        probe_dir.mkdir()
        out = base / f"{label}.json"
        env = side_env(bad=label == "bad", PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run([str(python), "-m", "envsnap", "run", "-o", str(out), "--label", label, "--repeat", "3",
                               "--probe-dir", str(probe_dir), "--patch", str(patch), "--",
                               str(python), str(base / "bench.py")],
                              cwd=str(base), env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        snaps[label] = out
    yield snaps, base


def test_the_unapplied_hunk_ranks_first_alone_and_the_hook_that_mentions_a_name_below_it(investigation):
    snaps, base = investigation
    result, text, page = outputs(snaps["good"], snaps["bad"], base)
    found = figures("investigation: un-applied hunk", result, lambda c: c["key"] == "patches.eagle3.patch.hunk.3")
    top = result["causes"][0]
    assert found["rank"] == 1 and not found["tied"], [c["key"] for c in result["causes"][:6]]
    assert top["reach"]["tier"] == "acted" and top["reach"]["basis"] == "modules", top["reach"]
    assert found["margin"] >= 0.1, found
    hook = next(c for c in result["causes"] if c["key"].startswith("startup.") and c["key"].endswith("sitecustomize.py"))
    assert hook["rank"] > top["rank"]
    assert "startup_mentions_changed" not in [f["factor"] for f in hook["factors"]]
    assert_outputs_agree(result, text, page)


def test_nccl_proto_is_one_cause(investigation):
    snaps, base = investigation
    result, _, _ = outputs(snaps["good"], snaps["bad"], base)
    holding = [c for c in result["causes"]
               if "NCCL_PROTO" in c["key"] or any("NCCL_PROTO" in f["key"] for f in c.get("folded") or [])]
    assert len(holding) == 1, [c["key"] for c in holding]
    faces = [holding[0]["key"]] + [f["key"] for f in holding[0].get("folded") or []]
    assert sum("NCCL_PROTO" in k for k in faces) >= 2, faces
