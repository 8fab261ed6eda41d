"""`envsnap run`: capture, then measure a benchmark command into the snapshot."""
from __future__ import annotations

import os

import click

from envsnap.cli import interrupt_on_termination
from envsnap.cli.options import FILE, capture_options, say
from envsnap.errors import EnvsnapError, Interrupted
from envsnap.format import plural
from envsnap.measure import DEFAULT_REPEAT, DEFAULT_RUN_TIMEOUT, DEFAULT_TRACE_WAIT_S
from envsnap.model.types import Section


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("-o", "--output", required=True, type=FILE, help="Snapshot file to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--repeat", "-n", default=DEFAULT_REPEAT, show_default=True, type=click.IntRange(1, 100000),
              help="Measured runs of the command.")
@click.option("--warmup", default=0, show_default=True, type=click.IntRange(0, 10000),
              help="Runs before the measured ones, not recorded.")
@click.option("--metric", "metric_specs", multiple=True, metavar="NAME=REGEX",
              help="Extra metric: the first group of the regex's last match in the output (repeatable).")
@click.option("--direction", "direction_specs", multiple=True, metavar="NAME=higher|lower|none",
              help="Which way is better for a metric, when its name does not say (repeatable).")
@click.option("--run-timeout", default=DEFAULT_RUN_TIMEOUT, show_default=True, type=click.FloatRange(0.1, 7 * 86400),
              help="Seconds one run may take; a run still going then is killed and recorded as failed.")
@click.option("--trace", "trace_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Summarise the profiler traces (Chrome/Kineto .json, .json.gz) each run writes under DIR "
                   "into its record: kernels, CPU ops, launches, steps (not the trace itself).")
@click.option("--profile-steps", type=click.IntRange(1, 100000), metavar="N",
              help="With --sglang-url and --trace: ask the server to profile N decode steps at the start of "
                   "each run (/start_profile, traces written to DIR).")
@click.option("--trace-wait", default=DEFAULT_TRACE_WAIT_S, show_default=True, type=click.FloatRange(0, 3600),
              help="Seconds to wait after a run for the server's trace files (--profile-steps).")
@click.option("--no-observe", is_flag=True,
              help="Do not observe the command's Python processes (modules, variables read, files opened); "
                   "with --probe-dir an installed probe still writes its records there.")
@capture_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(output, force, repeat, warmup, metric_specs, direction_specs, run_timeout, trace_dir, profile_steps,
        trace_wait, no_observe, command, capture_ctx) -> int:
    """Capture a snapshot, then run the benchmark COMMAND and record its metrics in it.

    \b
    envsnap run -o bad.json --repeat 5 --log server.log -- \\
        python -m sglang.bench_serving --backend sglang --num-prompts 200 --output-file bench.jsonl

    Metrics are found without options in SGLang bench_serving and bench_one_batch_server
    output (and the JSONL files they append to: --output-file, --result-filename), in the
    server's "Decode batch" log lines (--log FILE: only what a run appended), and in a
    last output line that is a JSON object. A failed run is recorded as failed and not
    counted. Each run's number, main metric and duration go to stderr as it ends. Ctrl-C,
    SIGTERM and SIGHUP keep the runs completed so far (the snapshot says it was interrupted;
    exit 130); with none completed, nothing is written. Exit 1 when no run succeeded.

    Each run records what it did ("telemetry"): CPU time, context switches, memory, threads and
    CPU set of the command's process tree, the same counters' deltas for the processes given
    with --pid/--sglang, and GPU utilisation, SM clock, power and clock-event reasons with NVML.
    The command's Python processes are observed as the in-process probe would observe them, whether
    or not it is installed (a private sitecustomize first on PYTHONPATH, which then runs the one it
    shadows): the modules they imported and from where, the variables they read, the files they
    opened. Their records join the snapshot's probe section after the runs; with --probe-dir DIR they
    are written there (with the server's), else in a private directory removed afterwards.
    --no-observe leaves the command's environment as it is (but ENVSNAP_PROBE_DIR with --probe-dir).

    With --trace DIR, the profiler traces a run writes under DIR (torch.profiler's
    export_chrome_trace, SGLang's /start_profile: one file per TP rank) are summarised into its
    record; add --sglang-url URL --profile-steps N to have the server profile N decode steps of
    each run. `envsnap diff` then says where the time per step went.
    """
    from envsnap.measure import runs
    from envsnap.measure.parsers import parse_metric_specs
    from envsnap.model import store
    from envsnap.subproc import command_problem

    custom = parse_metric_specs(metric_specs)
    directions = runs.parse_direction_specs(direction_specs)
    profile = _profile_request(trace_dir, profile_steps, trace_wait, capture_ctx.sglang_url)
    store.check_writable(output, force)  # before a capture and runs that may take an hour
    problem = command_problem(command, cwd=os.getcwd(), env=None)
    if problem:  # not a run that failed: nothing to measure, nothing captured or written
        raise EnvsnapError(f"cannot run the benchmark: {problem}")
    from envsnap.probe.launch import ObservedLaunch

    # The command's Python processes are observed as the probe would (probe/launch.py), installed or not:
    # their records go to --probe-dir, else to a private directory read after the runs.
    observed = ObservedLaunch(capture_ctx.probe_dir, observe=not no_observe)
    try:
        return _run(output, force, repeat, warmup, custom, directions, run_timeout, trace_dir, profile, command,
                    capture_ctx, observed)
    finally:
        observed.close()


def _run(output, force, repeat, warmup, custom, directions, run_timeout, trace_dir, profile, command, capture_ctx,
         observed) -> int:
    from envsnap.analysis.runs import stats
    from envsnap.capture import runner
    from envsnap.measure import runs
    from envsnap.model import store

    env = observed.env(os.environ)
    too_few = stats.too_few_runs(repeat, repeat)
    if too_few:
        # Said before the capture and the runs (which may take an hour), while it can still be changed.
        say(f"envsnap run: --repeat {repeat}: {too_few}")

    snap = runner.capture(capture_ctx)
    opts = runs.RunOptions(command=list(command), repeat=repeat, warmup=warmup, custom=custom,
                           logs=list(capture_ctx.logs), timeout=run_timeout, cwd=os.getcwd(), env=env,
                           telemetry=True, watch=_watched_processes(snap), trace_dir=trace_dir, profile=profile,
                           server_metrics=_metrics_url(snap))
    session = runs.RunSession(opts)
    preferred = [name for name, _ in custom]

    def progress(line: str) -> None:
        # Every run's number, metric and duration as it finishes (a series can take an hour): stderr,
        # so stdout (`-o -`) holds the snapshot alone.
        say(f"envsnap run: {line}")

    def finish(interrupted: bool) -> None:
        if session.windows and observed.probe_dir:
            _probe_after_runs(snap, capture_ctx, session.windows, observed)
        if session.maps is not None and session.maps.runs:
            _libraries_after_runs(snap, capture_ctx, session)
        _files_read_after_runs(snap, capture_ctx, session, observed)
        snap["runs"] = session.records
        snap["run_session"] = session.session_info(interrupted)
        runs.merge_directions(snap, directions)
        store.save(snap, output, force=force)

    try:
        with interrupt_on_termination():
            session.execute(progress)
    except KeyboardInterrupt:
        # Ctrl-C, SIGTERM or SIGHUP. Completed runs are real measurements: keep them (an atomic write),
        # marked as an interrupted series. The run in flight is dropped (its process group was killed).
        if not session.records:
            raise Interrupted("interrupted before any run completed; nothing written") from None
        with interrupt_on_termination(ignore=True):  # a second SIGTERM must not cut the write short
            finish(interrupted=True)
        done = plural(len(session.records), "run")
        where = "stdout" if output == "-" else output
        raise Interrupted(f"interrupted; wrote {where} with the {done} completed "
                          f"(of {repeat}; marked interrupted)") from None
    finish(interrupted=False)
    if output != "-":
        say(f"wrote {output}: {runs.summary(session.records, preferred)}")
    if not any(r.get("ok") for r in session.records):
        first = session.records[0].get("error", "failed") if session.records else "no runs"
        say(f"envsnap run: no run succeeded (first error: {first})")
        return 1
    return 0


def _profile_request(trace_dir, steps, wait_s, sglang_url):
    """--profile-steps's request to the server, checked before anything runs (None without it)."""
    from envsnap.errors import EnvsnapError

    if trace_dir is not None:
        if os.path.exists(trace_dir) and not os.path.isdir(trace_dir):
            raise EnvsnapError(f"--trace {trace_dir}: not a directory")
        os.makedirs(trace_dir, exist_ok=True)
    if steps is None:
        return None
    if not sglang_url or trace_dir is None:
        raise EnvsnapError("--profile-steps needs --sglang-url URL (the server to profile) and --trace DIR "
                           "(where it writes the traces)")
    from envsnap.capture.collectors.sglang import normalize_url
    from envsnap.measure.trace_runs import ProfileRequest

    return ProfileRequest(url=normalize_url(sglang_url), steps=steps, output_dir=os.path.abspath(trace_dir),
                          wait_s=wait_s)


def _metrics_url(snap):
    """The --sglang-url server's base URL when the capture found its /metrics served: each run then
    records what the server counted during it (None otherwise)."""
    from envsnap.model.snapshot import section_data

    sglang = section_data(snap, "sglang")
    return sglang.get("url") if isinstance(sglang.get("metrics"), dict) else None


def _watched_processes(snap) -> dict:
    """{process key: pid} of the processes captured with --pid/--sglang: their counters per run."""
    from envsnap.model.snapshot import section_data

    procs = section_data(snap, "processes").get("processes") or {}
    return {key: proc["pid"] for key, proc in sorted(procs.items())
            if isinstance(proc, dict) and isinstance(proc.get("pid"), int) and not isinstance(proc.get("pid"), bool)}


def _probe_after_runs(snap, capture_ctx, windows, observed) -> None:
    """Re-read the probe directory: the records the command's processes wrote during the runs join in."""
    import dataclasses

    from envsnap.capture import runner
    from envsnap.capture.collectors import probe as probe_collector

    before: Section = snap["sections"].get("probe") or Section()
    # A fresh clock (the capture's deadline passed while the runs went on), and the directory the
    # command's records went to.
    ctx = dataclasses.replace(capture_ctx, started=0.0, deadline=0.0, probe_dir=observed.probe_dir)
    again = runner.capture(ctx, collectors=[
        ("probe", lambda c: probe_collector.collect_after_runs(c, before, windows, restore=observed.restore))])
    snap["sections"]["probe"] = again["sections"]["probe"]


def _libraries_after_runs(snap, capture_ctx, session) -> None:
    """What the command's own processes mapped during the runs joins the libraries section."""
    import dataclasses

    from envsnap.capture import runner
    from envsnap.capture.collectors import libraries

    before: Section = snap["sections"].get("libraries") or Section()
    labels = [window["run"] for window in session.windows]
    probe = (snap["sections"].get("probe") or {}).get("data") or {}
    names: set = set()
    for table in ("records", "run_records", "command_records"):
        for record in (probe.get(table) or {}).values():
            for field in ("env_at_start", "env_at_init", "env_at_exit", "env_reads"):
                names.update((record.get(field) or {}) if isinstance(record, dict) else {})
    # A fresh clock: the capture's deadline passed while the runs went on.
    ctx = dataclasses.replace(capture_ctx, started=0.0, deadline=0.0)
    again = runner.capture(ctx, collectors=[
        ("libraries", lambda c: libraries.collect_after_runs(c, before, session.maps.runs, labels, names))])
    snap["sections"]["libraries"] = again["sections"]["libraries"]


def _files_read_after_runs(snap, capture_ctx, session, observed) -> None:
    """The files the measured processes read (the probe's opens, the runs' /proc samples) join as their own
    section, each hashed."""
    import dataclasses

    from envsnap.capture import runner
    from envsnap.capture.collectors import files_read
    from envsnap.model.snapshot import section_data

    probe = section_data(snap, "probe") or {}
    sampled = session.maps.runs if session.maps is not None else []
    ctx = dataclasses.replace(capture_ctx, started=0.0, deadline=0.0)
    again = runner.capture(ctx, collectors=[
        ("files_read", lambda c: files_read.collect_after_runs(c, probe, sampled,
                                                             own=observed.own_dirs))])
    snap["sections"]["files_read"] = again["sections"]["files_read"]
