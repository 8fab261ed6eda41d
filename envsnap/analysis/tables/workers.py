"""The workers matrix: every environment variable x every process, on both sides.

Columns are the processes of each side (model/workers.py decides which environment each ran with
and orders them); merged multi-node snapshots get one group of columns per node ("node/key", the
node pairs of analysis/compare/nodes.py, so a column is compared with the same node's on the other side).
A cell is flagged where the process differs from its parent (`vs_parent`), where it disagrees with
its peers (same kind under the same parent: the TP schedulers of one server, `vs_peers`), and
where the value was changed inside the process after exec (probe vs /proc, `in_process`). A cell
also says what the process changed in its own os.environ after the environment it shows (`later`: the
probe's records at init_process_group and exit; diff's `changed_in_process` keys say the same). A row
differs when any cell is flagged or the same process has another value on the other side.
Rows that differ nowhere and name no performance variable are listed by name only.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare.nodes import Pairing
from envsnap.analysis.tables.common import data, sections
from envsnap.model.result_types import StageValue, WorkerCell, WorkerColumn, WorkerRow, WorkersTable
from envsnap.model.snapshot import as_dict
from envsnap.model.workers import COMMAND, SeenProcess, command_records, seen_processes

_UNSET = object()
# The probe's records of a process, in the order it wrote them.
_STAGES = ("env_at_start", "env_at_init", "env_at_exit")

Later = List[Tuple[str, Dict[str, Any]]]  # (stage, environment) after the one a column shows


def _columns(pairing: Pairing, side: str) -> Tuple[Dict[str, Tuple[SeenProcess, Optional[str]]], Dict[str, Later]]:
    """(process, parent column) per column key of one side, each node's prefixed "node/"; and per column the
    probe's later environments of that process."""
    out: Dict[str, Tuple[SeenProcess, Optional[str]]] = {}
    later: Dict[str, Later] = {}
    for pair in pairing.pairs:
        snap = pair.good if side == "good" else pair.bad
        if snap is None:
            continue
        prefix = "" if pair.name is None else f"{pair.name}/"
        node_sections = sections(snap)
        probe = data(node_sections, "probe")
        records, commands = as_dict(probe.get("records")), command_records(probe)
        for key, process in seen_processes(data(node_sections, "processes"), probe).items():
            out[prefix + key] = (process, prefix + process.parent if process.parent else None)
            if process.source in _STAGES:
                record = as_dict((commands.get(process.probe_key.partition("/")[2]) if process.group == COMMAND
                                  else records.get(process.probe_key)))
                after = _STAGES[_STAGES.index(process.source) + 1:]
                later[prefix + key] = [(stage[len("env_at_"):], record[stage]) for stage in after
                                       if isinstance(record.get(stage), dict)]
    return out, later


def _peer_group(process: SeenProcess, parent: Optional[str]) -> Tuple[str, str]:
    return process.kind, parent or ""


def _later(value: Any, stages: Later, name: str) -> List[StageValue]:
    """Each later stage at which the variable differs from VALUE and from the stage before (a change, once)."""
    out: List[StageValue] = []
    previous = value
    for stage, env in stages:
        now = env.get(name, _UNSET)
        if now != previous:
            out.append({"stage": stage, "set": now is not _UNSET, "value": None if now is _UNSET else now})
        previous = now
    return out


def _cells(columns: Dict[str, Tuple[SeenProcess, Optional[str]]], later: Dict[str, Later], name: str
           ) -> Dict[str, WorkerCell]:
    readable = {k: p for k, (p, _) in columns.items() if p.env is not None}
    groups: Dict[Tuple[str, str], List[str]] = {}
    for key, (process, parent) in columns.items():
        if process.env is not None:
            groups.setdefault(_peer_group(process, parent), []).append(key)
    majority: Dict[Tuple[str, str], Tuple[Counter[Any], int]] = {}
    for group, keys in groups.items():
        if len(keys) >= 2:
            counts = Counter(readable[k].env.get(name, _UNSET) for k in keys)  # type: ignore[union-attr]
            majority[group] = (counts, max(counts.values()))
    cells: Dict[str, WorkerCell] = {}
    for key, (process, parent_key) in columns.items():
        if process.env is None:
            cells[key] = {"readable": False, "status": process.status}
            continue
        value = process.env.get(name, _UNSET)
        cell: WorkerCell = {"readable": True, "set": value is not _UNSET,
                                "value": None if value is _UNSET else value}
        parent_process = readable.get(parent_key or "")
        if parent_process is not None and parent_process.env is not None:
            parent_value = parent_process.env.get(name, _UNSET)
            cell["has_parent"] = True
            if parent_value != value:
                cell["vs_parent"] = {"set": parent_value is not _UNSET,
                                     "value": None if parent_value is _UNSET else parent_value}
        group = _peer_group(process, parent_key)
        if group in majority:
            counts, top = majority[group]
            tied = sum(1 for c in counts.values() if c == top) > 1
            if counts[value] < top or tied:
                cell["vs_peers"] = True
        if process.exec_env is not None and process.exec_env.get(name, _UNSET) != value:
            at_exec = process.exec_env.get(name, _UNSET)
            cell["in_process"] = {"set": at_exec is not _UNSET, "value": None if at_exec is _UNSET else at_exec}
        changes = _later(value, later.get(key) or [], name)
        if changes:
            cell["later"] = changes
        cells[key] = cell
    return cells


def _flagged(cell: WorkerCell) -> bool:
    return cell.get("readable", False) and (not cell.get("set") or any(
        flag in cell for flag in ("vs_parent", "vs_peers", "in_process", "later")))


def workers_table(pairing: Pairing) -> WorkersTable:
    found = {"good": _columns(pairing, "good"), "bad": _columns(pairing, "bad")}
    sides = {side: columns for side, (columns, _) in found.items()}
    later = {side: stages for side, (_, stages) in found.items()}
    names = sorted({str(n) for columns in sides.values() for process, _ in columns.values()
                    for env in (process.env, process.exec_env) if env for n in env}
                   | {str(n) for stages in later.values() for column in stages.values() for _, env in column for n in env})
    rows: List[WorkerRow] = []
    quiet: List[str] = []
    cells_by_side: Dict[str, Dict[str, Dict[str, WorkerCell]]] = {"good": {}, "bad": {}}
    for name in names:
        per_side = {side: _cells(columns, later[side], name) for side, columns in sides.items()}
        inside = any(_flagged(cell) for cells in per_side.values() for cell in cells.values())
        across = any(
            key in per_side["good"] and cell.get("readable") and per_side["good"][key].get("readable")
            and (cell.get("set"), cell.get("value")) != (per_side["good"][key].get("set"), per_side["good"][key].get("value"))
            for key, cell in per_side["bad"].items())
        perf = knowledge.is_performance_variable(name)
        if not (inside or across or perf):
            quiet.append(name)
            continue
        rows.append({"name": name, "differs": inside or across, "across": across, "perf": perf})
        for side in sides:
            cells_by_side[side][name] = per_side[side]
    columns_out: Dict[str, List[WorkerColumn]] = {
        side: [{"key": key, "title": process.title, "kind": process.kind, "status": process.status,
                "note": process.note, "source": process.source_label, "parent": parent,
                "readable": process.env is not None} for key, (process, parent) in columns.items()]
        for side, columns in sides.items()}
    return {"columns": columns_out, "cells": cells_by_side, "rows": rows, "same_everywhere": quiet,
            "differing": sum(1 for r in rows if r["differs"])}
