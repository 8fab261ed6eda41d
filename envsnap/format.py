"""The one formatter: numbers, percentages, units and snapshot values as people read them.

Analysis uses it for the few strings its JSON result carries (the verdict's summary line, each
difference's good/bad display value); render/ uses it for everything on screen. Text, JSON and
HTML therefore show the same number the same way. Stdlib only, no envsnap imports: every layer
may use it.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

ARROW = "\u2192"
MINUS = "\u2212"
ELLIPSIS = "\u2026"


def num(value: Any) -> str:
    """A measured value: three significant digits, thousands whole ("94.2", "0.00812", "1,520")."""
    if value is None:
        return "?"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def pct(change: Optional[float]) -> str:
    """A relative change with its sign: "−36%", "+0.4%"; "n/a" when there is none."""
    if change is None or isinstance(change, bool) or not isinstance(change, (int, float)) or not math.isfinite(change):
        return "n/a"
    sign = MINUS if change < 0 else "+"
    magnitude = abs(change)
    return f"{sign}{magnitude:.1f}%" if magnitude < 1 else f"{sign}{magnitude:.0f}%"


def unit(name: str) -> str:
    """The unit a metric's name implies (" tok/s", " ms", " s", "/s"), or ""."""
    lowered = name.lower()
    if "throughput" in lowered or lowered.endswith(("tok_s", "tokens_per_s")):
        return " tok/s"
    if lowered.endswith(("per_s", "per_sec", "_per_second")):
        return "/s"
    if lowered.endswith("_ms") or lowered in ("itl", "tpot", "ttft"):
        return " ms"
    if lowered.endswith(("_s", "_sec", "_seconds")):
        return " s"
    return ""


def ms(value: Any) -> str:
    """A duration in milliseconds, to the grain that matters: "12 ms", "0.4 ms", "85 µs", "0" (None is 0)."""
    number = float(value or 0.0)
    magnitude = abs(number)
    if magnitude >= 10:
        return f"{number:.0f} ms"
    if magnitude >= 0.1:
        return f"{number:.1f} ms"
    if magnitude >= 0.001:
        return f"{number * 1000:.0f} \u00b5s"
    return "0" if number == 0 else f"{number * 1000:.2f} \u00b5s"


def signed_ms(value: Any) -> str:
    """A change of duration in milliseconds with its sign: "+8.7 ms", "−85 µs"."""
    number = float(value or 0.0)
    return ("+" if number >= 0 else MINUS) + ms(abs(number))


def count(value: Any) -> str:
    """A count that may be an average (per step): whole from 10 up or when whole, else one decimal."""
    number = float(value or 0.0)
    return f"{number:.0f}" if number >= 10 or number == int(number) else f"{number:.1f}"


def plural(n: int, word: str, words: Optional[str] = None) -> str:
    """"1 file", "3 files", "0 files": a count with its noun (WORDS for an irregular plural)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


# Characters a terminal acts on instead of showing: the C0 controls (CR and LF start a line of their own, a
# forged "VERDICT" line; ESC starts an ANSI sequence that recolours, moves the cursor, retitles the window),
# DEL and the C1 controls (U+009B is a one-character CSI), and the Unicode line and paragraph separators.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: "re.Match[str]") -> str:
    char = match.group()
    return _ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(text: str) -> str:
    """TEXT with every control character written out ("\\n", "\\r", "\\x1b"...): a value printed as text is
    one line that shows what it holds, whatever it holds (JSON escapes them itself, HTML shows them inert)."""
    return _UNPRINTABLE.sub(_escape, text) if _UNPRINTABLE.search(text) else text


# In a document with lines of its own (the HTML report's <pre> blocks of file text), line ends and tabs are
# layout; every other control is shown written out.
_UNPRINTABLE_IN_DOCUMENT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable_document(text: str) -> str:
    """TEXT with every control character but line ends and tabs written out ("\\x1b")."""
    return _UNPRINTABLE_IN_DOCUMENT.sub(_escape, text) if _UNPRINTABLE_IN_DOCUMENT.search(text) else text


def text_lines(lines: Sequence[str]) -> str:
    """Lines of text output joined by newlines, each made printable: a value inside one cannot start
    another."""
    return "\n".join(printable(line) for line in lines)


def clip(text: str, limit: int = 160) -> str:
    """TEXT cut to LIMIT characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def cut(text: str, limit: int) -> str:
    """TEXT cut to LIMIT characters, saying how much was cut (for tables with room to say so)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{ELLIPSIS} (+{len(text) - limit} chars)"


def span(items: Sequence[str]) -> str:
    """A list of instances, shortened when long: "0, 1, 2" / "0 … 7 (8)"."""
    items = list(items)
    return ", ".join(items) if len(items) <= 3 else f"{items[0]} {ELLIPSIS} {items[-1]} ({len(items)})"


def value(raw: Any, limit: int = 300) -> str:
    """Any JSON value as one line of text ("—" for none), cut at LIMIT characters."""
    if raw is None:
        text = "\u2014"
    elif isinstance(raw, bool):
        text = "true" if raw else "false"
    elif isinstance(raw, str):
        text = raw
    elif isinstance(raw, (int, float)):
        text = repr(raw)
    else:
        try:
            text = json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(raw)
    return cut(text, limit)


def short_hash(raw: Any) -> str:
    """A hex digest shortened to 12 characters; anything else as a short value."""
    if isinstance(raw, str) and re.fullmatch(r"[0-9a-fA-F]{16,}", raw):
        return raw[:12]
    return value(raw, 40)


def clock(epoch: float) -> str:
    """A moment as people read it in a log: '2026-12-04 13:05:09 UTC'."""
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def size(nbytes: float) -> str:
    """A byte count people can read: "1.5 GiB"."""
    for name, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.1f} {name}"
    return f"{nbytes} B"


def natural_key(text: str) -> Tuple[Any, ...]:
    """Sort key that orders "gpu10" after "gpu9"."""
    return tuple(int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", str(text)))


def instances(values: Dict[str, Any]) -> str:
    """{instance: value} of workers or ranks that disagree: "mixed: 0 on 1, 2; 1 on 0"."""
    by_value: Dict[str, List[str]] = {}
    for inst, v in sorted(values.items()):
        by_value.setdefault("unset" if v is None else str(v), []).append(inst)
    return clip("mixed: " + "; ".join(f"{v} on {span(insts)}" for v, insts in sorted(by_value.items())))


def direction(name: str) -> str:
    """'higher is better', 'lower is better' or 'no better direction' (one wording for every output)."""
    return "no better direction" if name == "none" else f"{name} is better"
