"""What a process is, read from its title or command line: SGLang roles and stable keys.

Process ids differ on every launch, so a snapshot keys each process by its role
("sglang-main", "scheduler_TP0", "detokenizer"...) and diff aligns two launches by
role. The facts below were read from SGLang's source (not copied):

- sglang 0.4.6  srt/managers/scheduler.py `run_scheduler_process`: title
  ``sglang::scheduler_TP<r>`` or ``sglang::scheduler_DP<d>_TP<r>`` (always a TP part).
- sglang 0.5.5  srt/managers/scheduler.py `run_scheduler_process`: parts in the order
  DP, TP, EP, PP, each only when that size is > 1, so TP=1 gives plain ``sglang::scheduler``.
- sglang 0.5.23 srt/managers/scheduler.py `configure_scheduler_process`: order DP, PP,
  ATTN_CP, MOE_DP, TP, EP. Spaces become ``_`` in every version.
- ``sglang::detokenizer`` (detokenizer_manager.py), ``sglang::data_parallel_controller``
  (data_parallel_controller.py), ``sglang::tokenizer_worker:<pid>`` and (0.5.23)
  ``sglang::detokenizer_router`` (multi_tokenizer_mixin.py).
- The diffusion runtime's GPU workers (multimodal_gen/runtime/managers/gpu_worker.py):
  sglang 0.5.5 (line 66) ``sgl_diffusion::scheduler:<local rank>``; sglang 0.5.23 (lines
  475-492) ``sgl_diffusion::scheduler`` plus ``_TP<r>``, ``_U<r>`` (Ulysses), ``_R<r>`` (ring)
  and ``_C<r>`` (classifier-free guidance) for each parallel group wider than 1, or
  ``sgl_diffusion::scheduler_<local rank>`` before model parallelism is initialised.
- The main process never calls setproctitle: it keeps ``python -m sglang.launch_server ...``
  or, through the console script (sglang/cli/main.py), ``sglang serve ...`` and
  ``sglang generate ...`` (multimodal inference, sglang 0.5.23 sglang/cli/main.py:33-37,
  sglang/cli/generate.py), or ``python -m sglang.multimodal_gen.runtime.launch_server``
  (0.5.23 sglang/multimodal_gen/runtime/launch_server.py:696).

Linux cuts /proc/PID/comm to 15 characters ("sglang::schedul"), so matching is done on
the full command line / title, never on the process name.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Sequence

_TITLE = re.compile(r"^sglang::(?P<what>scheduler|detokenizer_router|detokenizer|data_parallel_controller|"
                    r"tokenizer_worker)(?P<rest>.*)$")
_DIFFUSION = re.compile(r"^sgl_diffusion::scheduler(?P<rest>.*)$")
_DIFFUSION_RANK = re.compile(r"^[:_](?P<rank>\d+)$")  # 0.5.5 ":<rank>", 0.5.23 "_<rank>": the local rank
_DIFFUSION_PART = re.compile(r"_(TP|U|R|C)(\d+)")
_DIFFUSION_FIELD = {"TP": "tp", "U": "ulysses", "R": "ring", "C": "cfg"}
# Console-script subcommands and modules that run an SGLang main process.
_MAIN_SUBCOMMANDS = ("serve", "generate")
_MAIN_MODULES = ("sglang.launch_server", "sglang.multimodal_gen.runtime.launch_server")
_MAIN_SCRIPTS = ("sglang/launch_server.py", "sglang/multimodal_gen/runtime/launch_server.py")
# Longest names first so ATTN_CP / MOE_DP are not read as CP / DP.
_PART = re.compile(r"_(ATTN_CP|MOE_DP|DP|TP|PP|EP|CP)(\d+)")
_PART_FIELD = {"ATTN_CP": "attn_cp", "MOE_DP": "moe_dp", "DP": "dp", "TP": "tp", "PP": "pp", "EP": "ep", "CP": "cp"}
_KINDS = {"scheduler": "scheduler", "detokenizer": "detokenizer", "detokenizer_router": "detokenizer",
          "data_parallel_controller": "dp_controller", "tokenizer_worker": "tokenizer"}


def title_of(cmdline: Sequence[str]) -> str:
    """The process title as shown by ps: setproctitle leaves one argument (plus empty padding)."""
    parts = [a for a in cmdline if a != ""]
    return " ".join(parts)


def is_sglang_main(cmdline: Sequence[str]) -> bool:
    """True for `python -m sglang.launch_server ...` (or the diffusion runtime's launch_server), the
    same as a script path, or the console script's `sglang serve` / `sglang generate`. Module and
    script names are matched whole, path component by component: `minisgl/launch_server.py` or
    `mini-sglang/launch_server.py` is another package's script, not SGLang's."""
    args = [a for a in cmdline if a]
    for i, arg in enumerate(args[:6]):  # the program part of a command line is near its start
        if arg in _MAIN_MODULES and i > 0 and args[i - 1] == "-m":
            return True
        parts = arg.replace(os.sep, "/").split("/")
        if any(parts[-len(script.split("/")):] == script.split("/") for script in _MAIN_SCRIPTS):
            return True
        if os.path.basename(arg) == "sglang" and i + 1 < len(args) and args[i + 1] in _MAIN_SUBCOMMANDS:
            return True
    return False


def _diffusion_role(rest: str) -> Dict[str, Any]:
    """The role of a diffusion GPU worker from what follows `sgl_diffusion::scheduler` in its title."""
    role: Dict[str, Any] = {"kind": "scheduler"}
    rank = _DIFFUSION_RANK.match(rest)
    if rank:
        role["key"] = f"diffusion_scheduler_{rank.group('rank')}"
        role["local_rank"] = int(rank.group("rank"))
        return role
    parts = _DIFFUSION_PART.findall(rest)
    if "".join(f"_{n}{v}" for n, v in parts) == rest:
        role["key"] = "diffusion_scheduler" + rest
        for name, value in parts:
            role[_DIFFUSION_FIELD[name]] = int(value)
    else:  # an unknown suffix from a future version: kept verbatim in the key
        role["key"] = "diffusion_scheduler" + re.sub(r"[^A-Za-z0-9_]", "_", rest)
    return role


def parse_role(cmdline: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The SGLang role of a process from its command line / title, or None when it has none.

    Returns {"kind": ..., "key": stable key, and "tp"/"dp"/"pp"/"ep"/... ints when titled}.
    """
    title = title_of(cmdline).strip()
    match = _TITLE.match(title)
    if match:
        what, rest = match.group("what"), match.group("rest")
        role: Dict[str, Any] = {"kind": _KINDS[what]}
        if what == "tokenizer_worker":
            # The suffix is ":<pid>": volatile, so the key is numbered later (tokenizer_worker_0...).
            role["key"] = "tokenizer_worker"
            role["numbered"] = True
            return role
        if what == "scheduler":
            parts = _PART.findall(rest)
            if "".join(f"_{n}{v}" for n, v in parts) != rest:
                # Unknown suffix from a future version: keep it verbatim in the key.
                role["key"] = "scheduler" + re.sub(r"[^A-Za-z0-9_]", "_", rest)
            else:
                role["key"] = "scheduler" + rest
            for name, value in parts:
                role[_PART_FIELD[name]] = int(value)
            return role
        role["key"] = what
        return role
    match = _DIFFUSION.match(title)
    if match:
        return _diffusion_role(match.group("rest"))
    if is_sglang_main(cmdline):
        return {"kind": "main", "key": "sglang-main"}
    return None


def helper_role(cmdline: Sequence[str]) -> Optional[Dict[str, Any]]:
    """multiprocessing's helper processes (resource tracker, forkserver) by what they are, not numbered among
    the program's own: the number of a python-N would depend on which processes each capture saw."""
    from envsnap.model.argv import multiprocessing_helper

    helper = multiprocessing_helper([a for a in cmdline if a])
    return {"kind": "other", "key": helper.replace("_", "-")} if helper else None


def runs_another_package(cmdline: Sequence[str]) -> bool:
    """True for `python -m pkg.module` with a top-level package other than sglang (`-m minisgl.engine`): that
    program is not SGLang's main process, whatever its children are titled."""
    args = [a for a in cmdline if a]
    for i, arg in enumerate(args[:6]):
        if arg == "-m" and i + 1 < len(args):
            return args[i + 1].split(".")[0] != "sglang"
    return False


def rank_role(environ: Optional[Dict[str, str]]) -> Optional[Dict[str, Any]]:
    """torchrun / mpirun workers: RANK (or OMPI/SLURM ranks) in the environment give a stable key."""
    if not environ:
        return None
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        value = environ.get(name, "")
        if value.isdigit():
            role: Dict[str, Any] = {"kind": "other", "key": f"rank{int(value)}", "rank": int(value)}
            local = environ.get("LOCAL_RANK", "")
            if local.isdigit():
                role["local_rank"] = int(local)
            return role
    return None


def safe_name(name: str) -> str:
    """A process name usable inside a key: no dots (flattened keys split on them) or spaces."""
    cleaned = re.sub(r"[^A-Za-z0-9_\-]+", "_", name or "").strip("_")
    return cleaned or "process"


class KeyAllocator:
    """Hands out unique stable keys: role keys as they are, numbered ones in order."""

    def __init__(self) -> None:
        self.used: Dict[str, int] = {}
        self.counters: Dict[str, int] = {}

    def numbered(self, base: str, sep: str = "_") -> str:
        n = self.counters.get(base, 0)
        while f"{base}{sep}{n}" in self.used:
            n += 1
        self.counters[base] = n + 1
        return self.take(f"{base}{sep}{n}")

    def take(self, key: str) -> str:
        """The key itself when free, else key#2, key#3... (a second server, an old record)."""
        if key not in self.used:
            self.used[key] = 1
            return key
        self.used[key] += 1
        candidate = f"{key}#{self.used[key]}"
        while candidate in self.used:
            self.used[key] += 1
            candidate = f"{key}#{self.used[key]}"
        self.used[candidate] = 1
        return candidate


def describe_ranks(roles: List[Dict[str, Any]]) -> str:
    """'TP0-7' / 'DP0-1 TP0-3' for a summary line."""
    out = []
    labels = {"ulysses": "U", "ring": "R", "cfg": "C"}
    for field in ("dp", "pp", "attn_cp", "moe_dp", "tp", "ep", "ulysses", "ring", "cfg"):
        values = sorted({r[field] for r in roles if isinstance(r.get(field), int)})
        if not values:
            continue
        label = labels.get(field, field.upper())
        if values == list(range(values[0], values[-1] + 1)) and len(values) > 1:
            out.append(f"{label}{values[0]}-{values[-1]}")
        else:
            out.append(label + ",".join(str(v) for v in values))
    return " ".join(out)
