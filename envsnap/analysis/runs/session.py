"""What a snapshot's run session says about its runs as a series: in words `show` and `diff` share. Light
on imports: `show` loads it for one snapshot."""
from __future__ import annotations

from typing import Any, Dict, Optional

from envsnap.format import plural


def interrupted_series(snap: Dict[str, Any]) -> Optional[str]:
    """'its run series was interrupted after 3 of 5 runs: ...' for a snapshot `envsnap run` wrote when
    stopped early by Ctrl-C, SIGTERM or SIGHUP (run_session.interrupted), else None. `show` and `diff`
    say it in the same words."""
    session = snap.get("run_session")
    if not isinstance(session, dict) or session.get("interrupted") is not True:
        return None
    done, asked = session.get("completed"), session.get("repeat")
    count = (f" after {done} of {plural(asked, 'run')}" if type(done) is int and type(asked) is int
             else "")
    return (f"its run series was interrupted{count}: fewer runs than asked, and the series stopped early "
            "(run it again to measure the whole series)")
