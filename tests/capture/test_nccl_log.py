"""NCCL INFO log parsing on real-format lines (sources in tests/data/nccl/README.md)."""
from __future__ import annotations

import pytest
from helpers import TEST_DATA, run_envsnap
from helpers.workers import NCCL_DATA

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import nccl, nccl_log

ONE_RANK = NCCL_DATA / "h200-1rank.log"
FOUR_RANKS = NCCL_DATA / "two-node-4rank.log"


def test_real_h200_one_rank_log():
    data = nccl_log.parse_files([str(ONE_RANK)])
    assert data["version"] == "2.28.9+cuda13.0"
    assert list(data["ranks"]) == ["0"]
    rank = data["ranks"]["0"]
    assert rank["host"] == "h200-host" and rank["pid"] == 577
    assert rank["env"] == {"NCCL_NVLS_ENABLE": "0"}  # "to 0." -> "0"
    assert rank["nranks"] == 1
    assert rank["init"]["bus_id"] == "60" and rank["init"]["phase"] == "COMPLETE" and rank["init"]["nnodes"] == 1
    assert rank["channels"] == 64
    assert rank["channel_counts"]["coll"] == 64 and rank["channel_counts"]["nvls"] == 0
    assert rank["network"] == "Socket"
    assert rank["transports"] == {}  # one rank: no peers to connect
    # The job ran with NCCL_PROTO=LL NCCL_ALGO=Ring, but a 1-rank job never reads them.
    assert "NCCL_PROTO" not in data["env"]
    assert data["absent_means"] == "not read by NCCL, not proof of unset"


def test_shared_h200_logs_parse_to_the_same_facts():
    data = nccl_log.parse_files([str(TEST_DATA / "nccl" / "h200-1rank-full.log"), str(TEST_DATA / "nccl" / "h200-default.log")])
    assert sorted(data["ranks"]) == ["0", "0#2"]  # two separate 1-rank jobs, both rank 0
    assert {r["pid"] for r in data["ranks"].values()} == {577, 609}
    assert data["env"] == {"NCCL_NVLS_ENABLE": "0"}


def test_multi_rank_two_node_log():
    data = nccl_log.parse_files([str(FOUR_RANKS)])
    ranks = data["ranks"]
    assert list(ranks) == ["0", "1", "2", "3"]
    assert data["version"] == "2.21.5+cuda12.4"
    # Rank 0 also built a 2-rank sub-communicator: it stays rank 0 of the world of 4.
    assert ranks["0"]["nranks"] == 4 and ranks["0"]["communicators"] == 2
    assert ranks["0"]["host"] == "node-a" and ranks["2"]["host"] == "node-b"  # "[1] " prefix tolerated
    assert ranks["0"]["transports"] == {"P2P/CUMEM": 2}
    assert ranks["1"]["transports"] == {"NET/IB/2/GDRDMA": 2}
    assert ranks["2"]["transports"] == {"NET/IB/3/GDRDMA": 1, "P2P/CUMEM": 1}
    assert ranks["0"]["env"]["NCCL_IB_GID_INDEX"] == "3" and ranks["0"]["env"]["NCCL_SOCKET_IFNAME"] == "eth0"
    assert ranks["0"]["algorithms"] == ["Ring"] and ranks["0"]["protocols"] == ["LL"]  # numeric and named lines agree
    assert ranks["0"]["init"]["nnodes"] == 2 and ranks["0"]["init"]["local_rank"] == 0
    assert ranks["0"]["channels"] == 2
    assert ranks["2"]["warnings"][0].startswith("NET/IB : Got completion")
    assert ranks["3"]["env"] == {}  # logged nothing: not proof of anything
    # Agreement across ranks, and the conflict between the nodes.
    assert data["env"]["NCCL_NVLS_ENABLE"] == "0"
    assert "NCCL_PROTO" not in data["env"]
    assert data["env_conflicts"]["NCCL_PROTO"] == {"0": "LL", "1": "LL", "2": "Simple"}
    assert data["env"]["NCCL_ALGO"] == "Ring"


def test_lines_without_rank_or_prefix():
    procs, order = nccl_log.parse_lines([
        "junk line\n",
        "[0] NCCL INFO 805306368 Bytes -> Algo 0 proto 2 time 3970.683594\n",
        "2026-11-29 12:00:00 host:1:1 [3] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL\n",
    ])
    data = nccl_log.summarize_ranks(procs, order)
    assert sorted(data["ranks"]) == ["unknown-0", "unknown-1"]
    assert data["ranks"]["unknown-0"]["algorithms"] == ["Tree"] and data["ranks"]["unknown-0"]["protocols"] == ["Simple"]
    assert data["ranks"]["unknown-1"]["env"] == {"NCCL_P2P_LEVEL": "NVL"}


def test_collector_statuses(tmp_path):
    assert nccl.collect(CaptureContext())["status"] == "unavailable"
    missing = nccl.collect(CaptureContext(logs=[str(tmp_path / "nope.log")]))
    assert missing["status"] == "error" and "no such file" in missing["error"]
    quiet = tmp_path / "server.log"
    quiet.write_text("INFO server started\n")
    assert nccl.collect(CaptureContext(logs=[str(quiet)]))["status"] == "unavailable"
    logs = tmp_path / "nccl-logs"  # NCCL_DEBUG_FILE=dir/%h.%p writes one file per process
    logs.mkdir()
    (logs / "node-a.1").write_text(ONE_RANK.read_text())
    result = nccl.collect(CaptureContext(logs=[str(logs), str(tmp_path / "gone.log")]))
    assert result["status"] == "ok"
    assert result["data"]["logs"] == [str(logs / "node-a.1")]
    assert "no such file" in result["data"]["errors"][str(tmp_path / "gone.log")]
    lines = nccl.summarize(result["data"])
    assert lines[0].startswith("NCCL 2.28.9+cuda13.0: 1 rank") and "NCCL_NVLS_ENABLE=0" in lines


@pytest.mark.slow
def test_capture_cli_with_log(tmp_path):
    out = tmp_path / "snap.json"
    result = run_envsnap("capture", "--log", FOUR_RANKS, "--timeout", "60", "-o", out)
    assert result.returncode == 0, result.stderr
    import json

    section = json.loads(out.read_text())["sections"]["nccl"]
    assert section["status"] == "ok" and section["data"]["ranks"]["3"]["host"] == "node-b"


def test_real_failed_two_rank_init_keeps_warnings_with_their_rank():
    data = nccl_log.parse_files([str(NCCL_DATA / "h200-2rank-one-gpu.log")])
    assert list(data["ranks"]) == ["0", "1"]  # the WARN lines (with a source location) are not orphaned
    for rank, other in (("0", "1"), ("1", "0")):
        entry = data["ranks"][rank]
        assert entry["nranks"] == 2 and entry["init"]["phase"] == "START"  # never completed
        assert entry["warnings"] == [f"Duplicate GPU detected : rank {rank} and rank {other} both on CUDA device 60"]
    # NCCL_PROTO=Simple and NCCL_NVLS_ENABLE=0 were set, but init failed before NCCL read them.
    assert data["env"] == {}
