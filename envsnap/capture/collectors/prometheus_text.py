"""A reader of the Prometheus text exposition format (what SGLang's `/metrics` serves).

The format, from prometheus.io "Exposition formats" (text-based format, version 0.0.4):
  * lines end with '\\n'; blank lines are ignored; leading and trailing blanks are ignored;
  * `# HELP name docstring` and `# TYPE name counter|gauge|histogram|summary|untyped` describe a
    family; any other line starting with '#' is a comment;
  * a sample is `name[{label="value",...}] value [timestamp]`, label values escaping `\\\\`, `\\"`
    and `\\n`, the value a Go float (`NaN`, `+Inf`, `-Inf` included);
  * a histogram `x` has samples `x_bucket{le=...}`, `x_sum`, `x_count`; a summary `x{quantile=...}`,
    `x_sum`, `x_count`. prometheus_client (what SGLang uses, sglang 0.5.23 srt/utils/common.py:2845-2849:
    `make_asgi_app` over a `multiprocess.MultiProcessCollector`) names a counter's family `x_total`
    in this format and, outside multiprocess mode, adds `x_created` samples (a start time).

Written here rather than taken from prometheus_client (its `text_string_to_metric_families` does the
same) so that envsnap keeps its dependencies: about a hundred lines, tested against the output of a
real prometheus_client registry (tests/capture/test_prometheus_text.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

Labels = Tuple[Tuple[str, str], ...]
# Suffixes a sample name adds to its family's name (histogram, summary, counter, OpenMetrics' info and
# gauge histogram): the sample belongs to the family its name minus one of these names, when declared.
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_gcount", "_gsum", "_info")
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_REST = _NAME_START | set("0123456789")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass
class Family:
    """One metric family: its type (as declared, else "untyped"), help text and samples."""
    name: str
    type: str = "untyped"
    help: str = ""
    samples: List[Tuple[str, Labels, float]] = field(default_factory=list)


class ParseError(ValueError):
    """A line that is not in the text format (its number and why)."""


def _name(line: str, pos: int) -> Tuple[str, int]:
    if pos >= len(line) or line[pos] not in _NAME_START:
        raise ParseError(f"expected a name at column {pos + 1}")
    end = pos + 1
    while end < len(line) and line[end] in _NAME_REST:
        end += 1
    return line[pos:end], end


def _labels(line: str, pos: int) -> Tuple[Labels, int]:
    """The labels after '{' at pos - 1, up to and past the closing '}'."""
    found: List[Tuple[str, str]] = []
    while True:
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == "}":
            return tuple(sorted(found)), pos + 1
        name, pos = _name(line, pos)
        if line[pos:pos + 2] != '="':
            raise ParseError(f"expected =\" after label {name}")
        pos += 2
        chars: List[str] = []
        while True:
            if pos >= len(line):
                raise ParseError(f"label {name}: unterminated value")
            char = line[pos]
            if char == '"':
                pos += 1
                break
            if char == "\\" and pos + 1 < len(line):
                chars.append(_ESCAPES.get(line[pos + 1], "\\" + line[pos + 1]))
                pos += 2
                continue
            chars.append(char)
            pos += 1
        found.append((name, "".join(chars)))
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == ",":
            pos += 1
        elif pos >= len(line) or line[pos] != "}":
            raise ParseError(f"expected , or }} after label {name}")


def _value(text: str) -> float:
    """A Go ParseFloat value: plain floats, NaN, +Inf, -Inf (any case)."""
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    if lowered == "nan":
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{text!r} is not a number") from None


def _sample(line: str) -> Tuple[str, Labels, float]:
    name, pos = _name(line, 0)
    labels: Labels = ()
    if pos < len(line) and line[pos] == "{":
        labels, pos = _labels(line, pos + 1)
    rest = line[pos:].split()
    if not rest or len(rest) > 2 or (pos < len(line) and line[pos] not in " \t"):
        raise ParseError("expected a value (and an optional timestamp) after the name")
    return name, labels, _value(rest[0])


def parse(text: str) -> Tuple[Dict[str, Family], List[str]]:
    """({family name: Family}, problems): every line that is not in the format is one problem
    ("line N: why") and is skipped, so one odd line never hides the rest."""
    families: Dict[str, Family] = {}
    problems: List[str] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].split(None, 2)
            if len(parts) >= 2 and parts[0] in ("HELP", "TYPE"):
                family = families.setdefault(parts[1], Family(parts[1]))
                text_part = parts[2] if len(parts) > 2 else ""
                if parts[0] == "TYPE":
                    family.type = text_part.strip().lower() or "untyped"
                else:
                    family.help = text_part.replace("\\n", "\n").replace("\\\\", "\\")
            continue  # other comments, OpenMetrics' "# EOF" and "# UNIT"
        try:
            name, labels, value = _sample(line)
        except ParseError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        families.setdefault(family_of(name, families), Family(name)).samples.append((name, labels, value))
    return families, problems


def family_of(sample: str, families: Dict[str, Family]) -> str:
    """The declared family a sample name belongs to (itself when no declared family claims it)."""
    if sample in families:
        return sample
    for suffix in _SUFFIXES:
        if sample.endswith(suffix) and sample[: -len(suffix)] in families:
            return sample[: -len(suffix)]
    return sample


def series(name: str, labels: Labels) -> str:
    """One series' name as Prometheus writes it: `name{a="1",b="2"}` (labels sorted), or `name`."""
    if not labels:
        return name
    inner = ",".join('{}="{}"'.format(k, v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
                     for k, v in labels)
    return f"{name}{{{inner}}}"


def iter_samples(families: Dict[str, Family], prefix: str = "") -> Iterator[Tuple[Family, str, Labels, float]]:
    """(family, sample name, labels, value) of every sample of the families whose name starts with prefix."""
    for name in sorted(families):
        if name.startswith(prefix):
            family = families[name]
            for sample, labels, value in family.samples:
                yield family, sample, labels, value


def label_value(labels: Labels, name: str) -> Optional[str]:
    for key, value in labels:
        if key == name:
            return value
    return None
