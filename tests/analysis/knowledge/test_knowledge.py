"""The field-rule table: size, sources, sanity of every rule, and the fast first-match lookup."""
from __future__ import annotations

import ast
import fnmatch
import importlib
import io
import random
import re
import tokenize
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

import pytest
from helpers import REPO_ROOT

from envsnap.analysis import knowledge
from envsnap.capture.collectors import SECTION_RULES, SECTION_SHAPES
from envsnap.model import snapshot, store

COMPONENTS = {knowledge.COMMUNICATION, knowledge.KERNELS, knowledge.GRAPHS, knowledge.DRAFTER, knowledge.MEMORY,
              knowledge.CPU_HOST, knowledge.NONE}
SOURCE_HINTS = ("docs.nvidia.com", "pytorch.org", "sglang", "NCCL env page", "CUDA env vars", "cuBLAS", "NVML",
                "kernel docs", "ld.so", "OpenMP", "Python docs", "PyTorch", "Hugging Face", "MPS", "Triton",
                "shells", "sched_setaffinity", "OpenBLAS", "NCCL docs", "environ.py", "server_args.py", "nvmlDevice",
                "Linux Documentation", "bash(1)", "torch/distributed", "NVSHMEM docs", "README")


KNOWLEDGE_DIR = REPO_ROOT / "envsnap" / "analysis" / "knowledge"


def _comment_lines(path: Path) -> Dict[int, str]:
    """{line: text} of every comment of a module (tokenize: a `#` inside a string is no comment)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return {tok.start[0]: tok.string for tok in tokens if tok.type == tokenize.COMMENT}


def _table_entries(path: Path) -> List[Tuple[str, int, ast.AST]]:
    """(pattern, line, enclosing table) of every entry of every table in a module: a call or a tuple, element
    of a list or tuple, whose first argument is a string ("NCCL_PROTO" of `_env("NCCL_PROTO", ...)`, the
    pattern of `rule(...)`, `volatile(...)`, `Requirement(...)`), or such a call made once per item
    (`*(rule(f"{who}.x", ...) for who in ...)`). The pattern is a regular expression matching that string; an
    f-string's fields match any text. Found by the module's syntax, not by what a table's declaration says, so
    a renamed or re-annotated table is read all the same."""
    found: List[Tuple[str, int, ast.AST]] = []
    for table in ast.walk(ast.parse(path.read_text())):
        if not isinstance(table, (ast.List, ast.Tuple)):
            continue
        for entry in table.elts:
            if isinstance(entry, ast.Starred) and isinstance(entry.value, (ast.GeneratorExp, ast.ListComp)):
                entry = entry.value.elt
            first = (entry.args[:1] if isinstance(entry, ast.Call) else
                     entry.elts[:1] if isinstance(entry, ast.Tuple) else [])
            if not first:
                continue
            if isinstance(first[0], ast.Constant) and isinstance(first[0].value, str):
                found.append((re.escape(first[0].value), entry.lineno, table))
            elif isinstance(first[0], ast.JoinedStr):
                pattern = "".join(re.escape(part.value) if isinstance(part, ast.Constant) else ".+"
                                  for part in first[0].values)
                found.append((pattern, entry.lineno, table))
    return found


def _declared_under_comments(path: Path, literals: Iterable[str]) -> Tuple[int, List[str], List[str]]:
    """(entries checked, entries with no comment between their table's opening and them, the comments of
    those tables, each run of consecutive comment lines as one) for the table entries named by `literals`:
    every one must be found, or the check would pass over a rule it never saw."""
    entries, comments = _table_entries(path), _comment_lines(path)
    found = {literal: [(line, table) for pattern, line, table in entries if re.fullmatch(pattern, literal)]
             for literal in literals}
    missing = [literal for literal, where in found.items() if not where]
    assert missing == [], f"{path.name}: not found as a table entry: {missing}"
    def opening(table: ast.AST) -> int:
        """The table's first line, or that of the comment right above it (the source of a table of one)."""
        start = table.lineno
        while start - 1 in comments:
            start -= 1
        return start

    bare, tables, checked = [], {}, 0
    for literal, where in found.items():
        for line, table in where:
            checked += 1
            tables[id(table)] = table
            if not any(opening(table) <= at < line for at in comments):
                bare.append(f"{path.name}:{line} {literal}")
    runs: List[str] = []
    for table in tables.values():
        current: List[str] = []
        for at in range(table.lineno, table.end_lineno + 1):
            if at in comments:
                current.append(comments[at])
            elif current:
                runs.append(" ".join(current))
                current = []
    return checked, bare, runs


def _rule_literal(rule) -> str:
    """How a rule's declaration starts: `_env(NAME, ...)` makes the pattern `*.NAME`; the others name the pattern."""
    return rule.pattern[2:] if rule.category == "env" and rule.pattern.startswith("*.") else rule.pattern


def test_knowledge_table_has_at_least_60_sound_entries():
    rules = [r for r in knowledge.all_rules() if not r.volatile]
    assert len(rules) >= 60
    patterns = [r.pattern for r in knowledge.all_rules()]
    assert len(patterns) == len(set(patterns)), "a duplicate pattern can never match (first match wins)"
    for rule in rules:
        assert 0.0 < rule.weight <= 1.0, rule
        assert rule.component in COMPONENTS, rule
        assert rule.why and len(rule.why) < 160, rule
    for name in ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE",
                 "NCCL_MIN_NCHANNELS", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "CUDA_LAUNCH_BLOCKING",
                 "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING",
                 "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                 "LD_PRELOAD", "LD_LIBRARY_PATH", "SGLANG_ENABLE_SPEC_V2", "TORCH_NCCL_BLOCKING_WAIT"):
        rule = knowledge.rule_for(f"workers.env.{name}")
        assert rule.pattern != "*" and rule.weight >= 0.2 or name.startswith("NCCL_DEBUG"), name
    for arg in ("speculative_num_steps", "attention_backend", "cuda_graph_max_bs", "disable_cuda_graph",
                "enable_torch_compile", "disable_custom_all_reduce", "tp_size", "mem_fraction_static"):
        # 0.5.23 splits cuda_graph_max_bs into *_decode/*_prefill: one rule covers the family.
        assert knowledge.rule_for(f"sglang.args.{arg}").pattern in (f"sglang.args.{arg}", f"sglang.args.{arg}*")


def _declared_rules():
    """(module, rules it declares) of every table of priors, volatile fields left out (a timestamp needs no
    source): the knowledge package's own (environment variables, cross-section rules) and each collector's
    RULES (its own fields)."""
    yield KNOWLEDGE_DIR / "rules.py", knowledge.KNOWLEDGE_RULES + knowledge.CROSS_SECTION_RULES
    for name, declared in SECTION_RULES.items():
        module = importlib.import_module(f"envsnap.capture.collectors.{name}")
        yield Path(module.__file__), [r for r in declared.rules if not r.volatile]


def test_every_rule_says_why_and_decides_some_key():
    """Behaviour first: every rule (volatile ones too) says why, and no rule is dead: a key made from its
    own pattern gets it from rule_for (an earlier, broader rule of the first-match table would take every
    key it could match, and its `why` would never be shown)."""
    heads = ["env", "workers.env", "nccl.env", "workers.scheduler_TP0.env"]
    dead = []
    for rule in knowledge.all_rules():
        assert rule.why.strip(), rule
        literal = rule.pattern.replace("*", "x").replace("?", "q")
        keys = [literal] + ([f"{head}.{literal[2:]}" for head in heads] if rule.pattern.startswith("*.") else [])
        if not any(knowledge.rule_for(key) == rule for key in keys):
            dead.append((rule.pattern, knowledge.rule_for(literal).pattern))
    assert dead == []


def test_every_rule_sits_under_a_source_comment():
    """No behaviour shows where a prior came from, so this reads the source: every declared rule object is
    found as an entry of a table in the module that declares it, with a comment above it in that table,
    and most comments name a source."""
    checked, bare, comments = 0, [], []
    for path, rules in _declared_rules():
        n, missing, runs = _declared_under_comments(path, sorted({_rule_literal(r) for r in rules}))
        checked, bare, comments = checked + n, bare + missing, comments + runs
    assert bare == [], "rules without a source comment above them"
    assert checked >= 60
    sourced = [c for c in comments if any(h in c for h in SOURCE_HINTS)]
    assert len(sourced) >= 0.8 * len(comments), [c for c in comments if c not in sourced]


def test_each_collector_declares_its_section():
    """A collector's module says what its section is: its shape and its rules; its rules name its own keys."""
    for name, declared in SECTION_RULES.items():
        assert declared.category and declared.compares, name
        assert declared.component in COMPONENTS, name
        for rule in declared.rules:
            assert rule.volatile or rule.category, (name, rule)
            assert not rule.pattern.startswith("*."), (name, rule.pattern)  # cross-cutting: knowledge.py's
    assert set(SECTION_RULES) == set(SECTION_SHAPES)


def _naive_rule(key):
    for rule in knowledge.all_rules():
        if fnmatch.fnmatchcase(key, rule.pattern):
            return rule
    return None


def test_indexed_lookup_is_first_match_wins():
    example = store.load(str(REPO_ROOT / "snapshots" / "eagle3-tp8-bad.json"))
    keys = list(snapshot.flatten(example))[::7]
    keys += ["env.NCCL_PROTO", "workers.env.NCCL_NVLS_ENABLE", "nccl.env.NCCL_ALGO", "env.vars.OLDPWD", "env._",
             "integrity.sglang/srt/entrypoints/engine.py", "integrity.sglang/srt/layers/moe/topk.py",
             "integrity.other/x.py", "packages.torch", "packages.nvidia-nccl-cu12", "gpu.*.power.limit_w",
             "gpu.0.clocks.max.sm", "nvidia.gpus.3.temperature.gpu_c", "sglang.args.tp_size", "git./r.commit",
             "files./etc/x", "unknown.key"]
    for key in keys:
        naive = _naive_rule(key)
        got = knowledge.rule_for(key)
        if naive is None:
            assert got.pattern == "*", key
        else:
            assert got == naive, key


@pytest.mark.parametrize("key,volatile", [
    ("nvidia.gpus.0.temperature.gpu_c", True), ("processes.processes.scheduler_TP0.pid", True),
    ("env.vars.SGLANG_RUN_ID", True), ("probe.records.x.env_at_init.SGLANG_RUN_ID", True),
    ("env.vars._", True), ("env.vars.OLDPWD", True), ("host.memory.available_bytes", True),
    ("env.vars.NCCL_PROTO", False), ("packages.dists.torch.version", False),
    ("packages.integrity.modified.sglang/srt/layers/moe/topk.py.actual_sha256", False),
])
def test_volatility(key, volatile):
    assert knowledge.is_volatile(key) is volatile


def test_domain_constants_are_consistent():
    for name in knowledge.ENGINE_SET_ENV:
        assert re.fullmatch(r"[A-Z0-9_]+", name)
    assert "sglang" in knowledge.HOT_PATH_PACKAGES and "torch" in knowledge.HOT_PATH_PACKAGES
    # Hot-path edits outrank unrelated package bumps, by prior alone.
    assert knowledge.rule_for("integrity.sglang/srt/layers/moe/topk.py").weight > \
        knowledge.rule_for("packages.requests").weight * 5


def test_bucketed_lookup_equals_first_match_in_table_order():
    """rule_for's index (last-part dict, literal prefixes, one matcher per rule) must give exactly the
    first rule in table order that fnmatch accepts, for keys built from every pattern."""
    import fnmatch as _fnmatch

    from envsnap.analysis import knowledge

    rules = knowledge.all_rules()

    def naive(key):
        return next((r for r in rules if _fnmatch.fnmatchcase(key, r.pattern)), None)

    heads = ["env", "workers.scheduler_TP0.env", "nccl.env", "integrity", "gpu.0", "host", "packages",
             "git./repo", "sglang.args", "files", "startup", "processes.processes.x", "nvidia.gpus.0"]
    keys = set()
    for rule in rules:
        literal = rule.pattern.replace("*", "x").replace("?", "q")
        keys.add(literal)
        keys.update(f"{head}.{literal.rsplit('.', 1)[-1]}" for head in heads)
    mismatches = []
    for key in sorted(keys):
        expected = naive(key)
        got = knowledge.rule_for(key)
        if (expected is None and got.pattern != "*") or (expected is not None and got != expected):
            mismatches.append((key, got.pattern, expected and expected.pattern))
    assert len(keys) > 1000 and mismatches == []


def _comment_blocks():
    """Every run of consecutive comment lines of the knowledge package, as one text."""
    blocks = []
    for path in sorted(KNOWLEDGE_DIR.glob("*.py")):
        current, previous = [], None
        for line, text in sorted(_comment_lines(path).items()):
            if current and line != previous + 1:
                blocks.append(" ".join(current))
                current = []
            current.append(text)
            previous = line
        if current:
            blocks.append(" ".join(current))
    return blocks


def test_every_line_number_citation_names_the_version_it_was_read_from():
    """Line numbers move between releases (engine.py's _set_envs_and_config: 676 in sglang 0.5.5, 1878 in
    0.5.23): a comment that cites `file.py:<line>` names the version of the package it was read from."""
    cited = [b for b in _comment_blocks() if re.search(r"\.py:\d+", b)]
    assert cited
    unversioned = [b for b in cited if not re.search(r"\b(sglang|torch) \d+\.\d+(\.\d+)?\b|\b0\.5\.\d+\b", b)]
    assert unversioned == [], unversioned


@pytest.mark.parametrize("name, weighted", [
    # sglang 0.5.23 sets or reads these (sources beside each rule in knowledge.py).
    ("NVSHMEM_IB_ENABLE_IBGDA", True), ("NVSHMEM_DISABLE_LOCAL_ONLY_PROXY", True), ("EP_REUSE_NCCL_COMM", True),
    ("MC_FORCE_TCP", True), ("DG_JIT_USE_NVRTC", True), ("FLASHINFER_CUDA_ARCH_LIST", True),
    ("CUTE_DSL_ARCH", True), ("NCCL_GRAPH_MIXING_SUPPORT", True),
    # ... and these only log, cache or check: no effect on speed.
    ("CUTE_DSL_LOG_LEVEL", False), ("FLASHINFER_DISABLE_VERSION_CHECK", False), ("DG_JIT_CACHE_DIR", False),
])
def test_sglang_0523_variables_have_their_own_rules(name, weighted):
    rule = knowledge.rule_for(f"workers.env.{name}")
    assert rule.pattern != "*" and not rule.pattern.startswith("*.SGLANG"), rule
    assert (rule.weight >= 0.25 and rule.component != knowledge.NONE) if weighted else rule.weight <= 0.1, rule


@pytest.mark.parametrize("module, literals", [
    ("evidence.py", lambda: [r.pattern for r in knowledge.REQUIREMENTS]),
    ("evidence.py", lambda: [pattern for pattern, _ in knowledge.NATIVE_READERS]),
    ("evidence.py", lambda: [link.pattern for link in knowledge.SERIES_LINKS]),
    ("variables.py", lambda: [name for name in knowledge.VARIABLE_KINDS if name in ("linker", "allocator", "interpreter")]),
])
def test_every_evidence_table_entry_sits_under_a_source_comment(module, literals):
    """The ranking's evidence tables stand on sources like the field rules do (read from the source, as above)."""
    checked, bare, comments = _declared_under_comments(KNOWLEDGE_DIR / module, sorted(set(literals())))
    assert bare == [] and checked >= 3
    hints = SOURCE_HINTS + ("mallopt", "tunables", "rayon", "numexpr", "cgroup-v2", "taskset", "oneMKL", "cuDNN",
                            "CUDA programming guide", "Python/initconfig.c", "tokenizers")
    assert all(any(h in c for h in hints) for c in comments), [c for c in comments if not any(h in c for h in hints)]


def test_evidence_lookups_first_match_and_sanity():
    assert knowledge.requirement_for("workers.env.NCCL_PROTO").context == knowledge.NCCL_CONTEXT
    assert knowledge.requirement_for("workers.scheduler_TP0.changed_in_process.CUDA_LAUNCH_BLOCKING").context == \
        knowledge.CUDA_CONTEXT
    assert knowledge.requirement_for("env.OMP_NUM_THREADS").context == knowledge.THREADS_CONTEXT
    assert knowledge.requirement_for("packages.nvidia-nccl-cu12").context == knowledge.GPU_CONTEXT
    assert knowledge.requirement_for("env.EDITOR") is None
    assert knowledge.native_reader("NCCL_ALGO") == "libnccl" and knowledge.native_reader("APP_FLAG") is None
    assert knowledge.native_reader("PYTHONMALLOC").startswith("the interpreter")
    assert knowledge.series_link("env.OMP_NUM_THREADS").series == knowledge.PEAK_THREADS
    assert knowledge.series_link("env.NCCL_NTHREADS") is None  # GPU threads per block, not a host thread pool
    assert knowledge.series_link("host.cpu.usable").series == knowledge.CPU_SET
    for kind in knowledge.VARIABLE_KINDS.values():
        assert 0 < kind.prior < 0.5 and kind.component in COMPONENTS
    assert {kind for _, kind in knowledge.NAME_FAMILIES} <= set(knowledge.VARIABLE_KINDS)


def test_glob_matcher_means_exactly_what_fnmatchcase_means():
    """The tables' patterns are matched without compiling a regex per pattern: the answer must be
    fnmatch's for every pattern shape (literal, `*` anywhere and repeated, `?`, `[...]`)."""
    rng = random.Random(13)
    patterns = [r.pattern for r in knowledge.all_rules()] + [p for p, _ in knowledge.NAME_FAMILIES]
    patterns += ["".join(rng.choice("ab.*?_") for _ in range(rng.randint(1, 7))) for _ in range(3000)]
    patterns += ["a[bc]*", "*[!a]", "[*]x", "**", "*"]
    keys = ["".join(rng.choice("ab._*?") for _ in range(rng.randint(0, 9))) for _ in range(300)]
    keys += ["env.NCCL_ALGO", "workers.env.NCCL_PROTO", "gpu.0.clocks.sm", "*/env.X", ""]
    for pattern in patterns:
        match = knowledge.glob_matcher(pattern)
        for key in keys + [pattern]:
            assert match(key) == fnmatch.fnmatchcase(key, pattern), (pattern, key)
