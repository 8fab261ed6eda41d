"""Every installed distribution, where it came from, and whether its files are still as installed.

Versions and origins come from the distributions' metadata (direct_url.json, PEP 610)
without importing anything. Integrity re-hashes the files each RECORD lists (`.py`,
`.pth` and scripts by default, every file with --deep) and names those that differ:
an edited `sglang/srt/layers/moe/topk.py` is found with no pristine copy to compare
against; by default every other file RECORD lists is checked by a stat (it exists, with the
recorded size), so a deleted extension module is found too. See capture/collectors/integrity.py
for the hashing and the shebang-rewrite rule. Each edited file's current text is kept too
(content.attach_installed: bounded, redacted), so a diff can show the edit itself. Each
distribution's `build` (builds.py: WHEEL's tags and Root-Is-Purelib, its compiled files, digests
of what it installed) tells two builds of one version apart.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.capture.base import CaptureContext, failed, ok
from envsnap.capture.collectors import content, distributions as distributions_mod
from envsnap.capture.collectors.python import interpreter_facts
from envsnap.format import plural
from envsnap.model.names import canonical_name
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    DRAFTER,
    GRAPHS,
    KERNELS,
    NONE,
    SectionRules,
    rule,
)
from envsnap.model.schema import CONTENT_SHAPE, HASH_CACHE_SHAPE
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"count": "num",
         "dists": ("map", {"name": "str", "version": "str", "installer": "str", "location": "str",
                           "origin": {"kind": "str", "url": "str", "commit": "str", "editable": "scalar"},
                           "build": {"tags": ("list", "str"), "purelib": "scalar", "build_tag": "str",
                                     "generator": "str", "wheel_version": "str", "wheel": "scalar",
                                     "compiled": "num", "compiled_files": ("list", "str"),
                                     "compiled_sha256": "str", "content_sha256": "str"}}),
         "integrity": {"mode": "str", "checked_files": "num", "size_checked": "num",
                       "modified": ("map", {"dist": "str", "recorded_sha256": "str", "actual_sha256": "str",
                                            "recorded_size": "num", "actual_size": "num",
                                            "content": CONTENT_SHAPE}),
                       "missing": ("map", "dict"), "rewritten_scripts": ("map", "dict"),
                       "unhashable": "dict", "errors": "dict"},
         "hash_cache": HASH_CACHE_SHAPE}
RULES = SectionRules(category="packages", component=NONE, compares="installed packages", rules=(
    # --- Edited installed files (pip RECORD hashes): the code that actually ran ---
    # sglang 0.5.5 and 0.5.23 trees: sglang/srt/layers/attention/ (flashinfer_mla_backend.py...) are the attention kernels' drivers.
    rule("integrity.sglang/srt/layers/attention/*", "integrity", KERNELS, 0.8, "edited attention backend: runs in every verify and draft forward"),
    # sglang/srt/speculative/ (eagle_worker.py, spec_utils.py): the EAGLE drafter and tree verification.
    rule("integrity.sglang/srt/speculative/*", "integrity", DRAFTER, 0.8, "edited speculative-decoding code (EAGLE drafter, tree building)"),
    # sglang/srt/distributed/ (parallel_state.py, custom_all_reduce.py): all TP communication.
    rule("integrity.sglang/srt/distributed/*", "integrity", COMMUNICATION, 0.85, "edited tensor-parallel communication code"),
    # sglang/srt/model_executor/cuda_graph_runner.py: capture and replay of decode CUDA graphs.
    rule("integrity.sglang/srt/model_executor/*", "integrity", GRAPHS, 0.8, "edited model runner / CUDA-graph runner"),
    # sglang/srt/layers/moe/ (topk.py, fused_moe_triton/): expert routing and MoE kernels.
    rule("integrity.sglang/srt/layers/moe/*", "integrity", KERNELS, 0.75, "edited MoE routing/kernels"),
    rule("integrity.sglang/srt/layers/*", "integrity", KERNELS, 0.7, "edited model layer code"),
    rule("integrity.sglang/srt/models/*", "integrity", KERNELS, 0.7, "edited model definition"),
    # _set_envs_and_config sets the workers' NCCL/CUDA env (sglang 0.5.5 srt/entrypoints/engine.py:676,
    # 0.5.23 srt/entrypoints/engine.py:1878; analysis/knowledge ENGINE_SET_ENV lists what each version sets).
    rule("integrity.sglang/srt/entrypoints/engine.py", "integrity", COMMUNICATION, 0.7,
         "edited engine.py: its _set_envs_and_config sets NCCL_NVLS_ENABLE/NCCL_CUMEM_ENABLE/CUDA_DEVICE_MAX_CONNECTIONS for the workers"),
    # sglang/srt/managers/scheduler.py: the scheduler loop (CPU overhead per decode step).
    rule("integrity.sglang/srt/managers/*", "integrity", CPU_HOST, 0.6, "edited scheduler/manager code: CPU work on every decode step"),
    rule("integrity.sglang/*", "integrity", KERNELS, 0.55, "edited SGLang code"),
    rule("integrity.sgl_kernel/*", "integrity", KERNELS, 0.75, "edited sgl-kernel (custom all-reduce, sampling, attention kernels)"),
    rule("integrity.flashinfer/*", "integrity", KERNELS, 0.75, "edited FlashInfer (attention/sampling kernels)"),
    rule("integrity.torch/*", "integrity", KERNELS, 0.6, "edited PyTorch file"),
    rule("integrity.triton/*", "integrity", KERNELS, 0.55, "edited Triton file"),
    rule("integrity.nvidia/nccl/*", "integrity", COMMUNICATION, 0.8, "replaced/edited NCCL library file"),
    rule("integrity.nvidia/*", "integrity", KERNELS, 0.55, "replaced/edited CUDA library file"),
    rule("integrity.numpy/*", "integrity", CPU_HOST, 0.55, "edited numpy file"),
    rule("integrity.*", "integrity", NONE, 0.3, "an installed file differs from what pip installed"),

    # --- Packages (version / origin changes) ---
    rule("packages.sglang", "packages", KERNELS, 0.6, "SGLang itself changed"),
    rule("packages.sgl-kernel", "packages", KERNELS, 0.6, "sgl-kernel changed (custom all-reduce, sampling, MoE kernels)"),
    rule("packages.flashinfer*", "packages", KERNELS, 0.6, "FlashInfer changed (attention kernels)"),
    rule("packages.torch", "packages", KERNELS, 0.55, "PyTorch changed (kernels, CUDA graphs, allocator)"),
    rule("packages.triton", "packages", KERNELS, 0.5, "Triton changed (generated kernels)"),
    rule("packages.nvidia-nccl-*", "packages", COMMUNICATION, 0.65, "the NCCL library changed"),
    rule("packages.nvidia-cublas*", "packages", KERNELS, 0.45, "cuBLAS changed (GEMM kernels)"),
    rule("packages.nvidia-cudnn*", "packages", KERNELS, 0.35, "cuDNN changed"),
    rule("packages.nvidia-cuda-runtime*", "packages", GRAPHS, 0.4, "the CUDA runtime changed"),
    rule("packages.nvidia-*", "packages", KERNELS, 0.3, "a CUDA library wheel changed"),
    rule("packages.cuda-python", "packages", GRAPHS, 0.3, "CUDA Python bindings changed"),
    rule("packages.xgrammar", "packages", CPU_HOST, 0.25, "grammar backend changed (CPU work per step)"),
    rule("packages.numpy", "packages", CPU_HOST, 0.35, "numpy changed (its BLAS too)"),
    rule("packages.scipy-openblas*", "packages", CPU_HOST, 0.4, "the OpenBLAS build changed"),
    rule("packages.transformers", "packages", NONE, 0.2, "transformers changed (config/tokenizer code)"),
))

# Seconds kept back from the capture deadline to assemble the result after hashing.
ASSEMBLY_MARGIN_S = 0.25


def collect(ctx: CaptureContext) -> Section:
    try:
        facts = interpreter_facts(ctx)
    except ValueError as exc:
        return failed(str(exc))
    site_dirs = {os.path.normpath(p) for p in facts.get("site_packages") or []}
    if facts.get("user_site"):
        site_dirs.add(os.path.normpath(facts["user_site"]))
    stop_at = time.monotonic() + max(0.0, ctx.remaining() - ASSEMBLY_MARGIN_S)
    data = describe(facts.get("sys_path") or [], site_dirs, deep=ctx.deep, stop_at=stop_at, no_cache=ctx.no_cache)
    content.attach_installed(data, content.Budget.of(ctx), deadline=stop_at)
    data["python"] = facts.get("executable")
    return ok(data)


def describe(path: List[str], site_dirs: Set[str], deep: bool = False, stop_at: Optional[float] = None,
             no_cache: bool = False) -> Dict[str, Any]:
    """The packages section's data for the distributions found on `path`; `hash_cache` says
    how many file hashes the trusted hash cache supplied (none with no_cache)."""
    # Here, not at the top: the hashing (hashlib, the hash cache) is no cost to a snapshot reader,
    # which imports this module for its SHAPE and RULES.
    from envsnap.capture.collectors import integrity

    dists: Dict[str, Dict[str, Any]] = {}
    records: List[Tuple[Any, ...]] = []
    unverifiable: Dict[str, str] = {}
    errors: Dict[str, str] = {}
    for dist, name, version in distributions_mod.iter_named(path):
        key = canonical_name(name or "")
        try:
            location = os.path.normpath(str(dist.locate_file("")))
            info_dir = distributions_mod.metadata_dir(dist) or ""
            # One listing of the metadata directory instead of a failed open per absent file
            # (REQUESTED and direct_url.json are absent from most); None: not a plain directory.
            present = _listing(info_dir)
            entry = {
                "name": name,
                "version": version,
                "installer": (_read(dist, "INSTALLER", info_dir, present) or "").strip() or None,
                "location": location,
                "requested": _read(dist, "REQUESTED", info_dir, present) is not None,
                "origin": origin(dist, info_dir, location, site_dirs, present),
            }
        except Exception as exc:  # one broken metadata directory must not hide the rest
            errors[key] = f"{type(exc).__name__}: {exc}"
            continue
        dists[key] = entry
        # A RECORD on disk is passed as a file: the hash cache knows it by its stat and reads it
        # only when it cannot vouch for the distribution (integrity.RecordFile).
        record: Any = (integrity.RecordFile(os.path.join(info_dir, "RECORD"))
                       if present is not None and "RECORD" in present else
                       None if present is not None else _read(dist, "RECORD", info_dir, present))
        if record is None:
            unverifiable[key] = ("no RECORD (installed by an installer that writes none: "
                                 "setup.py install/develop, distro or conda packages)")
        elif not os.path.isdir(location):
            unverifiable[key] = "installed inside a zip file"
        elif isinstance(record, str):  # not a plain directory: its WHEEL is read the same way
            records.append((key, location, record, _read(dist, "WHEEL", info_dir, present)))
        else:
            records.append((key, location, record))
    checks = integrity.verify(records, mode="all" if deep else "py", stop_at=stop_at, use_cache=not no_cache)
    checks["dists_checked"] = len(records)
    for key, build in checks.pop("builds").items():
        dists[key]["build"] = build
    checks["unverifiable"] = dict(sorted(unverifiable.items()))
    result = {"count": len(dists), "dists": dict(sorted(dists.items())), "integrity": checks,
              "hash_cache": checks.pop("hash_cache")}
    if errors:
        result["errors"] = errors
    return result


def _listing(info_dir: str) -> Optional[Set[str]]:
    try:
        return set(os.listdir(info_dir)) if info_dir else None
    except OSError:
        return None


def _read(dist: Any, name: str, info_dir: str = "", present: Optional[Set[str]] = None) -> Optional[str]:
    """A metadata file's text, or None when it is absent or unreadable."""
    if present is not None:
        if name not in present:
            return None
        try:
            with open(os.path.join(info_dir, name), encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None
    try:
        text: Optional[str] = dist.read_text(name)
        return text
    except Exception:
        return None


def origin(dist: Any, info_dir: str, location: str, site_dirs: Set[str],
           present: Optional[Set[str]] = None) -> Dict[str, Any]:
    """Where a distribution came from: PEP 610 direct_url.json, else an index. `present`: the
    metadata directory's file names, when known (no direct_url.json there: not read)."""
    data = distributions_mod.direct_url(dist) if present is None or "direct_url.json" in present else None
    if data:
        url = str(data.get("url", ""))
        out: Dict[str, Any]
        if isinstance(data.get("vcs_info"), dict):
            vcs = data["vcs_info"]
            out = {"kind": "vcs", "url": url, "vcs": vcs.get("vcs"), "commit": vcs.get("commit_id"),
                   "requested_revision": vcs.get("requested_revision"), "editable": False}
        elif isinstance(data.get("archive_info"), dict):
            archive = data["archive_info"]
            hashes = dict(archive.get("hashes") or {})
            legacy = archive.get("hash")  # "sha256=<hex>", deprecated but still written
            if not hashes and isinstance(legacy, str) and "=" in legacy:
                algorithm, _, value = legacy.partition("=")
                hashes[algorithm] = value
            out = {"kind": "archive", "url": url, "hashes": hashes, "editable": False}
        else:
            editable = bool((data.get("dir_info") or {}).get("editable"))
            out = {"kind": "editable" if editable else "dir", "url": url,
                   "path": distributions_mod.local_path_of_url(url), "editable": editable}
        if data.get("subdirectory"):
            out["subdirectory"] = data["subdirectory"]
        return out
    if info_dir.endswith(".egg-info") and location not in site_dirs:
        # `setup.py develop` / an .egg-link / a source tree on PYTHONPATH: the metadata
        # sits in the source checkout, outside every site directory.
        return {"kind": "editable", "path": location, "editable": True, "legacy": True}
    return {"kind": "index", "editable": False}


def _recorded_vs_disk(item: Dict[str, Any]) -> str:
    """'RECORD sha256 c37d8c1a0ac1, 44 B; on disk 96322bdfd9d4, 73 B' for an integrity entry."""
    def side(sha: Any, size: Any) -> str:
        return f"{str(sha)[:12] if sha else '?'}, {size if size is not None else '?'} B"
    return (f"RECORD sha256 {side(item.get('recorded_sha256'), item.get('recorded_size'))}; "
            f"on disk {side(item.get('actual_sha256'), item.get('actual_size'))}")


def summarize(data: Dict[str, Any]) -> List[str]:
    checks = data.get("integrity") or {}
    modified = checks.get("modified") or {}
    per_dist: Dict[str, int] = {}
    for item in modified.values():
        per_dist[item.get("dist", "?")] = per_dist.get(item.get("dist", "?"), 0) + 1
    detail = ", ".join(f"{d}: {n}" for d, n in sorted(per_dist.items(), key=lambda kv: (-kv[1], kv[0])))
    count = data.get("count", 0)
    head = (f"{count} distribution{'s' if count != 1 else ''}, {len(modified)} modified file{'s' if len(modified) != 1 else ''}"
            + (f" ({detail})" if detail else ""))
    missing = checks.get("missing") or {}
    if missing:
        head += f", {len(missing)} missing"
    not_checked = (checks.get("not_checked") or {}).get("count", 0)
    if not_checked:
        head += f", {not_checked} NOT checked (deadline)"
    lines = [head]
    sized = checks.get("size_checked")
    lines.append(f"integrity ({checks.get('mode', '?')}): {plural(checks.get('checked_files', 0), 'file')} checked"
                 + (f" by hash and {sized} by size" if sized else "") + " in "
                 f"{plural(checks.get('dists_checked', 0), 'distribution')}; "
                 f"{(checks.get('unhashable') or {}).get('count', 0)} listed without hash; "
                 f"{plural(len(checks.get('rewritten_scripts') or {}), 'script')} with rewritten shebang")
    built = [d.get("build") for d in (data.get("dists") or {}).values() if isinstance(d.get("build"), dict)]
    if built:
        compiled = [b for b in built if (b.get("compiled") or 0) > 0]
        no_wheel = sum(1 for b in built if b.get("wheel") is False)
        lines.append(f"builds: {len(compiled)} distribution{'s' if len(compiled) != 1 else ''} with compiled files "
                     f"({plural(sum(b.get('compiled') or 0 for b in compiled), 'file')}), {len(built) - len(compiled)} without"
                     + (f"; {no_wheel} not installed from a wheel (no WHEEL)" if no_wheel else ""))
    cache = data.get("hash_cache") or {}
    if cache:
        lines.append(f"hash cache: {cache.get('hits', 0)} hashes reused, {plural(cache.get('misses', 0), 'file')} read and "
                     "hashed" + (f" ({cache['note']})" if cache.get("note") else ""))
    for rel, item in sorted(modified.items()):
        lines.append(f"modified {rel} ({item.get('dist')}): {_recorded_vs_disk(item)}")
    for rel, item in sorted(missing.items()):
        lines.append(f"missing  {rel} ({item.get('dist')})")
    for rel, item in sorted((checks.get("rewritten_scripts") or {}).items()):
        check = "restoring pip's #!python line reproduces RECORD" if item.get("verified") else "not verifiable"
        lines.append(f"rewritten shebang {rel} ({item.get('dist')}): {item.get('shebang', '?')}; "
                     f"{_recorded_vs_disk(item)}; {check}")
    for rel, item in sorted((checks.get("errors") or {}).items()):
        lines.append(f"unreadable {rel} ({item.get('dist')}): {item.get('error')}")
    for name, reason in sorted((checks.get("unverifiable") or {}).items()):
        lines.append(f"not verifiable: {name}: {reason}")
    for _key, dist in sorted((data.get("dists") or {}).items()):
        where = dist.get("origin") or {}
        kind = where.get("kind")
        if kind and kind != "index":
            target = where.get("path") or where.get("url") or ""
            commit = f"@{where['commit'][:12]}" if where.get("commit") else ""
            lines.append(f"{kind}: {dist.get('name')} {dist.get('version')} <- {target}{commit}")
    return lines
