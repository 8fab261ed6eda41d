"""`envsnap run`: capture, then measure a benchmark command into the snapshot."""
from __future__ import annotations

import os
import sys

import click

from envsnap.cli.options import FILE, capture_options
from envsnap.errors import EnvsnapError
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
@capture_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(output, force, repeat, warmup, metric_specs, direction_specs, run_timeout, trace_dir, profile_steps,
        trace_wait, command, capture_ctx) -> int:
    """Capture a snapshot, then run the benchmark COMMAND and record its metrics in it.

    \b
    envsnap run -o bad.json --repeat 5 --log server.log -- \\
        python -m sglang.bench_serving --backend sglang --num-prompts 200 --output-file bench.jsonl

    Metrics are found without options in SGLang bench_serving and bench_one_batch_server
    output (and the JSONL files they append to: --output-file, --result-filename), in the
    server's "Decode batch" log lines (--log FILE: only what a run appended), and in a
    last output line that is a JSON object. A failed run is recorded as failed and not
    counted. Ctrl-C keeps the runs completed so far (the snapshot says it was interrupted);
    with none completed, nothing is written. Exit 1 when no run succeeded.

    Each run records what it did ("telemetry"): CPU time, context switches, memory, threads and
    CPU set of the command's process tree, the same counters' deltas for the processes given
    with --pid/--sglang, and GPU utilisation, SM clock, power and clock-event reasons with NVML.
    With --probe-dir DIR the command runs with ENVSNAP_PROBE_DIR=DIR, and the probe records its
    processes write during the runs join the snapshot's probe section after the runs.

    With --trace DIR, the profiler traces a run writes under DIR (torch.profiler's
    export_chrome_trace, SGLang's /start_profile: one file per TP rank) are summarised into its
    record; add --sglang-url URL --profile-steps N to have the server profile N decode steps of
    each run. `envsnap diff` then says where the time per step went.
    """
    from envsnap.analysis.runs import stats
    from envsnap.capture import runner
    from envsnap.format import printable
    from envsnap.measure import runs
    from envsnap.measure.parsers import parse_metric_specs
    from envsnap.model import store
    from envsnap.subproc import command_problem

    custom = parse_metric_specs(metric_specs)
    directions = runs.parse_direction_specs(direction_specs)
    profile = _profile_request(trace_dir, profile_steps, trace_wait, capture_ctx.sglang_url)
    store.check_writable(output, force)  # before a capture and runs that may take an hour
    env = None
    if capture_ctx.probe_dir:
        # The command's Python processes write probe records where this run collects them.
        env = dict(os.environ, ENVSNAP_PROBE_DIR=os.path.abspath(capture_ctx.probe_dir))
    problem = command_problem(command, cwd=os.getcwd(), env=env)
    if problem:  # not a run that failed: nothing to measure, nothing captured or written
        raise EnvsnapError(f"cannot run the benchmark: {problem}")
    too_few = stats.too_few_runs(repeat, repeat)
    if too_few:
        # Said before the capture and the runs (which may take an hour), while it can still be changed.
        click.echo(f"envsnap run: --repeat {repeat}: {too_few}", err=True)

    snap = runner.capture(capture_ctx)
    opts = runs.RunOptions(command=list(command), repeat=repeat, warmup=warmup, custom=custom,
                           logs=list(capture_ctx.logs), timeout=run_timeout, cwd=os.getcwd(), env=env,
                           telemetry=True, watch=_watched_processes(snap), trace_dir=trace_dir, profile=profile,
                           server_metrics=_metrics_url(snap))
    session = runs.RunSession(opts)
    progress = None
    if sys.stderr.isatty():
        progress = lambda line: click.echo(printable(f"envsnap run: {line}"), err=True)  # noqa: E731
    preferred = [name for name, _ in custom]

    def finish(interrupted: bool) -> None:
        if capture_ctx.probe_dir and session.windows:
            _probe_after_runs(snap, capture_ctx, session.windows)
        if session.maps is not None and session.maps.runs:
            _libraries_after_runs(snap, capture_ctx, session)
        snap["runs"] = session.records
        snap["run_session"] = session.session_info(interrupted)
        runs.merge_directions(snap, directions)
        store.save(snap, output, force=force)

    try:
        session.execute(progress)
    except KeyboardInterrupt:
        # Completed runs are real measurements: keep them, marked as an interrupted series.
        # The run in flight is dropped (its process group was killed).
        if session.records:
            finish(interrupted=True)
            if output != "-":
                click.echo(f"envsnap run: interrupted; wrote {output} with the "
                           f"{len(session.records)} runs completed", err=True)
        else:
            click.echo("envsnap run: interrupted before any run completed; nothing written", err=True)
        raise
    finish(interrupted=False)
    if output != "-":
        click.echo(f"wrote {output}: {runs.summary(session.records, preferred)}", err=True)
    if not any(r.get("ok") for r in session.records):
        first = session.records[0].get("error", "failed") if session.records else "no runs"
        click.echo(f"envsnap run: no run succeeded (first error: {first})", err=True)
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


def _probe_after_runs(snap, capture_ctx, windows) -> None:
    """Re-read the probe directory: the records the command's processes wrote during the runs join in."""
    from envsnap.capture import runner
    from envsnap.capture.collectors import probe as probe_collector

    before: Section = snap["sections"].get("probe") or Section()
    again = runner.capture(capture_ctx, collectors=[
        ("probe", lambda ctx: probe_collector.collect_after_runs(ctx, before, windows))])
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
