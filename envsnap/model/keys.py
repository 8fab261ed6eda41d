"""The one place keys are made and read: what a difference is about (a Subject) as its readable view key, the
flattened snapshot keys ("<section>.<path>", snapshot.flatten) the volatility rules read, and which of the two
spaces a rule's pattern belongs to.

Two key spaces, never mixed by hand:

  view keys   what a diff shows and the weighted rules match: "env.NCCL_PROTO", "workers.env.NCCL_PROTO",
              "workers.scheduler_TP0.cmdline", "gpu.0.clocks.max.sm", "sglang.args.tp_size", "integrity.<file>";
              a merged multi-node snapshot's are qualified by their node ("node-a/env.NCCL_PROTO");
  flat keys   where a value sits in the snapshot, the volatile rules' space: "env.vars.NCCL_PROTO",
              "processes.processes.<process>.environ.NCCL_PROTO", "nvidia.gpus.0.clocks.max.sm",
              "sglang.server_args.tp_size", "packages.integrity.modified.<file>".

A section no view renames (host, torch, a new collector's) has one key in both spaces: `<section>.<path>`.
Everything outside this module builds a key from a Subject or through one of the helpers below, and takes
one apart only through the Subject it came with.
"""
from __future__ import annotations

import re
from typing import AbstractSet, Any, Callable, Container, Dict, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple

from envsnap.format import natural_key

# ---------------------------------------------------------------- what a key is about


class Subject(NamedTuple):
    """What a view key is about, as fields (no caller takes a key string apart).

    where: env | workers | parent_only | in_process | nccl | nccl_conf (an environment variable, by whose
           environment it is; in_process: changed by a process itself; nccl_conf: set by NCCL's own config
           files) or process | command | library | integrity | packages | startup | git | files | files_read |
           patches | gpu | host | python | sglang | section | node | neighbour (everything else: the kind of
           thing the key names), all in WHERES; or the name of a section compared leaf by leaf (torch, host)
    entity: the thing itself: variable name, installed file, distribution, hook path, repository,
            GPU index ("*" / "0,1" for several), process key, field path, section name
    aspect: which part of the entity differs ("disagree" for workers that disagree; git: dirty,
            untracked, submodules, stash, commit, branch...; gpu/process/nccl: the field path)
    item: the file inside a repository (git dirty/untracked/submodules), else ""
    variable: the environment variable's name when the key is one, else None
    node: the node of a merged multi-node snapshot the key belongs to (a difference found on several:
          "node-a,node-c", or "*" on every node compared; analysis/compare/nodes.py), else None
    """
    where: str
    entity: str
    aspect: str = ""
    item: str = ""
    variable: Optional[str] = None
    node: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"where": self.where, "entity": self.entity, "aspect": self.aspect, "item": self.item,
                "variable": self.variable, "node": self.node}


# Every `where` a Subject is made with (Subject's docstring says what each is about); a section compared leaf by
# leaf (host, torch, a new collector's: analysis/compare/views._leaf_view) has its section's name besides.
# tests/analysis/compare/test_displays.py checks that no Subject is made with another, and that each is worded
# by one display (analysis/compare/displays).
WHERES = frozenset({"env", "workers", "parent_only", "in_process", "nccl", "nccl_conf", "process", "command",
                    "library", "integrity", "packages", "startup", "git", "files", "files_read", "patches",
                    "gpu", "host", "python", "sglang", "section", "node", "neighbour"})


def env_subject(where: str, name: str, aspect: str = "") -> Subject:
    """An environment variable, by whose environment it is (env, workers, parent_only, nccl, nccl_conf)."""
    return Subject(where, name, aspect=aspect, variable=name)


def is_parent_only(subject: Subject) -> bool:
    """Whether a subject is a variable a parent process had that its workers do not run with."""
    return subject.where == "parent_only"


def is_workers_env(subject: Subject) -> bool:
    """Whether a subject is one of the workers' variables as their view keys them: agreed on, disagreed on, or a
    parent's they do not run with (all of them under "workers.")."""
    return subject.where in ("workers", "parent_only")


def process_of(subject: Subject) -> Optional[str]:
    """The process key of a subject about one process (its presence, a field of it, an item of its command line,
    a module it loaded, a variable it changed in-process: workers_view._process_keys), else None."""
    return subject.entity if subject.where in ("process", "in_process") else None


def is_gpu(subject: Subject) -> bool:
    """Whether a subject is about the GPUs: one GPU (its presence, a field of it), the driver, the topology."""
    return subject.where == "gpu"


def is_instance_field(subject: Subject) -> bool:
    """Whether a subject is a field of one GPU or of one process, named by its entity: the same change on several
    of them reads as one difference (analysis/compare/diff.py merges them)."""
    one = (subject.where == "gpu" and subject.entity.isdigit()) or subject.where == "process"
    return one and bool(subject.aspect)


DISAGREE = "disagree"  # the aspect of a variable (or NCCL field) the instances disagree on
# A command line's items, as aspects of its process or of the benchmark command: "program", "flag.<flag>",
# "arg.<n>" (analysis/compare/flags.py); a process's modules: "shadowed.<module>", "module.<module>".
PROGRAM, FLAG, ARG = "program", "flag", "arg"
SHADOWED, MODULE = "shadowed", "module"


def aspect(kind: str, name: str = "") -> str:
    """An aspect naming one of several things of a kind ("flag.--tp", "shadowed.torch"); the kind alone
    without a name ("program")."""
    return f"{kind}.{name}" if name else kind


def aspect_kind(text: str) -> str:
    """The kind of an aspect that names one thing of a kind ("flag" of "flag.--tp"), else ""."""
    kind, dot, _ = text.partition(".")
    return kind if dot else ""


def aspect_parts(text: str) -> Tuple[str, str]:
    """(kind, name) of an aspect (aspect's reverse): ("flag", "--tp"), ("program", "")."""
    kind, _, name = text.partition(".")
    return kind, name


COMMAND_PROCESS = "command/"  # model/workers.py's key prefix of the `envsnap run` command's own processes
# A process's aspects whose key part is spelled otherwise (the module it loaded from another file, or that
# shadowed another): "<process>.modules.shadowed.<name>", "<process>.modules.elsewhere.<name>".
_PROCESS_ASPECTS = {SHADOWED: "modules.shadowed", MODULE: "modules.elsewhere"}


def command_process(name: str) -> str:
    """The process key (model/workers.py) of the `envsnap run` command's own process `name`."""
    return f"{COMMAND_PROCESS}{name}"


def _after(prefix: str, text: str) -> Optional[str]:
    """`text` without `prefix`, or None when it does not start with it (the reverse of a prefixed key)."""
    return text[len(prefix):] if text.startswith(prefix) else None


def command_process_name(process: str) -> Optional[str]:
    """The run command's own process name in a process key (command_process's reverse), or None."""
    return _after(COMMAND_PROCESS, process)


RUN_PROCESS = "run/"  # the libraries section's key prefix of the run command's own processes (run_processes)
_RUN_RECORD = re.compile(r"(\d+)/(.+)")  # a probe record of one run of `envsnap run`: "<run>/<process>"


def run_process(key: str) -> str:
    """The libraries view's process key of the run command's own process `key` (its run_processes entry)."""
    return f"{RUN_PROCESS}{key}"


def run_process_name(process: str) -> Optional[str]:
    """The run command's own process in a libraries process key (run_process's reverse), or None."""
    return _after(RUN_PROCESS, process)


def run_process_words(process: str) -> str:
    """A libraries process key as a reader reads it: the run command's own say so."""
    name = run_process_name(process)
    return process if name is None else f"{name} (the benchmark command)"


def record_process(key: str) -> str:
    """The process of a probe record key, without the run it was seen in ("3/python-0" -> "python-0")."""
    match = _RUN_RECORD.fullmatch(key)
    return match.group(2) if match else key


def process_base(process: str) -> str:
    """A process's own view key (its presence key, and the prefix of its fields'): "workers.<process>" for
    the server's, "command.<name>" for the `envsnap run` command's own ("command/<name>")."""
    name = command_process_name(process)
    return f"workers.{process}" if name is None else f"command.{name}"


def _process_key(process: str, text: str) -> str:
    base = process_base(process)
    if not text:
        return base
    kind, name = aspect_parts(text)
    spelled = _PROCESS_ASPECTS.get(kind)
    return f"{base}.{text}" if spelled is None or not name else f"{base}.{spelled}.{name}"


def _neighbour_key(subject: Subject) -> str:
    # singular "neighbour": the "neighbours" section's own fields are volatile, these are not
    if subject.aspect == "gpu":
        return f"neighbour.gpu.{subject.item}.{subject.entity}"
    if subject.aspect == "steal":
        return "neighbour.steal"
    return f"neighbour.cpu.{subject.entity}"


def _joined(head: str, *rest: str) -> str:
    """The non-empty parts after `head`, joined to it as flat keys join them (called for most keys: no list
    is built for the common key of two parts)."""
    if all(rest):
        return ".".join((head,) + rest)
    return ".".join((head,) + tuple(p for p in rest if p))


def view_key(subject: Subject) -> str:
    """The readable key of what a subject names (unqualified: `qualify` adds a node)."""
    where, entity, part = subject.where, subject.entity, subject.aspect
    if where == "env":
        return f"env.{entity}"
    if where == "workers":
        return f"workers.{DISAGREE if part == DISAGREE else 'env'}.{entity}"
    if where == "parent_only":
        return f"workers.parent_only.{entity}"
    if where == "nccl_conf":
        return f"nccl_conf.{entity}"
    if where == "nccl":  # NCCL's logged facts, agreed by every rank or not; "env.NAME": a variable it read
        path = f"env.{entity}" if subject.variable is not None else entity
        return f"nccl.{DISAGREE}.{path}" if part == DISAGREE else f"nccl.{path}"
    if where in ("process", "in_process"):
        return _process_key(entity, part)
    if where == "command":  # the benchmark command `envsnap run` ran: "run", "run.flag.--x"
        return _joined(entity, part)
    if where == "gpu":  # "gpu.driver_version" (entity "driver"), "gpu.0", "gpu.0.clocks.max.sm", "gpu.topology.x"
        return f"gpu.{part}" if entity == "driver" else _joined("gpu", entity, part)
    if where == "sglang":
        return f"sglang.args.{entity}" if part == "args" else f"sglang.{entity}"
    if where == "library":
        return library_key(entity, part)
    if where == "section":  # a section's status
        return f"{entity}.{part}"
    if where == "node":  # a node one side lacks (qualified by that node)
        return "node"
    if where == "neighbour":
        return _neighbour_key(subject)
    # files, python, startup, packages, integrity, git, patches, and a section compared leaf by leaf
    return _joined(where, entity, part, subject.item)


# Keys other modules look up by name.

def env_key(name: str) -> str:
    """The capturing shell's variable ("env.NAME"): the key the environment rules are looked up by."""
    return view_key(env_subject("env", name))


def worker_env_key(name: str, disagree: bool = False) -> str:
    """What the TP workers ran with: "workers.env.NAME" (all agree) or "workers.disagree.NAME"."""
    return view_key(env_subject("workers", name, DISAGREE if disagree else ""))


def parent_only_key(name: str) -> str:
    """A variable a parent had that the workers do not run with ("workers.parent_only.NAME")."""
    return view_key(env_subject("parent_only", name))


# An edited installed file's key: view_key(Subject("integrity", rel)), spelled out (tests/model/test_keys.py
# checks the two agree) because a broken install's tens of thousands of entries are keyed in one loop.
INTEGRITY_PREFIX = "integrity."


def integrity_key(rel: str) -> str:
    """An edited installed file's key ("integrity.<file under site-packages>")."""
    return INTEGRITY_PREFIX + rel


# Every integrity key, as a rule's pattern: the catch-all rule of an edited installed file no rule names.
INTEGRITY_ANY = integrity_key("*")


def integrity_file(key: str) -> Optional[str]:
    """The installed file an integrity key names (integrity_key's reverse), or None for another key."""
    return _after(INTEGRITY_PREFIX, key)


def integrity_entry(rel: str, dist: str, taken: Container[str]) -> str:
    """An edited installed file's name in the integrity table: its RECORD path, or "<path> [<dist>]" for the rare
    clash (two site directories, one path) where `taken` already holds the path."""
    return rel if rel not in taken else f"{rel} [{dist}]"


def integrity_entry_rel(entry: str, dist: str) -> str:
    """The RECORD path an integrity table entry names (integrity_entry's reverse)."""
    suffix = f" [{dist}]"
    return entry[:-len(suffix)] if dist and entry.endswith(suffix) else entry


def package_key(dist: str) -> str:
    """An installed distribution's key ("packages.<canonical name>")."""
    return view_key(Subject("packages", dist))


def sglang_arg_key(dest: str) -> str:
    """A server argument's key ("sglang.args.<dest>"), by its argparse dest."""
    return view_key(Subject("sglang", dest, "args"))


def within(entity_keys: Iterable[str]) -> Callable[[str], bool]:
    """A test of whether a key is one of the keys of the entities these presence keys stand for (a repository's
    commit and dirty files, a process's fields, a GPU's)."""
    prefixes = tuple(k + "." for k in entity_keys)
    return lambda key: key.startswith(prefixes)


def series_key(series: str, who: str) -> str:
    """One process's own run series in the mechanism's factors ("cpus.<process>" beside the runs' "cpus")."""
    return f"{series}.{who}"


def series_of(name: str) -> Tuple[str, str]:
    """(series, process) of a mechanism factor's name (series_key's reverse); process "" for the runs' own."""
    series, _, who = name.partition(".")
    return series, who


def head(key: str) -> str:
    """A key's first part: the section (flat) or category-like prefix (view) it is under."""
    return key.partition(".")[0]


def below_head(key: str) -> str:
    """A key without its first part ("integrity.sglang/x.py" -> "sglang/x.py"): what it names there."""
    return key.partition(".")[2]


def last_part(key: str) -> str:
    """A key's last part ("workers.env.NCCL_PROTO" -> "NCCL_PROTO"); the key itself without a dot."""
    return key.rsplit(".", 1)[-1]


def at_or_below(key: str, prefix: str) -> bool:
    """Whether a key is `prefix` itself or one of its parts ("clocks.max.sm" is at or below "clocks.max")."""
    return key == prefix or key.startswith(prefix + ".")


def path_key(path: Sequence[str]) -> str:
    """A path inside a section or an entity as one key ("clocks.max.sm"): the parts joined as flat keys join them."""
    return ".".join(path)


def nested_keys(obj: Any, prefix: str = "") -> Dict[str, Any]:
    """Nested dicts as {dotted path: value}, in natural order, for a side-by-side table: a list of scalars stays
    one value, a list holding dicts or lists is walked by index, an empty dict below the top stays {}."""
    out: Dict[str, Any] = {}
    if isinstance(obj, dict):
        if not obj and prefix:
            out[prefix] = {}
        for name in sorted(obj, key=lambda k: natural_key(str(k))):
            out.update(nested_keys(obj[name], flat_key(prefix, str(name)) if prefix else str(name)))
    elif isinstance(obj, list) and any(isinstance(item, (dict, list)) for item in obj):
        for index, item in enumerate(obj):
            out.update(nested_keys(item, flat_key(prefix, str(index))))
    else:
        out[prefix] = obj
    return out


def qualify(node: Optional[str], key: str) -> str:
    """The node-qualified form of a key ("node-a/env.NCCL_ALGO"); unchanged without a node."""
    return key if node is None else f"{node}/{key}"


# ---------------------------------------------------------------- flat keys: where a value sits


def library_key(process: str, name: str) -> str:
    """The view key of an object a process mapped (Subject("library", process, name)): "libraries.<process>.<name>"."""
    return f"libraries.{process}.{name}"


def flat_key(head: str, *path: str) -> str:
    """A value's flattened snapshot key, as snapshot.flatten writes it (parts joined by '.'): `head` is its
    section, or the flat key of what holds it."""
    return ".".join((head,) + path)


def env_var_flat(name: str) -> str:
    return flat_key("env", "vars", name)


def process_flat(walk_key: str, *path: str) -> str:
    """A walked process's field ("processes.processes.<key>.environ.NAME")."""
    return flat_key("processes", "processes", walk_key, *path)


def probe_record_flat(probe_key: str, *path: str, records: str = "records") -> str:
    """A probe record's field; `records`: "records" (the server's) or "command_records" (the run command's)."""
    return flat_key("probe", records, probe_key, *path)


def gpu_flat(index: Any, *path: str) -> str:
    """A GPU's field ("nvidia.gpus.<index>.clocks.max.sm")."""
    return flat_key("nvidia", "gpus", str(index), *path)


def nccl_rank_flat(rank: str, *path: str) -> str:
    """What NCCL's log said for one rank ("nccl.ranks.<rank>.env.NAME")."""
    return flat_key("nccl", "ranks", rank, *path)


def nccl_field_subject(path: str, disagree: bool) -> Subject:
    """What a field NCCL logged for every rank is about (`path` under nccl.ranks.<rank>): "env.NAME" is a
    variable NCCL read, anything else what it did ("transports.0-1", "channels")."""
    aspect = DISAGREE if disagree else ""
    section, _, name = path.partition(".")
    if section == "env" and name:
        return env_subject("nccl", name, aspect)
    return Subject("nccl", path, aspect)


def nccl_conf_flat(name: str) -> str:
    """A setting of NCCL's config files ("nccl_conf.settings.NAME")."""
    return flat_key("nccl_conf", "settings", name)


def integrity_flat(state: str, rel: str) -> str:
    """An installed file's integrity entry (state: modified | missing | rewritten_scripts)."""
    return flat_key("packages", "integrity", state, rel)


class EnvSource(NamedTuple):
    """One environment a snapshot recorded, as bisect compares them: the shell's (env), what NCCL's config
    files set (nccl_conf), a walked process's /proc environ (process), a probe record's (probe: at start or
    at init). `label` is how it is named to people ("workers.<process>", "probe.<record>.<field>")."""
    kind: str  # env | nccl_conf | process | probe
    key: str = ""  # the process's walk key, or the probe record's key
    field: str = ""  # the probe record's field (env_at_start, env_at_init)

    @property
    def label(self) -> str:
        if self.kind == "process":
            return f"workers.{self.key}"
        if self.kind == "probe":
            return f"probe.{self.key}.{self.field}"
        return self.kind

    def flat(self, name: str) -> str:
        """The flat key of variable `name` in this environment."""
        if self.kind == "env":
            return env_var_flat(name)
        if self.kind == "nccl_conf":
            return nccl_conf_flat(name)
        if self.kind == "process":
            return process_flat(self.key, "environ", name)
        return probe_record_flat(self.key, self.field, name)


# ---------------------------------------------------------------- which space a rule's pattern is in

FLAT, VIEW, ANY = "flat", "view", "any"
_WILDCARDS = frozenset("*?[")
# First parts of view keys no snapshot section has.
_VIEW_ONLY_HEADS = frozenset({"workers", "command", "run", "gpu", "integrity", "startup", "neighbour", "node"})
# Sections the view renames, with the first part of their view keys: a section here whose name is no view
# key's first part (processes, probe, nvidia, neighbours) has flat keys only; the others share the name, and
# the second part tells (a data field of the section: flat; anything else: what the view names).
_RENAMED_SECTIONS = frozenset({"env", "processes", "probe", "nvidia", "nccl", "nccl_conf", "packages", "git",
                               "files", "python", "sglang", "libraries", "patches", "neighbours"})
_SHARED_HEADS = frozenset({"env", "nccl", "nccl_conf", "packages", "git", "files", "python", "sglang", "libraries",
                           "patches"})
# View keys that are their value's flat key too (the view copies these fields as they are), and the fields
# whose view key is both (nccl.env.NAME: a variable every rank agrees on, or the log's own top-level one).
# The interpreter's fields the python view copies as they are (analysis/compare/views._python_view).
PYTHON_FIELDS = ("version", "implementation", "executable", "prefix", "base_prefix", "in_venv", "sys_path")
_MIRRORED = frozenset({*(f"python.{name}" for name in PYTHON_FIELDS), "sglang.version", "nccl.version",
                       "nccl.ranks"})
_MIRRORED_FIELDS = frozenset({"nccl.env"})
# Sections whose view keys' second parts are a closed set: any other second part is a snapshot path.
_VIEW_SECOND_PARTS = {"sglang": frozenset({"args", "version"}),
                      "python": frozenset(k.partition(".")[2] for k in _MIRRORED if k.startswith("python."))}


def pattern_space(pattern: str, data_fields: Mapping[str, AbstractSet[str]]) -> str:
    """Which keys a rule's glob can be about: FLAT (snapshot paths the view renames), VIEW (readable keys
    no snapshot path has) or ANY (both, or no telling: "*.NCCL_PROTO", "host.cpu.model").
    `data_fields`: each section's top-level data fields (its collector's SHAPE)."""
    parts = pattern.split(".")
    head = parts[0]
    if _WILDCARDS & set(head):
        return ANY
    if head in _VIEW_ONLY_HEADS:
        return VIEW
    if head not in _RENAMED_SECTIONS:
        return ANY  # a section compared leaf by leaf: its view keys are its flat keys
    if head not in _SHARED_HEADS:
        return FLAT
    if len(parts) < 2 or _WILDCARDS & set(parts[1]):
        return ANY
    first_two = f"{head}.{parts[1]}"
    if (len(parts) == 2 and first_two in _MIRRORED) or first_two in _MIRRORED_FIELDS:
        return ANY
    closed = _VIEW_SECOND_PARTS.get(head)
    if closed is not None:
        return VIEW if parts[1] in closed else FLAT
    return FLAT if parts[1] in data_fields.get(head, ()) else VIEW


def spaces_agree(declared: str, found: str) -> bool:
    """Does a rule declared for `declared` keys fit a pattern found in `found` (pattern_space)? A rule for
    either space must have a pattern either can match; one for a single space, no pattern of the other."""
    if declared == ANY:
        return found == ANY
    return found in (ANY, declared)
