"""The profiler traces of one run: files written under `envsnap run --trace DIR` during it, summarised.

A run record gets

    "trace": {"source": "dir" | "sglang" | "attach", "files": [traces.summarize(...), ...],
              "notes": [...], "requested_steps": n (sglang)}

With an SGLang server (`--sglang-url` and `--profile-steps N`), each run first asks the server to profile
N decode steps through `/start_profile` (sglang 0.5.23 srt/entrypoints/http_server.py:1221-1229, GET or
POST with a ProfileReq body, srt/managers/io_struct.py:2374-2400): `output_dir` DIR, `num_steps` N,
`profile_by_stage` true (prefill and decode profiled apart, N steps each, the decode file named
`...-TP-{rank}-DECODE.trace.json.gz`: srt/managers/scheduler_components/profiler_manager.py:146-151,
413-443, 336-358), `activities` ["CPU", "GPU"], `with_stack` and `record_shapes` false (smaller files;
the server ANDs them with SGLANG_PROFILE_WITH_STACK / SGLANG_PROFILE_RECORD_SHAPES,
srt/managers/tokenizer_control_mixin.py:408-415), and a `profile_id` naming the run. The server writes the
files when its steps are done, in the background of the run: after the command ends, envsnap waits until
the files stop growing (TRACE_SETTLE_S), at most --trace-wait seconds.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from envsnap.measure import DEFAULT_TRACE_WAIT_S, traces
from envsnap.redact import redact_text

TRACE_SETTLE_S = 1.0  # a file whose size and mtime held this long is complete (gzip writes it in one go)
MAX_FILES_PER_RUN = 64


@dataclass
class ProfileRequest:
    """What to ask an SGLang server for at the start of each run."""

    url: str  # normalized base URL (capture/collectors/sglang.normalize_url)
    steps: int
    output_dir: str
    wait_s: float = DEFAULT_TRACE_WAIT_S


def start_profile(request: ProfileRequest, profile_id: str, timeout: float = 30.0) -> Optional[str]:
    """POST /start_profile; None when the server accepted it, else why not (one line)."""
    import urllib.error
    import urllib.request

    from envsnap.capture.collectors.sglang import API_KEY_ENV

    body = {"output_dir": request.output_dir, "num_steps": request.steps, "activities": ["CPU", "GPU"],
            "profile_by_stage": True, "with_stack": False, "record_shapes": False, "profile_id": profile_id}
    headers = {"Content-Type": "application/json", "User-Agent": "envsnap"}
    if os.environ.get(API_KEY_ENV):
        headers["Authorization"] = f"Bearer {os.environ[API_KEY_ENV]}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    http = urllib.request.Request(request.url + "/start_profile", data=json.dumps(body).encode(), headers=headers,
                                  method="POST")
    try:
        with opener.open(http, timeout=timeout) as response:
            response.read(65536)
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", "replace").strip() if exc.fp else ""
        return redact_text(f"/start_profile: HTTP {exc.code} {detail or exc.reason}")
    except (urllib.error.URLError, OSError) as exc:
        return redact_text(f"/start_profile: cannot reach {request.url}: {getattr(exc, 'reason', exc)}")
    return None


class TraceWatch:
    """Around one run: remember the directory's trace files, ask SGLang to profile, then summarise what
    the run wrote."""

    def __init__(self, directory: str, profile: Optional[ProfileRequest] = None):
        self.directory = os.path.abspath(directory)
        self.profile = profile
        self.before: Dict[str, Tuple[int, int]] = {}
        self.notes: List[str] = []
        self.profile_id = ""

    def begin(self, label: str) -> None:
        self.notes = []
        self.before = traces.listing(self.directory)
        if self.profile is not None:
            self.profile_id = f"envsnap-{label}-{int(time.time() * 1000)}"
            error = start_profile(self.profile, self.profile_id)
            if error:
                self.notes.append(error)

    def _settled(self) -> List[str]:
        """The files written since begin(), once they stopped changing (SGLang writes them after its steps)."""
        deadline = time.monotonic() + (self.profile.wait_s if self.profile is not None else 0.0)
        expected = self.profile is not None and not self.notes
        last: Dict[str, Tuple[int, int]] = {}
        while True:
            now = {p: s for p, s in traces.listing(self.directory).items() if self.before.get(p) != s}
            if self.profile_id:
                ours = {p: s for p, s in now.items() if self.profile_id in os.path.basename(p)}
                now = ours or now
            decode = [p for p in now if "-DECODE." in os.path.basename(p)]
            stable = bool(now) and now == last
            if stable and (not expected or decode):
                return sorted(now)
            if time.monotonic() >= deadline:
                if expected and not decode:
                    self.notes.append(f"no decode-step trace from SGLang within {self.profile.wait_s:g} s"  # type: ignore[union-attr]
                                      " (were fewer decode steps run than asked for?)")
                return sorted(now)
            last = now
            time.sleep(TRACE_SETTLE_S if now else 0.25)

    def finish(self) -> Dict[str, Any]:
        files = self._settled()
        return summarize_files(files, "sglang" if self.profile is not None else "dir",
                               self.profile.steps if self.profile is not None else None, self.notes)


def summarize_files(paths: List[str], source: str, requested_steps: Optional[int] = None,
                    notes: Optional[List[str]] = None) -> Dict[str, Any]:
    """The run record's "trace" for these files; a file that is not a trace becomes a note, never an error."""
    notes = list(notes or [])
    files = []
    if len(paths) > MAX_FILES_PER_RUN:
        notes.append(f"{len(paths)} trace files; the first {MAX_FILES_PER_RUN} by name summarised")
        paths = sorted(paths)[:MAX_FILES_PER_RUN]
    for path in paths:
        try:
            files.append(traces.summarize(path, requested_steps))
        except traces.TraceError as exc:
            notes.append(redact_text(str(exc)))
    if not paths:
        notes.append("no trace file was written during the run")
    out: Dict[str, Any] = {"source": source, "files": files}
    if requested_steps:
        out["requested_steps"] = int(requested_steps)
    if notes:
        out["notes"] = notes
    return out
