"""ONE table of field rules, read by capture (volatility), diff, rank and report alike.

Each rule matches flattened snapshot keys (see snapshot.flatten: "<section>.<path>")
with an fnmatch pattern and says: which category the key belongs to, which part of
the inference stack it acts on, how likely a change in it is to change speed (prior
weight 0..1), whether it changes on every capture (volatile: ignored by diff unless
--all), and why it matters. The first matching rule wins: specific rules first.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import List, Optional, Tuple

# Components a difference can act on (the EAGLE-3 decomposition groups them).
COMMUNICATION = "communication"
KERNELS = "attention/kernels"
GRAPHS = "cuda-graphs/launch"
DRAFTER = "drafter"
MEMORY = "memory"
CPU_HOST = "cpu/host"
NONE = "none"


@dataclass(frozen=True)
class FieldRule:
    pattern: str
    category: str
    component: str = NONE
    weight: float = 0.1
    volatile: bool = False
    why: str = ""


def _v(pattern: str, why: str) -> FieldRule:
    """A volatile field: changes on every capture, says nothing about the environment."""
    return FieldRule(pattern, category="volatile", volatile=True, weight=0.0, why=why)


# Volatile fields: timestamps, pids, durations, temperatures, memory in use, current clocks.
VOLATILE_RULES: List[FieldRule] = [
    _v("*.elapsed_s", "how long the collector took"),
    _v("*.elapsed_ms", "how long the collector took"),
    _v("host.boot_time*", "changes at every reboot"),
    _v("host.uptime*", "grows every second"),
    _v("host.load_avg*", "instantaneous load"),
    _v("host.memory.available*", "memory in use"),
    _v("host.memory.free*", "memory in use"),
    _v("host.memory.used*", "memory in use"),
    _v("host.memory.buffers*", "memory in use"),
    _v("host.memory.cached*", "memory in use"),
    _v("host.cpu.freq_current*", "current CPU clock"),
    _v("host.cpu.current_mhz*", "current CPU clock"),
    _v("nvidia.gpus.*.temperature*", "GPU temperature"),
    _v("nvidia.gpus.*.fan*", "fan speed"),
    _v("nvidia.gpus.*.power.usage*", "current power draw"),
    _v("nvidia.gpus.*.power.draw*", "current power draw"),
    _v("nvidia.gpus.*.memory.used*", "GPU memory in use"),
    _v("nvidia.gpus.*.memory.free*", "GPU memory in use"),
    _v("nvidia.gpus.*.memory.reserved*", "GPU memory in use"),
    _v("nvidia.gpus.*.utilization*", "current utilisation"),
    _v("nvidia.gpus.*.clocks.current*", "current clocks move with load"),
    _v("nvidia.gpus.*.processes*", "processes using the GPU right now"),
    _v("nvidia.gpus.*.performance_state", "P-state follows load"),
    _v("nvidia.gpus.*.energy*", "energy counter grows"),
    _v("*.pid", "process ids differ per run"),
    _v("*.ppid", "process ids differ per run"),
    _v("*.create_time", "process start time"),
    _v("*.num_threads", "thread count moves at run time"),
    _v("*.threads", "thread count moves at run time"),
    _v("*.cpu_times*", "CPU time consumed"),
    _v("*.memory_info*", "memory in use"),
    _v("*.captured_at", "a timestamp"),
    _v("*.timestamp", "a timestamp"),
    _v("*.mtime", "modification time alone (content is hashed)"),
    _v("*.atime", "access time"),
    _v("sglang.internal_states*.last_gen_throughput", "a running measurement, not configuration"),
    _v("probe.records.*.written_at", "a timestamp"),
]

# Knowledge about what matters for speed (extended by the ranking work).
KNOWLEDGE_RULES: List[FieldRule] = []

# Fallback: category from the section name, low prior weight.
SECTION_CATEGORIES = {
    "host": ("host", CPU_HOST), "python": ("startup", NONE), "packages": ("packages", NONE),
    "git": ("git", NONE), "env": ("env", NONE), "nvidia": ("gpu", NONE), "torch": ("packages", NONE),
    "files": ("files", NONE), "processes": ("workers", NONE), "probe": ("workers", NONE),
    "nccl": ("nccl", COMMUNICATION), "sglang": ("sglang", NONE),
}


def all_rules() -> List[FieldRule]:
    return VOLATILE_RULES + KNOWLEDGE_RULES


@lru_cache(maxsize=None)
def _compiled() -> Tuple[Tuple["re.Pattern[str]", FieldRule], ...]:
    return tuple((re.compile(fnmatch.translate(r.pattern)), r) for r in all_rules())


@lru_cache(maxsize=200_000)
def rule_for(key: str) -> FieldRule:
    """The first rule whose pattern matches the flattened key, or the section's default."""
    for regex, rule in _compiled():
        if regex.match(key):
            return rule
    section = key.split(".", 1)[0]
    category, component = SECTION_CATEGORIES.get(section, (section, NONE))
    return FieldRule("*", category=category, component=component, weight=0.05)


def is_volatile(key: str) -> bool:
    return rule_for(key).volatile
