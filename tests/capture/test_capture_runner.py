import time

from envsnap.capture import runner
from envsnap.capture.base import CaptureContext, ok, unavailable
from envsnap.capture.collectors import COLLECTOR_NAMES


def _hangs(ctx):
    time.sleep(30)
    return ok({})


def _raises(ctx):
    raise RuntimeError("boom")


def _fine(ctx):
    return ok({"x": 1, "token_url": "https://u:hunter2@h/"})


def _bad_shape(ctx):
    return [1, 2]


def test_runner_bounds_time_and_records_failures():
    ctx = CaptureContext(timeout=1.0)
    start = time.monotonic()
    snap = runner.capture(ctx, collectors=[("hang", _hangs), ("boom", _raises), ("fine", _fine),
                                            ("shape", _bad_shape), ("na", lambda c: unavailable("no GPU"))])
    assert time.monotonic() - start < 3.0
    sections = snap["sections"]
    assert sections["hang"]["status"] == "timeout"
    assert sections["boom"]["status"] == "error" and "boom" in sections["boom"]["error"]
    assert sections["fine"]["status"] == "ok" and sections["fine"]["data"]["x"] == 1
    assert "hunter2" not in str(sections["fine"])
    assert sections["shape"]["status"] == "error"
    assert sections["na"] == {"status": "unavailable", "reason": "no GPU", "elapsed_s": sections["na"]["elapsed_s"]}


def test_every_collector_section_follows_the_rules(tmp_path):
    """The rules test over every real collector's output: JSON-serialisable, valid status, key format."""
    import json

    snap = runner.capture(CaptureContext(timeout=60, cwd=str(tmp_path)))
    assert list(snap["sections"]) == COLLECTOR_NAMES
    text = json.dumps(snap, sort_keys=True, allow_nan=False)
    assert text
    for name, section in snap["sections"].items():
        assert section["status"] in ("ok", "unavailable", "error", "timeout"), name
        assert isinstance(section.get("data", {}), dict), name
        if section["status"] == "unavailable":
            assert section.get("reason"), name
        if section["status"] in ("error", "timeout"):
            assert section.get("error"), name

        def walk(obj, path):
            if isinstance(obj, dict):
                for k, v in obj.items():
                    assert isinstance(k, str) and k != "", f"{path}: bad key {k!r}"
                    walk(v, f"{path}.{k}")
            elif isinstance(obj, list):
                for i, v in enumerate(obj):
                    walk(v, f"{path}[{i}]")
            else:
                assert obj is None or isinstance(obj, (str, int, float, bool)), f"{path}: {type(obj)}"
        walk(section, name)


def test_cyclic_gc_paused_during_capture_and_restored_after_overlapping_captures():
    """The runner pauses the cyclic garbage collector while collectors run (a cold capture's
    per-file bookkeeping made collections cost ~10% of it) and turns it back on when the last of
    two overlapping captures ends; a collector that was off before stays off."""
    import gc
    import threading

    seen = []
    first_running, second_done = threading.Event(), threading.Event()

    def waits_for_second(ctx):
        seen.append(gc.isenabled())
        first_running.set()
        second_done.wait(10)
        seen.append(gc.isenabled())
        return ok({})

    def records(ctx):
        seen.append(gc.isenabled())
        return ok({})

    assert gc.isenabled()
    first = threading.Thread(target=lambda: runner.capture(CaptureContext(timeout=20),
                                                           collectors=[("slow", waits_for_second)]))
    first.start()
    assert first_running.wait(10)
    runner.capture(CaptureContext(timeout=20), collectors=[("quick", records)])
    # The second capture ended while the first still runs: the collector stays paused.
    assert not gc.isenabled()
    second_done.set()
    first.join(20)
    assert seen == [False, False, False]
    assert gc.isenabled()

    gc.disable()
    try:
        runner.capture(CaptureContext(timeout=20), collectors=[("quick", records)])
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
