"""What the SGLang server counted during one run: its `/metrics` read before and after, as deltas.

Counters and histograms (count and sum) only grow while the server lives, so their change across
a run is the run's own: Δ sum / Δ count is the run's mean of a histogram, Δ generation tokens /
Δ verify calls its accept length (capture/collectors/sglang_metrics.py says where each name comes
from). Gauges are not cumulative: a gauge holds the latest value the server set (the scheduler's
last decode-log interval for `sglang:spec_accept_length`), so a run records the value it left
behind, for the gauges that moved during the run. `/server_info`'s `avg_spec_accept_length`, which
bench_serving prints as "Accept length:", is the server's lifetime figure: when the counters give
the run's own accept length, that one is the run's (`spec_accept_length`), and the lifetime one is
left out of the run's metrics (its value kept in the run's note).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from envsnap.capture.collectors import sglang_metrics
from envsnap.measure import metrics

# The run's own accept length, under SGLang's name for the same ratio per request
# (sglang 0.5.23 srt/managers/tokenizer_manager.py:3166-3167 meta_info["spec_accept_length"]).
RUN_ACCEPT_LENGTH = "spec_accept_length"
# Metrics the SGLang benchmarks fill from /server_info's lifetime avg_spec_accept_length (metrics.py).
LIFETIME_ACCEPT_LENGTH = metrics.LIFETIME_ACCEPT_LENGTH_NAMES
SCRAPE_TIMEOUT_S = 10.0


class ServerMetrics:
    """Scrapes `<base>/metrics` around one run: `begin()` before the command, `finish()` after."""

    def __init__(self, base: str, timeout: float = SCRAPE_TIMEOUT_S):
        self.base = base
        self.timeout = timeout
        self.before: Optional[Dict[str, Any]] = None
        self.error: Optional[str] = None

    def scrape(self) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        from envsnap.capture.collectors.sglang import API_KEY_ENV

        text, error, _ = sglang_metrics.fetch(self.base, self.timeout, API_KEY_ENV)
        return (sglang_metrics.compact(text), None) if text is not None else (None, error)

    def begin(self) -> None:
        self.before, self.error = self.scrape()

    def finish(self) -> Tuple[Dict[str, Any], Dict[str, float]]:
        """(the record's "server_metrics", metrics of the run's own to add)."""
        record: Dict[str, Any] = {"url": self.base + "/metrics"}
        after, error = self.scrape()
        if self.before is None or after is None:
            record["error"] = str(self.error or error)
            return record, {}
        record.update(deltas(self.before, after))
        if record.get("reset"):
            return record, {}
        value = sglang_metrics.accept_length(record["counters"])
        return record, ({RUN_ACCEPT_LENGTH: value} if value is not None else {})


def deltas(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """The change of every counter and histogram between two compact scrapes (the series that moved),
    and the gauges that moved with the value they ended at. A counter that went down means the
    server restarted in between: "reset" lists those, and no delta is a run's own then."""
    counters: Dict[str, float] = {}
    reset: List[str] = []
    old = before.get("counters") or {}
    for key, value in sorted((after.get("counters") or {}).items()):
        change = value - old.get(key, 0.0)
        if change < 0:
            reset.append(key)
        elif change:
            counters[key] = change
    histograms: Dict[str, Dict[str, float]] = {}
    old_h = before.get("histograms") or {}
    for key, now in sorted((after.get("histograms") or {}).items()):
        was = old_h.get(key) or {}
        count = now.get("count", 0.0) - was.get("count", 0.0)
        total = now.get("sum", 0.0) - was.get("sum", 0.0)
        if count < 0:
            reset.append(key)
        elif count > 0:
            histograms[key] = {"count": count, "sum": total, "mean": total / count}
    old_g = before.get("gauges") or {}
    gauges = {key: value for key, value in sorted((after.get("gauges") or {}).items())
              if old_g.get(key) != value}
    out: Dict[str, Any] = {"counters": counters, "histograms": histograms, "gauges": gauges}
    if reset:
        out["reset"] = reset
    return out


def merge(metrics: Dict[str, float], own: Dict[str, float], notes: List[str], parsers: List[str]) -> None:
    """Add a run's own server metrics to its parsed ones (in place): the lifetime accept length a
    benchmark printed leaves the metrics when the run's own is there (its value said in a note that
    replaces the parser's caveat), and the parser list names the source."""
    if not own:
        return
    metrics.update(own)
    from_server = any(p.startswith("bench_") for p in parsers)
    for name in LIFETIME_ACCEPT_LENGTH:
        if name in metrics and from_server:
            lifetime = metrics.pop(name)
            notes[:] = [n for n in notes if not n.startswith(f"{name} is the server's running average")]
            notes.append(f"{name} {lifetime:.4g} left out: the server's lifetime average (/server_info); "
                         f"{RUN_ACCEPT_LENGTH} {own.get(RUN_ACCEPT_LENGTH, float('nan')):.4g} is this run's own "
                         "(/metrics: change of generation tokens / change of verify calls)")
    parsers.append("sglang_metrics")


def problem_note(server: Dict[str, Any]) -> Optional[str]:
    """The note a run gets when its server metrics are not the run's own."""
    if server.get("error"):
        return f"server metrics not read: {server['error']}"
    if server.get("reset"):
        return "the server's counters went down during the run (a restart?): no per-run server metric"
    return None
