"""Who read each variable, as evidence for the ranking: probe records (per process) and NCCL's own log
("X set by environment to Y" is a read by NCCL), from real files through the real collectors."""
from __future__ import annotations

import json
import re
from collections import defaultdict

from helpers import TEST_DATA

from envsnap.analysis.compare import env_reads, view_model, views
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import SECTION_SHAPES, nccl as nccl_collector, probe as probe_collector
from envsnap.model.schema import validate


def _snapshot(**sections):
    return validate({"schema_version": 1, "sections": sections}, shapes=SECTION_SHAPES)


def test_nccl_log_lines_are_reads_by_nccl_counted_per_rank():
    log = TEST_DATA / "nccl" / "two-node-4rank.log"
    section = nccl_collector.collect(CaptureContext(logs=[str(log)]))
    assert section["status"] == "ok"
    reads, tracked = env_reads.env_read_evidence(_snapshot(nccl=section))
    # Expected straight from the log: the processes that logged each variable.
    logged = defaultdict(set)
    for line in log.read_text().splitlines():
        m = re.search(r"(\S+):(\d+):\d+ \[\d+\] NCCL INFO (\w+) set by environment to", line)
        if m:
            logged[m.group(3)].add((m.group(1), m.group(2)))
    assert logged and tracked == [env_reads.NCCL_READER]
    assert reads == {name: {env_reads.NCCL_READER: len(procs)} for name, procs in logged.items()}


def test_probe_reads_per_process_and_records_without_counts_are_no_evidence(tmp_path):
    base = {"probe_version": 1, "host": "h", "argv": ["python", "bench.py"], "stages": ["start", "exit"],
            "env_at_start": {"A": "1"}}
    records = {
        "h-100.json": dict(base, pid=100, ppid=1, env_reads={"KNOB": 3, "BAD": "x", "NEG": -1, "FLAG": True},
                           env_copies=2, started_at=1.5),
        "h-101.json": dict(base, pid=101, ppid=100, env_reads={"KNOB": 1, "OTHER": 2}),
        "h-102.json": dict(base, pid=102, ppid=1),  # written by a probe that did not count reads
    }
    for name, record in records.items():
        (tmp_path / name).write_text(json.dumps(record))
    section = probe_collector.collect(CaptureContext(probe_dir=str(tmp_path)))
    assert section["status"] == "ok"
    data = section["data"]["records"]
    by_pid = {r["pid"]: r for r in data.values()}
    # Counts written by another program are kept only when they are counts.
    assert by_pid[100]["env_reads"] == {"KNOB": 3} and by_pid[100]["env_copies"] == 2
    assert by_pid[100]["started_at"] == 1.5 and "env_reads" not in by_pid[102]
    snap = _snapshot(probe=section)
    reads, tracked = env_reads.env_read_evidence(snap)
    keys = {r["pid"]: k for k, r in data.items()}
    assert tracked == sorted([keys[100], keys[101]])
    assert reads == {"KNOB": {keys[100]: 3, keys[101]: 1}, "OTHER": {keys[101]: 2}}
    view = views.build_view(snap, views.usable_sections([snap]))
    assert view.env_reads == reads and view.env_read_tracked == tracked
    # Evidence, never a compared key.
    assert not [k for _, k in view_model.iter_keys(view) if "env_reads" in k]


def test_snapshots_without_read_evidence_say_nothing():
    assert env_reads.env_read_evidence({"schema_version": 1, "sections": {}}) == ({}, [])


def _reads_pair(record_extra):
    """GOOD/BAD whose one difference is an unknown variable the probed server worker never read, with runs that
    ended at 2025-01-01 00:00:01 UTC (epoch 1735689601)."""
    from helpers.diff import runs, section, snap, workers

    pair = []
    for value in ("1", "2"):
        sections = workers({"scheduler_TP0": {"KNOB_X": value}})
        record = sections["probe"]["records"]["scheduler_TP0"]
        record.update(env_reads={"HOME": 1}, stages=["start", "init"], **record_extra)
        pair.append(snap(value, **{k: section(v) for k, v in sections.items()},
                         runs=runs({"tok_s": [10, 11, 10, 11, 10] if value == "1" else [7, 6, 7, 6, 7]})))
    return pair


def _knob(result):
    return next(c for c in result["causes"] if c.get("variable") == "KNOB_X")


def test_not_read_is_claimed_only_from_records_that_cover_the_runs():
    from envsnap.analysis import result as result_mod

    # The worker's last record was written before the runs (an older probe, no journal): its reads after
    # that moment are not known, so nothing may be concluded from their absence.
    stale = _knob(result_mod.analyze(*_reads_pair({"written_at": 1735689500.0})))
    assert not any(f["factor"] == "not_read" for f in stale["factors"]), stale["factors"]
    assert any("reads are not known after 2024-12-31 23:58:20 UTC for scheduler_TP0" in e
               for e in stale["evidence"]), stale["evidence"]
    # Known through the runs (its journal read after them): not read, and said so.
    covered = _knob(result_mod.analyze(*_reads_pair({"written_at": 1735689500.0, "reads_until": 1735689700.0})))
    assert any(f["factor"] == "not_read" for f in covered["factors"]), covered["factors"]
    assert covered["score"] < stale["score"]
