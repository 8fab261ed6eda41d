"""A snapshot as a *view*: per category, a flat dict of readable keys to small JSON values.

Keys read like "env.NCCL_PROTO", "workers.env.NCCL_PROTO", "integrity.sglang/srt/layers/moe/topk.py",
"packages.torch", "gpu.0.clocks.max.sm"; each remembers the flattened snapshot keys it came from
(snapshot.flatten format) so the volatility rules apply. A reader puts a value with the Subject it is about;
the key is the subject's (model/keys.py view_key), and flat keys are built there too: nothing here writes a
key by hand. Worker processes are aggregated on the
way: one "workers.env.X" when all TP workers agree, "workers.disagree.X" when they don't, and
"workers.parent_only.X" when a parent has a value of a performance-relevant variable the workers don't run
with (unset in the workers, or another value there):
the server's own parent process (set in-process after the TP workers started, the engine.py-patch
mistake: seen in its probe records or in a child it started later, never in /proc/PID/environ),
else the capturing shell.

One reader per kind of section (packages, git, GPUs, NCCL's log, libraries...) turning a snapshot into readable
keys, around the View type they share. The workers' view (processes and probe records) is workers_view.py; who
read which variable (evidence, not keys) is env_reads.py.
"""
from __future__ import annotations

from itertools import compress, repeat
from operator import ne
from typing import (
    Any,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from envsnap.analysis import knowledge
from envsnap.analysis.compare import flags, patch_status, workers_view
from envsnap.analysis.compare.env_reads import env_read_coverage, env_read_evidence
from envsnap.analysis.compare.view_model import MISSING, View, agree, leaves, norm, without_text
from envsnap.model import keys
from envsnap.model.keys import Subject, env_subject
from envsnap.model.owners import owner_text
from envsnap.model.snapshot import as_dict, section_data
from envsnap.model.workers import names_by_pid


def _ok(snap: Dict[str, Any], name: str) -> bool:
    section = (snap.get("sections") or {}).get(name)
    return isinstance(section, dict) and section.get("status") == "ok"


def usable_sections(snaps: Sequence[Dict[str, Any]]) -> Set[str]:
    names: Set[str] = set()
    for snap in snaps:
        names.update((snap.get("sections") or {}).keys())
    return {n for n in names if all(_ok(s, n) for s in snaps)}


def build_view(snap: Dict[str, Any], usable: Set[str], node: Optional[str] = None,
               modified_only: Optional[Set[str]] = None, builds: Optional[Set[str]] = None,
               hints: Optional[flags.Hints] = None) -> View:
    """The view of one snapshot (or of one node of a merged snapshot: `node` names it in every Subject).

    `modified_only`: the edited installed files (packages.integrity.modified) to keep, when the caller
    compares two views and knows which entries differ (modified_entries_differing): the thousands of
    a broken install edited alike on both sides are then no key of either view.
    `builds`: the distributions whose build is part of their value (comparable_builds: recorded on every
    side, at one version); none by default. `hints`: what every snapshot compared says about its command
    lines' flags (analysis/compare/flags.py), else this one's."""
    view = View(node=node, modified_only=modified_only, source=snap, builds=builds or set())
    data = {name: section_data(snap, name) for name in usable}
    declared = knowledge.section_rules()
    # The sections with a view of their own first; then every other section a collector declares, leaf
    # by leaf (a new collector's fields are compared without a line here).
    for name, builder in _BUILDERS:
        if name in data:
            builder(view, data[name])
    for name in sorted(n for n in data if n in declared and n not in _CUSTOM):
        _leaf_view(view, declared[name].category, name, data[name])
    hint = hints if hints is not None else flags.hints(snap)
    run_line = flags.put_run(view, snap, hint, Subject(flags.COMMAND, flags.RUN))
    workers_view.workers_view(view, data.get("processes"), data.get("probe"), hint, run_line, snap.get("runs"))
    view.env_reads, view.env_read_tracked = env_read_evidence(snap)
    view.env_read_until, view.runs_ended = env_read_coverage(snap)
    return view


def _leaf_view(view: "View", category: str, section: str, data: Dict[str, Any]) -> None:
    """Every leaf of a section as its own difference key, `<section>.<path>` (torch, host, and any
    section without a view of its own)."""
    for path, value in leaves(data):
        if path:
            view.put(category, value, (keys.flat_key(section, *path),), Subject(section, keys.path_key(path)))


def _files_view(view: View, files: Dict[str, Any]) -> None:
    for path, info in sorted((files.get("entries") or {}).items()):
        view.put("files", norm(without_text(info)), (keys.flat_key("files", "entries", path),),
                 Subject("files", path))


def _files_read_view(view: View, data: Dict[str, Any]) -> None:
    """A file the measured processes read (capture/collectors/files_read.py): its content and who read it, one
    key per file ("files_read.<path>"); how it was seen (probe or /proc sampling) is not compared."""
    for path, info in sorted((data.get("files") or {}).items()):
        if isinstance(info, dict):
            value = {k: info[k] for k in ("sha256", "size", "error", "read_by") if k in info}
            view.put("files", norm(value), (keys.flat_key("files_read", "files", path),), Subject("files_read", path))


def _env_view(view: View, env: Dict[str, Any]) -> None:
    variables = env.get("vars") or {}
    view.parent_env = dict(variables)
    for name, value in variables.items():
        view.put("env", value, (keys.env_var_flat(name),), env_subject("env", name))


def _python_view(view: View, py: Dict[str, Any]) -> None:
    for name in keys.PYTHON_FIELDS:
        if name in py:
            view.put("python", norm(py[name], name), (keys.flat_key("python", name),), Subject("python", name))
    for path, hook in (py.get("startup_hooks") or {}).items():
        view.put("startup", norm(without_text(hook)), (keys.flat_key("python", "startup_hooks", path),),
                 Subject("startup", path))


_INTEGRITY_STATES = (("modified", "modified"), ("missing", "missing"), ("rewritten_scripts", "rewritten"))


def _packages_view(view: View, pkgs: Dict[str, Any]) -> None:
    for name, dist in (pkgs.get("dists") or {}).items():
        if not isinstance(dist, dict):
            continue
        value = {k: norm(dist[k], k) for k in ("version", "origin", "location") if k in dist}
        if name in view.builds:
            value["build"] = knowledge.build_identity(dist.get("build"))
        view.put("packages", value, (keys.flat_key("packages", "dists", name),), Subject("packages", name))
    integrity = pkgs.get("integrity") or {}
    values = view.values["integrity"]
    for section, state in _INTEGRITY_STATES:
        entries = integrity.get(section) or {}
        if section == "modified":
            # Tens of thousands of entries in a broken install: shared by reference, their flat
            # keys derived only for the few that differ (View.flat_of).
            if view.modified_only is not None:
                entries = {rel: entries[rel] for rel in view.modified_only if rel in entries}
            values.update({keys.integrity_key(rel): (without_text(info) if type(info) is dict else {"info": info})
                           for rel, info in entries.items()})
            continue
        for rel, info in entries.items():
            value = dict(info) if isinstance(info, dict) else {"info": info}
            value["state"] = state
            view.put("integrity", value, (keys.integrity_flat(section, rel),),
                     Subject("integrity", rel))


def comparable_builds(snaps: Sequence[Dict[str, Any]]) -> Set[str]:
    """The distributions whose build (capture/collectors/builds.py) is compared: recorded in every snapshot,
    at the same version. Another version is the difference already; a snapshot from before builds were
    recorded has none to compare."""
    found: Optional[Dict[str, Any]] = None
    for snap in snaps:
        pkgs = section_data(snap, "packages") if _ok(snap, "packages") else {}
        dists = pkgs.get("dists") if isinstance(pkgs, dict) else None
        mine = {name: dist.get("version") for name, dist in (dists or {}).items()
                if isinstance(dist, dict) and isinstance(dist.get("build"), dict)}
        found = mine if found is None else {name: v for name, v in found.items() if mine.get(name, MISSING) == v}
    return set(found or ())


def modified_entries_differing(good: Dict[str, Any], bad: Dict[str, Any]) -> Set[str]:
    """The edited installed files (packages.integrity.modified keys) whose entries are not equal on
    both sides: the only ones that can differ between the two views."""
    maps = []
    for snap in (good, bad):
        pkgs = section_data(snap, "packages") if _ok(snap, "packages") else {}
        maps.append(as_dict(as_dict(as_dict(pkgs).get("integrity")).get("modified")))
    gmod, bmod = maps
    # Entry by entry in C (map, operator.ne, compress): tens of thousands of edited files in a
    # broken install cost no Python-level loop.
    rels = list(gmod)
    bad_entries = map(bmod.get, rels, repeat(MISSING))
    differing = set(compress(rels, map(ne, gmod.values(), bad_entries)))
    differing.update(bmod.keys() - gmod.keys())
    return differing


def _git_view(view: View, git: Dict[str, Any]) -> None:
    for repo, info in (git.get("repos") or {}).items():
        if not isinstance(info, dict):
            continue
        base = keys.flat_key("git", "repos", repo)
        view.put("git", {"branch": info.get("branch"), "head": info.get("head")},
                 (base,), Subject("git", repo), presence=True)
        for name, label in (("head", "commit"), ("branch", "branch"), ("detached", "detached"),
                            ("upstream", "upstream"), ("ahead", "ahead"), ("behind", "behind"), ("roles", "roles")):
            if name in info:
                view.put("git", norm(info[name], name), (keys.flat_key(base, name),),
                         Subject("git", repo, label))
        for kind in ("dirty", "untracked", "submodules"):
            for rel, entry in (info.get(kind) or {}).items():
                view.put("git", norm(without_text(entry)), (keys.flat_key(base, kind, rel),),
                         Subject("git", repo, kind, item=rel))
        if info.get("status_unknown"):
            view.git_status_unknown.add(repo)
            view.put("git", f"unknown: {info['status_unknown']}", (keys.flat_key(base, "status_unknown"),),
                     Subject("git", repo, "status"))
        if "stash" in info:
            stash = {name: without_text(entry) for name, entry in (info.get("stash") or {}).items()}
            view.put("git", norm(stash), (keys.flat_key(base, "stash"),), Subject("git", repo, "stash"))


def _gpu_view(view: View, nv: Dict[str, Any]) -> None:
    for name in ("driver_version", "nvml_version", "cuda_driver_version", "count"):
        if name in nv:
            view.put("gpu", nv[name], (keys.flat_key("nvidia", name),), Subject("gpu", "driver", name))
    for index, gpu in (nv.get("gpus") or {}).items():
        if not isinstance(gpu, dict):
            continue
        view.put("gpu", gpu.get("name"), (keys.gpu_flat(index),), Subject("gpu", str(index)),
                 presence=True)
        base = keys.gpu_flat(index)
        for path, value in leaves(gpu):
            if path:
                key = keys.path_key(path)
                view.put("gpu", value, (keys.flat_key(base, key),), Subject("gpu", str(index), key))
    for path, value in leaves(nv.get("topology") or {}):
        if path:
            key = keys.path_key(path)
            view.put("gpu", value, (keys.flat_key("nvidia", "topology", key),), Subject("gpu", "topology", key))


def _sglang_view(view: View, sg: Dict[str, Any]) -> None:
    if sg.get("version") is not None:
        view.put("sglang", sg["version"], (keys.flat_key("sglang", "version"),), Subject("sglang", "version"))
    for name, value in (sg.get("server_args") or {}).items():
        view.put("sglang", norm(value, name), (keys.flat_key("sglang", "server_args", name),),
                 Subject("sglang", name, "args"))


def _libraries_view(view: View, data: Dict[str, Any]) -> None:
    """What each measured process mapped: `libraries.<process>.<object name>` ("run/<key>" for the run command's
    own processes) valued by the file, its version and identity (build-id, else a sha256 prefix), so the same
    soname from another file or build is one difference ("python-0 maps libgomp.so.1 from ... instead of ...").
    A process whose maps could not be read has no keys: it says nothing about what it loaded."""
    table = data.get("objects") or {}
    # The section keys a process by the walk's key or the probe's; the workers' view joins the two by pid
    # under one name (a role, else a rank, else the walk's): the same name here, so a process that is
    # "python-0" to the walk and "rank1" to the probe has one name on each side, and one key per object.
    source = view.source if isinstance(view.source, dict) else {}
    by_pid = names_by_pid(section_data(source, "processes") or {}, section_data(source, "probe") or {})
    # One value per object, shared by every process that mapped it (1,500 processes mapping 150 objects each
    # are 225,000 keys but only as many values as objects): built once, kept once in memory.
    values: Dict[Any, Dict[str, Any]] = {}

    def value_of(path: Any) -> Dict[str, Any]:
        found = values.get(path)
        if found is None:
            info = as_dict(table.get(path))
            identity = info.get("build_id") or (f"sha256:{str(info['sha256'])[:16]}" if info.get("sha256") else "")
            found = values[path] = {"path": path, "version": info.get("version") or "", "identity": identity,
                                    "owner": owner_text(info)}
        return found

    sections = (("processes", str), ("run_processes", keys.run_process))
    in_view = view.values.setdefault("libraries", {})
    library_keys = view.library_keys
    for field_name, process_key in sections:
        for key, entry in sorted((data.get(field_name) or {}).items()):
            if not isinstance(entry, dict) or not isinstance(entry.get("objects"), dict):
                continue
            pid = entry.get("pid")
            named = by_pid.get(pid) if field_name == "processes" and isinstance(pid, int) else None
            process = process_key(named or str(key))
            # An object the run's processes mapped in some runs and not in others came and went with when the
            # maps were sampled (a short client read before it imported, another run read later): not a fact
            # about the side. Only what every run of each side mapped is compared (drop_unstable, for diff and rank).
            varies = entry.get("varies")
            unstable = {str(p) for change in as_dict(varies).values()
                        for p in list(as_dict(change).get("added") or []) + list(as_dict(change).get("removed") or [])
                        } if varies else set()
            late = {str(p) for p in entry.get("late") or []}
            raw_key = str(key)
            if field_name == "run_processes" and entry["objects"]:
                view.command_seen.add(raw_key)
            for name, path in sorted(entry["objects"].items()):
                view_key = keys.library_key(process, str(name))
                if path in unstable:
                    view.unstable.add(view_key)
                    continue
                if path in late:
                    view.late.add(view_key)
                # View.put's work, in bulk: the flat key and subject wait in library_keys until asked for.
                in_view[view_key] = value_of(path)
                library_keys[view_key] = (field_name, raw_key, process, str(name))


def drop_unstable(views: Sequence[View]) -> None:
    """Remove from every view the library keys some view found in only some of its runs (View.unstable), or loaded
    late (after a process's first read: View.late) on one side and not seen on another: which side "has" such an
    object followed when the maps were sampled. Called on the views compared together."""
    unstable = set().union(*(view.unstable for view in views))
    # Loaded after a process's first read on some side, and missing on another: that side's reads may have come too
    # early to see it (a short process read once), so which side "has" it is timing too.
    unstable |= {key for view in views for key in view.late
                 if any(key not in other.values.get("libraries", {}) for other in views)}
    for view in views:
        for key in unstable:
            view.values.get("libraries", {}).pop(key, None)


class Unobserved(NamedTuple):
    """What drop_unobserved left out: the command's processes read in some views only, and whether the workers'
    environment (the command's processes standing in for them) was read in some views only."""
    processes: List[str]
    environment: bool


def drop_unobserved(views: Sequence[View]) -> Unobserved:
    """Remove from every view the keys of the `envsnap run` command's processes that some view did not read.

    The command's processes are read by sampling while each run goes on (measure/environ_sampling.py,
    maps_sampling.py): a process shorter than the sampling interval can end unread in every run of one side. Its
    environment and maps are then unknown there, not empty: compared, each variable and object it has would read as
    added on the other side, a change nobody made. Its keys go on every side (its own, its mapped objects, and the
    workers' environment when the command's processes stand in for the workers); each view's `partly_observed`
    names them, and `environment_unread` marks a view that read none of the workers' environment, for the
    warnings."""
    if len(views) < 2:
        return Unobserved([], False)
    seen = [view.command_seen for view in views]
    everywhere: Set[str] = set(seen[0]).intersection(*seen[1:])
    partial = sorted(set().union(*seen) - everywhere)
    # A process's environment is read apart from its maps (environ_sampling.py, maps_sampling.py): a short one can
    # be mapped and gone before its environment is read. Where the command's processes stand in for the workers in
    # some views and no view of theirs was read in another, the workers' variables are unknown there, not unset.
    env_gap = any(view.workers_are_command for view in views) and any(not view.workers for view in views)
    if not partial and not env_gap:
        return Unobserved([], False)
    entities = {keys.command_process(name) for name in partial}
    processes = {keys.run_process(name) for name in partial}
    for view in views:
        view.partly_observed = list(partial)
        view.environment_unread = env_gap and not view.workers
        stand_in = view.workers_are_command and (env_gap or bool(entities & set(view.workers)))
        for category, values in view.values.items():
            for key in list(values):
                if category == "libraries":
                    found = view.library_keys.get(key)
                    if found is not None and found[2] in processes:
                        del values[key]
                    continue
                subject = view.subjects.get(key)
                if subject is None:
                    continue
                if keys.process_of(subject) in entities:
                    del values[key]
                elif stand_in and category == "workers" and keys.is_workers_env(subject):
                    del values[key]
    return Unobserved(partial, env_gap)


def _nccl_view(view: View, nccl: Dict[str, Any]) -> None:
    if nccl.get("version") is not None:
        view.put("nccl", nccl["version"], (keys.flat_key("nccl", "version"),), Subject("nccl", "version"))
    ranks = {str(r): info for r, info in (nccl.get("ranks") or {}).items() if isinstance(info, dict)}
    view.nccl_rank_env = {r: as_dict(info.get("env")) for r, info in ranks.items()}
    if not ranks:
        return
    view.put("nccl", sorted(ranks, key=lambda r: (len(r), r)), (keys.flat_key("nccl", "ranks"),), Subject("nccl", "ranks"))
    skip = {"pid", "host"} | ({"version"} if nccl.get("version") is not None else set())
    per_rank = {r: {keys.path_key(p): v for p, v in leaves({k: v for k, v in info.items() if k not in skip}) if p}
                for r, info in ranks.items()}
    flat_of = {r: keys.nccl_rank_flat(r) for r in ranks}
    agree(view, "nccl", per_rank, flat_of, keys.nccl_field_subject)


def _nccl_conf_view(view: View, conf: Dict[str, Any]) -> None:
    """NCCL's config files (capture/collectors/nccl_conf.py): each setting NCCL takes from them, as the
    variable it sets ("nccl_conf.NCCL_PROTO", so the environment rules of the knowledge table apply),
    valued with its file ({"value", "file"}: shown "LL from /etc/nccl.conf"). A setting the reading
    process's environment also sets is left out: NCCL's setenv(name, value, 0) keeps the environment's
    value, so the file's does not act (the environment is compared on its own)."""
    overridden = as_dict(conf.get("overridden"))
    for name, setting in sorted(as_dict(conf.get("settings")).items()):
        if name in overridden or not isinstance(setting, dict):
            continue
        value = {"value": setting.get("value"), "file": setting.get("file")}
        view.put("nccl", value, (keys.nccl_conf_flat(name),),
                 env_subject("nccl_conf", name))


# Sections with a view of their own, in building order; processes and probe are viewed together as the
# workers (always, after the rest). Any other section a collector declares (host, torch, a new one) is
# viewed leaf by leaf, in the category its RULES name.
_BUILDERS: Tuple[Tuple[str, Callable[[View, Dict[str, Any]], None]], ...] = (
    ("env", _env_view), ("python", _python_view), ("packages", _packages_view), ("git", _git_view),
    ("files", _files_view), ("nvidia", _gpu_view), ("sglang", _sglang_view), ("nccl", _nccl_view),
    ("patches", patch_status.put_view), ("nccl_conf", _nccl_conf_view), ("libraries", _libraries_view),
    ("files_read", _files_read_view),
)
# processes and probe: the workers' view; neighbours: compared by compare/neighbours.py (who else ran moves
# from moment to moment: its leaves would only be volatile noise).
_CUSTOM = frozenset(name for name, _ in _BUILDERS) | {"processes", "probe", "neighbours"}
