"""The neighbours' readings (capture/collectors/neighbours.py, cpu_window.py,
gpu_processes.py) on real processes: busy loops, a process that
reaps busy children, one that ends mid-window, one whose command line holds a secret, the test's own busy
child (not a neighbour), and other processes on a GPU (the one fake: NVML's answers, tests/helpers/nvml.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from helpers.neighbours import Neighbour
from helpers.nvml import make_fake_pynvml

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import cpu_window, gpu_processes, neighbours
from envsnap.model.schema import NEIGHBOURS_SHAPE, _checker

# Beyond pid_max (4194304 at most on 64-bit Linux, kernel/pid.c PID_MAX_LIMIT): no process here has it,
# as a process of another pid namespace (the host's, seen from a container) would not.
INVISIBLE_PID = 4194304 + 77


ALL = 10_000  # list every other process: this machine is shared, a test's process need not be among the busiest


def _entry(data, marker):
    found = [e for e in data["top"] if marker in e["command"]]
    assert found, [e["command"] for e in data["top"]]
    return found[0]


def test_a_busy_neighbour_is_listed_with_its_command_user_and_cpus():
    busy = Neighbour("nbr-busy-7f3a", "busy", 30)
    try:
        started = time.monotonic()
        before = _ticks(busy.pid)
        window = cpu_window.CpuWindow(os.getpid())
        opened = time.monotonic()
        time.sleep(0.6)
        closing = time.monotonic()
        window.scan()
        used = _ticks(busy.pid) - before  # the truth, read apart: the window falls inside these readings
        ended = time.monotonic()
        data = window.result(listed=ALL)
    finally:
        busy.stop()
    entry = _entry(data, "nbr-busy-7f3a")
    assert entry["pid"] == busy.pid and entry["ended"] is False and entry["user"]
    ticks = round(entry["cpu_s"] * cpu_window.CLK_TCK)  # cpu_s is ticks / CLK_TCK: 0.56 * 100 is 56.00000000000001
    assert 0 < ticks <= used  # its ticks, whatever else loads the machine
    # What the truth counts beyond the window: the busy loop's ticks while the two scans ran (~2 ms each when the
    # machine is quiet, far longer beside other busy processes), at most one tick per tick of wall time, plus
    # a tick of rounding at each end.
    outside = ((opened - started) + (ended - closing)) * cpu_window.CLK_TCK
    assert ticks >= used - outside - 2, (entry, used, outside)
    assert data["others_cpus"] >= entry["cpus"] and data["cpus_online"] >= 1
    assert 0 <= data["steal_pct"] <= 100 and data["host_busy_cpus"] >= entry["cpus"] * 0.8
    _checker(NEIGHBOURS_SHAPE)(data, 0)


def test_our_own_children_are_not_neighbours():
    mine = subprocess.Popen([sys.executable, "-c", "import time\nt=time.monotonic()+3\nwhile time.monotonic()<t: pass",
                             "nbr-mine-51c"])
    try:
        window = cpu_window.CpuWindow(os.getpid())
        time.sleep(0.5)
        window.scan()
        data = window.result(listed=ALL)
    finally:
        mine.kill()
        mine.wait()
    # By pid: the marker alone also matches this test's child in another session running the suite beside
    # this one (a shared box; seen), which is rightly a neighbour there.
    assert not [e for e in data["top"] if e["pid"] == mine.pid]
    assert mine.pid in window.own_pids


def _ticks(pid):
    """utime + stime + cutime + cstime of a live process (proc(5) fields 14-17)."""
    text = open(f"/proc/{pid}/stat", "rb").read()
    fields = text[text.rindex(b")") + 2:].split()
    return sum(int(x) for x in fields[11:15])


@pytest.mark.slow
def test_children_a_neighbour_reaps_count_for_it_once():
    spawner = Neighbour("nbr-spawner-c0d", "spawner", 30)
    try:
        time.sleep(0.2)
        before = _ticks(spawner.pid)
        window = cpu_window.CpuWindow(os.getpid())
        for _ in range(8):  # scans see its children alive: what they used must not count twice
            time.sleep(0.12)
            window.scan()
        used = _ticks(spawner.pid) - before
        data = window.result(listed=ALL)  # the truth: itself and every child it reaped, over the window
    finally:
        spawner.stop()
    entry = _entry(data, "nbr-spawner-c0d")
    children = [key for key in window.last.keys() - window.live if window.last[key].ppid == spawner.pid]
    assert children, "no child was seen alive and then reaped"
    counted = round(entry["cpu_s"] * cpu_window.CLK_TCK)
    assert counted <= used + 2, (counted, used)  # each child's time once, in the child or in its parent
    # What it and the children it reaped used is its own; a child alive at either end of the window is
    # counted from or up to its reading (the children run 0.3 s each).
    assert counted >= used - 0.6 * cpu_window.CLK_TCK, (counted, used)
    assert all(window._ticks()[key] == 0 for key in children)  # folded into their parent, not listed twice


@pytest.mark.slow
def test_a_grandchild_reaped_through_an_ended_child_counts_only_inside_the_window():
    # A shell -> timeout -> test suite chain: the suite ran before the window, ends inside it, and both it and
    # its parent are reaped during the window: the shell's cutime then jumps by the suite's whole lifetime.
    chain = Neighbour("nbr-chain-77a", "chain", 1.6)
    try:
        time.sleep(1.0)  # the grandchild has been busy for about a second before the window
        window = cpu_window.CpuWindow(os.getpid())
        for _ in range(5):
            time.sleep(0.25)
            window.scan()
        data = window.result(listed=ALL)
    finally:
        chain.stop()
    total = sum(e["cpu_s"] for e in data["top"] if "nbr-chain-77a" in e["command"] or "time.monotonic" in e["command"])
    # What the grandchild used inside the window, never its whole lifetime (counted twice, that was ~1.4 s).
    assert total <= 0.85, data["top"]  # the grandchild was busy about 0.6 s inside the window (1.6 s in all)
    assert all(e["cpus"] <= 1.05 for e in data["top"]), data["top"]


def _cpu_s(pid):
    """A process's CPU seconds so far (proc(5) stat utime + stime, in clock ticks)."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_neighbour_that_ends_mid_window_counts_until_its_last_reading():
    # It ends when the test ends it, after a reading that saw it busy: a 0.5 s neighbour raced the window
    # on a loaded machine (it could end before the window's first scan, or get almost no CPU).
    short = Neighbour("nbr-short-9e1", "busy", 60)
    try:
        window = cpu_window.CpuWindow(os.getpid())
        at_start = _cpu_s(short.pid)
        deadline = time.monotonic() + 60
        while _cpu_s(short.pid) < at_start + 0.15 and time.monotonic() < deadline:
            time.sleep(0.02)
        window.scan()
    finally:
        short.stop()
    window.scan()
    data = window.result(listed=ALL)
    entry = _entry(data, "nbr-short-9e1")
    assert entry["ended"] is True and entry["cpu_s"] > 0.05
    assert data["ended"] >= 1


def test_a_secret_in_a_neighbours_command_line_is_redacted():
    busy = Neighbour("nbr-secret-1a2", "busy", 30, extra_args=["--api-key", "sk-live-abcdefghijklmnop1234"])
    try:
        window = cpu_window.CpuWindow(os.getpid())
        time.sleep(0.4)
        window.scan()
        data = window.result(listed=ALL)
    finally:
        busy.stop()
    entry = _entry(data, "nbr-secret-1a2")
    assert "sk-live-abcdefghijklmnop1234" not in entry["command"] and "redacted:" in entry["command"]


HOSTILE_COMM = "a) R 1 1\n\x1b[2J"  # a ")" and fields of its own in the name, a newline, an escape sequence


def test_a_hostile_name_and_command_line_of_another_user_are_read_right_and_printed_on_one_line():
    uid = 65534 if os.geteuid() == 0 else None  # another user's process when the test may start one
    busy = Neighbour("nbr-hostile-2b9", "busy", 30, comm=HOSTILE_COMM,
                     extra_args=["--note", "line1\nFAKE 1. [0.99] cause\x1b[31m", "\udcff\udcfe"], uid=uid)
    try:
        window = cpu_window.CpuWindow(os.getpid())
        time.sleep(0.3)
        table = window.scan()
        data = window.result(listed=ALL)
    finally:
        busy.stop()
    stat = table[busy.pid]
    assert stat.comm == HOSTILE_COMM and stat.state == "R" and stat.own_ticks > 0 and stat.processor >= 0
    entry = _entry(data, "nbr-hostile-2b9")
    assert "\n" not in entry["command"] and "\x1b" not in entry["command"], entry["command"]
    assert "line1\\nFAKE 1. [0.99] cause\\x1b[31m" in entry["command"] and "\ufffd\ufffd" in entry["command"]
    if uid is not None:
        import pwd

        try:
            assert entry["user"] == pwd.getpwuid(uid).pw_name
        except KeyError:  # no name for that uid here: the number
            assert entry["user"] == str(uid)
    assert all("\n" not in line and "\x1b" not in line for line in neighbours.summarize(data))
    # Its name alone (a zombie, a process that hid its command line): printable too.
    assert cpu_window.read_command(INVISIBLE_PID, HOSTILE_COMM)[0] == "[a) R 1 1\\n\\x1b[2J]"


def test_the_cpus_the_work_may_use_and_who_ran_on_them():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    mine, other = cpus[0], cpus[1]
    on_mine = Neighbour("nbr-on-mine-61e", "busy", 30)
    elsewhere = Neighbour("nbr-elsewhere-61e", "busy", 30)
    os.sched_setaffinity(on_mine.pid, {mine})
    os.sched_setaffinity(elsewhere.pid, {other})
    os.sched_setaffinity(0, {mine})  # envsnap's CPU set, which a command it starts inherits: one CPU
    try:
        window = cpu_window.CpuWindow(os.getpid())
        time.sleep(0.5)
        window.scan()
        data = window.result(listed=ALL)
    finally:
        os.sched_setaffinity(0, cpus)
        on_mine.stop()
        elsewhere.stop()
    assert data["cpu_set_size"] == 1 and data["cpu_set_busy_cpus"] >= 0.8, data  # a busy loop kept it busy
    assert _entry(data, "nbr-on-mine-61e")["on_cpu_set"] is True
    assert _entry(data, "nbr-elsewhere-61e")["on_cpu_set"] is False
    _checker(NEIGHBOURS_SHAPE)(data, 0)
    # Back on all its CPUs: a CPU set is said only when it is smaller than the machine.
    window = cpu_window.CpuWindow(os.getpid())
    time.sleep(0.05)
    window.scan()
    whole = window.result()
    assert ("cpu_set_size" in whole) == (len(cpus) < whole["cpus_online"]), whole


def test_a_captures_window_lasts_while_the_other_collectors_run():
    import threading

    # The runner's thread of a slower collector (capture/runner.py names it envsnap-run-<section>).
    slower = threading.Thread(target=time.sleep, args=(0.35,), name="envsnap-run-packages", daemon=True)
    slower.start()
    data = neighbours.collect(CaptureContext())["data"]
    slower.join()
    assert 0.33 <= data["window_s"] <= neighbours.CAPTURE_WINDOW_S + 0.1, data["window_s"]


def test_the_window_ends_as_the_last_other_collector_ends_not_at_its_next_reading(monkeypatch):
    import threading

    from envsnap.capture.base import Progress

    # Readings a second apart: a window that waited for its next reading would run to its longest (0.5 s).
    monkeypatch.setattr(neighbours, "CAPTURE_RUNNABLE_EVERY_S", 1.0)
    ctx = CaptureContext()
    ctx.progress = Progress(["neighbours", "packages"])
    threading.Timer(0.2, ctx.progress.done, args=("packages",)).start()  # the runner marks it done at 0.2 s
    data = neighbours.collect(ctx)["data"]
    assert 0.19 <= data["window_s"] < 0.4 < neighbours.CAPTURE_WINDOW_S, data["window_s"]


def test_progress_waits_for_the_others_and_times_out_when_they_run_on():
    import threading

    from envsnap.capture.base import Progress

    progress = Progress(["neighbours", "git", "host"])
    progress.done("git")
    started = time.monotonic()
    assert progress.wait_for_others("neighbours", 0.05) is False  # host still runs
    assert time.monotonic() - started >= 0.04
    threading.Timer(0.05, progress.done, args=("host",)).start()
    assert progress.wait_for_others("neighbours", 5.0) is True
    assert time.monotonic() - started < 2.0
    assert progress.wait_for_others("neighbours", 0.0) is True


def test_a_window_opened_at_the_start_leaves_out_the_processes_given_later_with_pid():
    busy = Neighbour("nbr-given-9c2e", "busy", 30)
    other = Neighbour("nbr-other-5d1f", "busy", 30)
    try:
        neighbours.open_window_at_start()  # as cli.main does for `capture`, before the options are parsed
        ctx = CaptureContext(pids=[busy.pid])
        neighbours.open_window(ctx)
        assert neighbours._opened_at_start == []  # taken: a second capture in this process opens its own
        data = neighbours.collect(ctx)["data"]
    finally:
        busy.stop()
        other.stop()
    commands = [e["command"] for e in data["top"]]
    assert not any("nbr-given-9c2e" in c for c in commands), commands
    assert any("nbr-other-5d1f" in c for c in commands) or len(commands) == cpu_window.TOP_N, commands


def test_unreadable_processes_are_counted_with_the_reason_never_raised():
    assert cpu_window.read_proc_stat(INVISIBLE_PID) == "exited while read"
    command, note = cpu_window.read_command(INVISIBLE_PID, "gone")
    assert command == "[gone]" and "ended" in note


def test_the_collector_records_a_window_with_runnable_threads(monkeypatch):
    # The longest window made long, so that "alone, the shortest window" holds however late a loaded
    # machine wakes the sampling loop (its 0.03 s sleeps overshoot there: 2 readings in 0.15 s were seen).
    monkeypatch.setattr(neighbours, "CAPTURE_WINDOW_S", 30.0)
    busy = Neighbour("nbr-capture-44b", "busy", 30)
    try:
        section = neighbours.collect(CaptureContext(), nvml=make_fake_pynvml())
    finally:
        busy.stop()
    assert section["status"] == "ok"
    data = section["data"]
    # Alone (no capture's collectors beside it), the shortest window: the runnable count read along it,
    # at most once per period.
    assert neighbours.CAPTURE_MIN_WINDOW_S <= data["window_s"] < 10.0, data["window_s"]
    samples = data["runnable"]["samples"]
    assert 1 <= samples <= data["window_s"] / neighbours.CAPTURE_RUNNABLE_EVERY_S + 1, (samples, data["window_s"])
    assert data["runnable"]["max"] >= 1
    assert "loadavg" in data["runnable"]["source"]
    # Listed, unless this shared machine had TOP_N processes busier than a busy loop at that moment.
    assert (any("nbr-capture-44b" in e["command"] for e in data["top"]) or len(data["top"]) == cpu_window.TOP_N
            and min(e["cpus"] for e in data["top"]) > 0), data["top"]
    assert data["gpu"] == "nvml" and data["gpus"] == {"0": {"processes": []}}
    _checker(NEIGHBOURS_SHAPE)(data, 0)
    assert all(e["command"] in "\n".join(neighbours.summarize(data)) for e in data["top"])


def test_gpu_processes_are_told_apart_own_neighbour_and_not_visible(tmp_path):
    fake_lib = tmp_path / "libcuda.so.1"  # a real mapping of a file named like the driver library
    fake_lib.write_bytes(b"\0" * 4096)
    other = Neighbour("nbr-gpu-job-3c", "sleep", 30, mapped=str(fake_lib))
    stranger = Neighbour("nbr-not-on-gpu-5d", "sleep", 30)  # a pid here that maps no GPU library
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    listed = {0: [(mine.pid, 2 << 30), (other.pid, 40 << 30), (stranger.pid, 1 << 30), (INVISIBLE_PID + 1, 5 << 30)]}
    nvml = make_fake_pynvml(processes=lambda i: listed.get(i, []),
                            process_util=lambda i: [(other.pid, 85)] if i == 0 else [])
    nvml.nvmlInit()
    try:
        window = cpu_window.CpuWindow(os.getpid())
        gpus = gpu_processes.GpuProcesses(nvml, [nvml.nvmlDeviceGetHandleByIndex(0)])
        time.sleep(0.01)
        gpus.read("before", window)
        window.scan()
        listed[0].append((INVISIBLE_PID, None))  # an invisible one there only while the run ran
        gpus.read("during", window)
        listed[0].pop()
        gpus.read("after", window)
        result = gpus.result(during_only_is_own=True)
    finally:
        for n in (other, stranger):
            n.stop()
        mine.kill()
        mine.wait()
    procs = {p["pid"]: p for p in result["0"]["processes"]}
    assert procs[mine.pid]["own"] is True and procs[mine.pid]["used_memory_bytes"] == 2 << 30
    job = procs[other.pid]
    assert job["own"] is False and "nbr-gpu-job-3c" in job["command"] and job["used_memory_bytes"] == 40 << 30
    assert job["sm_util_pct_mean"] == 85 and job["util_samples"] >= 1
    # A pid of this namespace that maps no GPU library is not the process NVML meant (the host's pid).
    assert "command" not in procs[stranger.pid] and procs[stranger.pid]["own"] is False
    assert "not visible" in procs[stranger.pid]["why"]
    hidden = procs[INVISIBLE_PID]
    assert hidden["own"] is None and "probably the run's own" in hidden["why"] and "used_memory_bytes" not in hidden
    assert hidden["seen"] == ["during"]
    # Invisible too, but on the GPU before the run began: not the run's.
    assert procs[INVISIBLE_PID + 1]["own"] is False and procs[INVISIBLE_PID + 1]["seen"] == ["before", "during", "after"]


def test_nvml_errors_are_recorded_per_gpu():
    nvml = make_fake_pynvml(errors={"nvmlDeviceGetComputeRunningProcesses": 3})  # NVML_ERROR_NOT_SUPPORTED
    nvml.nvmlInit()
    gpus = gpu_processes.GpuProcesses(nvml, [nvml.nvmlDeviceGetHandleByIndex(0)])
    gpus.read("capture", cpu_window.CpuWindow(os.getpid()))
    result = gpus.result(during_only_is_own=False)
    assert result["0"]["processes"] == [] and "Not Supported" in result["0"]["error"]
