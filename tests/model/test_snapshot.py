import json
import os
import re

import pytest

from envsnap.errors import EnvsnapError
from envsnap.model import snapshot, store


def _snap():
    snap = snapshot.new_snapshot("good", "h", "2026-01-01T00:00:00Z")
    snap["sections"] = {"env": {"status": "ok", "data": {"vars": {"B": "2", "A": "1"}}},
                        "nvidia": {"status": "unavailable", "reason": "no NVML"}}
    return snap


def test_dumps_is_sorted_and_deterministic():
    a = store.dumps(_snap())
    s = _snap()
    s["sections"] = dict(reversed(list(s["sections"].items())))
    assert store.dumps(s) == a
    assert a.index('"A"') < a.index('"B"')
    assert a.endswith("\n")


def test_save_refuses_overwrite_then_force(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("precious")
    with pytest.raises(EnvsnapError, match="exists"):
        store.save(_snap(), str(path))
    assert path.read_text() == "precious"
    store.save(_snap(), str(path), force=True)
    assert json.loads(path.read_text())["label"] == "good"
    assert [p for p in os.listdir(tmp_path) if p.startswith(".envsnap-")] == []


def test_save_to_missing_dir_is_clear(tmp_path):
    with pytest.raises(EnvsnapError, match="does not exist"):
        store.save(_snap(), str(tmp_path / "nope" / "s.json"))


@pytest.mark.parametrize("content,message", [
    ("", "empty"),
    ("{\"schema_version\": 1, \"sections\": {", "not valid JSON"),
    ("[1, 2]", "top level is list"),
    ("{\"a\": 1}", "no schema_version"),
    ("{\"schema_version\": 99}", "schema_version 99 is not supported"),
    ("{\"schema_version\": \"1\"}", "must be an integer"),
    ("{\"schema_version\": 1, \"sections\": {\"x\": {\"status\": \"weird\"}}}", "invalid status"),
    ("{\"schema_version\": 1, \"schema_version\": 1}", "duplicate key"),
    ("{\"schema_version\": 1, \"runs\": [{\"metrics\": {\"tok_s\": NaN}}]}", "not valid JSON"),
    ("{\"schema_version\": 1, \"runs\": [{\"metrics\": {\"tok_s\": \"fast\"}}]}", "must be a number, got 'fast'"),
])
def test_load_rejects_bad_files_with_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(EnvsnapError) as info:
        store.load(str(path))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_load_rejects_binary_and_non_utf8(tmp_path):
    (tmp_path / "nul").write_bytes(b"{\x00}")
    (tmp_path / "latin").write_bytes(b"{\"schema_version\": 1, \"label\": \"\xff\"}")
    with pytest.raises(EnvsnapError, match="NUL"):
        store.load(str(tmp_path / "nul"))
    with pytest.raises(EnvsnapError, match="UTF-8"):
        store.load(str(tmp_path / "latin"))
    with pytest.raises(EnvsnapError, match="no such file"):
        store.load(str(tmp_path / "missing"))


def test_flatten_paths():
    flat = snapshot.flatten(_snap())
    assert flat["env.vars.A"] == "1"
    assert flat["nvidia.status"] == "unavailable"
    assert flat["env.status"] == "ok"


def test_written_files_get_a_normal_mode_and_keep_a_replaced_files_mode(tmp_path):
    import stat

    path = tmp_path / "report.html"
    old_umask = os.umask(0o022)
    try:
        store.atomic_write_text(str(path), "x")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not the temp file's 0600
        path.chmod(0o640)
        store.atomic_write_text(str(path), "y", force=True)
        assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "y"
    finally:
        os.umask(old_umask)


def test_new_optional_fields_are_typed_and_old_snapshots_still_load():
    from envsnap.capture.collectors import SECTION_SHAPES
    from envsnap.model.schema import validate

    run = {"ok": True, "metrics": {"tok_s": 1.0},
           "telemetry": {"wall_s": 1.0, "cpu_user_s": 0.5, "cpu_system_s": 0.1, "ctx_voluntary": 3, "cpu_set": [0, 1],
                         "watched": {"scheduler_TP0": {"pid": 7, "cpu_user_s": 2.0}},
                         "gpus": {"0": {"util_pct_mean": 97.5, "clock_event_reasons": {"SwPowerCap": 0.2}}}}}
    probe = {"status": "ok", "data": {"records": {"python-0": {"pid": 1, "env_reads": {"X": 2}, "env_copies": 1,
                                                               "started_at": 1.0, "run": 1}},
                                      "records_from_runs": 1}}
    validate({"schema_version": 1, "runs": [run], "sections": {"probe": probe}}, shapes=SECTION_SHAPES)
    validate({"schema_version": 1, "runs": [{"ok": True, "metrics": {"tok_s": 1.0}}]})  # no telemetry: fine
    for bad, where in ((dict(run, telemetry=dict(run["telemetry"], cpu_set="0-1")), "telemetry.cpu_set"),
                       (dict(run, telemetry=dict(run["telemetry"], gpus={"0": {"util_pct_mean": "high"}})),
                        "gpus.0.util_pct_mean")):
        with pytest.raises(EnvsnapError, match=re.escape(where)):
            validate({"schema_version": 1, "runs": [bad]})
    probe["data"]["records"]["python-0"]["env_reads"] = {"X": "often"}
    with pytest.raises(EnvsnapError, match="env_reads"):
        validate({"schema_version": 1, "sections": {"probe": probe}}, shapes=SECTION_SHAPES)


@pytest.mark.parametrize("value,expected", [(3, 3.0), (2.5, 2.5), (0, 0.0), (True, None), ("3", None), (None, None),
                                            ([1], None)])
def test_number_takes_only_json_numbers(value, expected):
    assert snapshot.number(value) == expected and (expected is None) == (snapshot.number(value) is None)
