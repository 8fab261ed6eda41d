"""Text output of `envsnap diff`, `envsnap rank` and `envsnap bisect` (pure: result dict in, string out).

Written for 2 a.m.: the verdict first, then the numbered likely causes with their one-line
reason, then a one-line count of differences per category (the full list with -v/--all).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from envsnap import format as fmt
from envsnap.analysis.compare import patch_status
from envsnap.analysis.compare.diff import value_text
from envsnap.analysis.compare.patches import counted
from envsnap.analysis.compare.view_model import category_key
from envsnap.analysis.runs.verdict import mechanism_line
from envsnap.model.result_types import Cause, Difference, DiffResult, HunkStatus, PatchSide, SideMeta
from envsnap.redact import redact_text
from envsnap.render import trace_view

DEFAULT_TOP = 5
FOLDED_SHOWN = 3  # a cause's folded keys named on its "also:" line (-v lists them all, with their reasons)
CONTENT_LINES = 60  # a file shown whole (no pristine copy to diff against) up to this long; JSON/HTML hold any


def _change(item: Union[Cause, Difference]) -> str:
    """'good → bad' in the words the analysis chose for a missing side ("not captured", "clean", "unset"...)."""
    change, absent = item["change"], item["absent"]
    return f"{value_text(change, 'good', item['good'], absent)} \u2192 {value_text(change, 'bad', item['bad'], absent)}"


def undecided_hints(causes: Sequence[Cause]) -> List[str]:
    """What would decide the causes whose reach was not decided, each once, with how many it concerns."""
    counts: Dict[str, int] = {}
    for cause in causes:
        hint = cause["reach"].get("would_decide")
        if hint and not cause["reach"]["decided"]:
            counts[hint] = counts.get(hint, 0) + 1
    return [f"{n} cause{'s' if n != 1 else ''} could act by name only: {hint}" for hint, n in counts.items()]


def _side(meta: SideMeta) -> str:
    bits = [meta["label"] or "(no label)"]
    host, created = meta["host"], meta["created"]
    if host:
        bits.append(host)
    if created:
        bits.append(created[:19].replace("T", " "))
    return ", ".join(bits)


def render_diff(result: DiffResult, verbose: bool = False, top: int = DEFAULT_TOP) -> str:
    lines: List[str] = []
    verdict = result["verdict"]
    lines.append(verdict["summary"])
    lines.append(f"good: {_side(result['good'])}   bad: {_side(result['bad'])}")
    decomposition = verdict["decomposition"]
    if decomposition and decomposition["side"] != "unclear":
        lines.append(f"EAGLE-3: {decomposition['explanation']}")
    line = mechanism_line(verdict)
    if line:
        lines.append(f"mechanism: {line}")
    lines.extend(trace_view.text_lines(result))
    if result["warnings"]:
        lines.append("")
        lines.append("warnings:")
        lines.extend(f"  ! {w}" for w in result["warnings"])
    causes = result["causes"][:top] if top else result["causes"]
    lines.append("")
    if causes:
        lines.append("likely causes (most likely first; causes that share a rank cannot be told apart):")
        width = len(str(max(c["rank"] for c in causes)))
        groups = {g["rank"]: g for g in result["groups"]}
        for index, cause in enumerate(causes):
            mark = "=" if cause["tied"] else "."
            lines.append(f"  {cause['rank']:>{width}}{mark} [{cause['score']:.2f}] {cause['key']}  {_change(cause)}"
                         f"  ({cause['component']})")
            lines.append(f"  {'':>{width}}  why: {cause['why']}")
            lines.append(f"  {'':>{width}}  {cause['reach']['line']}")
            if cause.get("size"):
                lines.append(f"  {'':>{width}}  {cause['size']['line']}")
            folded = cause.get("folded") or []
            if folded and not verbose:
                named = ", ".join(f"{f['key']} ({f['relation']})" for f in folded[:FOLDED_SHOWN])
                rest_count = len(folded) - FOLDED_SHOWN
                lines.append(f"  {'':>{width}}  also: {named}{f' and {rest_count} more' if rest_count > 0 else ''}")
            if verbose:
                for line in cause["evidence"][1:]:
                    lines.append(f"  {'':>{width}}   - {line}")
                for f in folded:
                    lines.append(f"  {'':>{width}}   + {f['key']} ({f['relation']}): {f['why']}")
            elif cause["patches"]:
                lines.append(f"  {'':>{width}}  patch: {', '.join(cause['patches'])} (-v shows it)")
            last_of_group = index + 1 == len(causes) or causes[index + 1]["rank"] != cause["rank"]
            group = groups.get(cause["rank"])
            if group and last_of_group:
                in_view = sum(1 for c in causes if c["rank"] == cause["rank"])
                rest = f", {group['size'] - in_view} of them not shown" if in_view < group["size"] else ""
                lines.append(f"  {'':>{width}}  \u21b3 {group['line']}{rest}")
                if group.get("bisect_line"):
                    lines.append(f"  {'':>{width}}    {group['bisect_line']}")
        more = len(result["causes"]) - len(causes)
        if more > 0:
            lines.append(f"  … {more} more (--top N, or --format json)")
        for hint in undecided_hints(result["causes"]):
            lines.append(f"  not decided: {hint}")
    else:
        lines.append("no relevant differences: the environments match (volatile fields aside)")
    lines.extend(_neighbours_lines(result, verbose))
    lines.extend(_patch_status_lines(result, verbose))
    lines.extend(_patches_lines(result, verbose))
    differences = result["differences"]
    listed = [d for d in differences if not d["volatile"]]
    hidden = [d for d in differences if d["volatile"]]
    counts: Dict[str, int] = {}
    for d in differences:
        counts[d["category"]] = counts.get(d["category"], 0) + 1
    summary = ", ".join(f"{c} {counts[c]}" for c in sorted(counts, key=category_key))
    lines.append("")
    lines.append(f"differences: {len(differences)}" + (f" ({summary})" if summary else "")
                 + (f"; {len(hidden)} volatile included" if hidden else ""))
    if verbose or hidden:
        current = None
        for d in sorted(differences, key=lambda d: (category_key(d["category"]), d["key"])):
            if d["category"] != current:
                current = d["category"]
                lines.append(f"  [{current}]")
            mark = " (volatile)" if d["volatile"] else ""
            lines.append(f"    {d['change']:<7} {d['key']}  {_change(d)}{mark}")
    elif listed:
        lines.append("  (-v lists them all; --all adds volatile fields)")
    return fmt.text_lines(lines) + "\n"


def _neighbours_lines(result: DiffResult, verbose: bool) -> List[str]:
    """The other processes beside the work, per process (analysis/compare/neighbours.py): those that are causes
    of their own (marked *) always, the rest with -v."""
    found = result.get("neighbours")
    if not isinstance(found, dict):
        return []
    rows = list(found.get("processes") or []) + list(found.get("gpu") or [])
    if found.get("steal"):
        rows.append(found["steal"])
    shown = [r for r in rows if r.get("changed") or verbose]
    lines = ["", f"neighbours: {found.get('summary', '')}"]
    for row in shown:
        where = f"GPU {row['gpu']}: " if row.get("kind") == "gpu" else ""
        mark = "*" if row.get("changed") else " "
        lines.append(f"  {mark} {where}{fmt.clip(str(row.get('command')), 100)}  {row.get('good_text')} \u2192 "
                     f"{row.get('bad_text')}")
    rest = len(rows) - len(shown)
    if rest:
        lines.append(f"    ({rest} more the same on both sides: -v lists them)")
    if any(r.get("changed") for r in rows):
        lines.append("    (* on one side only, or much busier there: a cause of its own, ranked with the others)")
    return lines


def _tally(hunks: List[HunkStatus], side: str) -> str:
    counts: Dict[str, int] = {}
    for hunk in hunks:
        status = hunk["good"] if side == "good" else hunk["bad"]
        if status is not None:
            counts[str(status)] = counts.get(str(status), 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def _patch_side(side: Optional[PatchSide], label: str, hunks: List[HunkStatus]) -> str:
    if side is None:
        return f"{label} not given"
    tally = _tally(hunks, label.lower())
    return f"{label} {side['status']}" + (f" ({tally})" if tally and tally != f"{len(hunks)} {side['status']}"
                                           else "")


def _patch_status_lines(result: DiffResult, verbose: bool) -> List[str]:
    """The recorded patches (--patch): each hunk's status on GOOD and BAD; those that differ always, the
    rest with -v."""
    table = result.get("patch_status", [])
    if not table:
        return []
    lines = ["", "recorded patches (--patch): each hunk's status on GOOD and BAD"]
    for patch in table:
        hunks = patch["hunks"]
        recorded = patch["bad"] or patch["good"]
        target = recorded["target"] if recorded is not None else {}
        checked = patch_status.target_text(target)
        where = f"; against {checked}" if checked else ""
        lines.append(f"  {patch['name']}: {_patch_side(patch['good'], 'GOOD', hunks)}, "
                     f"{_patch_side(patch['bad'], 'BAD', hunks)}{where}")
        for side, info in (("good", patch["good"]), ("bad", patch["bad"])):
            if info is None:
                continue
            for what in (info["error"], info["note"]):  # in this order
                if what:
                    lines.append(f"    {side}: {what}")
        # Given on one side only, nothing is compared: every hunk is listed with that side's status.
        one_side = next((label for label, info in (("GOOD", patch["good"]), ("BAD", patch["bad"])) if info is None), None)
        only = "BAD" if one_side == "GOOD" else "GOOD"
        shown = hunks if verbose or one_side else [h for h in hunks if h["changed"]]
        for hunk in shown:
            mark = "*" if hunk["changed"] else " "
            rank = f"  (cause #{hunk['rank']})" if hunk.get("rank") else ""
            statuses = (f"{hunk['good'] or '-'} \u2192 {hunk['bad'] or '-'}" if hunk["changed"]
                        else f"{hunk['bad'] or hunk['good']} ({only} only)" if one_side
                        else str(hunk["bad"] or hunk["good"]))
            lines.append(f"   {mark}hunk {hunk['n']:>3} {hunk['file']} {hunk['header'] or ''}: {statuses}{rank}")
            for side, why in sorted(hunk["why"].items()):
                lines.append(f"             {side}: {why}")
            also = hunk.get("also_in", {})
            if also.get("good") and also.get("good") == also.get("bad"):
                also = {"good and bad": also["good"]}
            for side in ("good and bad", "good", "bad"):
                if also.get(side):
                    lines.append(f"             {side}: the same edit is in {', '.join(also[side])}")
        rest = len(hunks) - len(shown)
        if rest:
            lines.append(f"    {rest} more hunk{'s' if rest != 1 else ''} with the same status on both sides (-v lists them)")
    return lines


def _patches_lines(result: DiffResult, verbose: bool) -> List[str]:
    """The patches: one line each, or (verbose) each in full, unindented so it can be copied as is."""
    patches = result["patches"]
    if not patches:
        return []
    ranks = {c["key"]: c["rank"] for c in result["causes"]}
    lines = ["", f"patches: {counted(patches)} whose text the snapshots hold (good \u2192 bad)"
                 + ("" if verbose else "; -v shows them")]
    for patch in patches:
        lines.append(f"  {patch['id']}  [{patch['kind']}] {patch['title']}  ({patch['shows']})")
        if not verbose:
            continue
        lines.append(f"    {patch['basis']}")
        shas = f"sha256 good {(patch['good_sha256'] or '-')[:12]}, bad {(patch['bad_sha256'] or '-')[:12]}"
        flags = [f for f, on in (("truncated: the text held is the file's start", patch["truncated"]),
                                 ("redacted", patch["redacted"])) if on]
        lines.append(f"    {shas}" + (f"; {'; '.join(flags)}" if flags else ""))
        supported = [f"#{ranks[k]} {k}" if k in ranks else k for k in patch["causes"]]
        if supported:
            lines.append(f"    supports: {', '.join(supported)}")
        diff, content = patch["diff"], patch["content"]
        if patch["note"]:
            lines.append(f"    note: {patch['note']}")
        if diff:
            lines.extend(diff.rstrip("\n").split("\n"))
        elif content is not None:
            body = content.rstrip("\n").split("\n")
            if patch.get("same_as"):
                lines.append(f"    edited text ({fmt.plural(len(body), 'line')}): the same bytes as {patch['same_as']}")
            elif len(body) <= CONTENT_LINES:
                lines.append(f"    edited text ({fmt.plural(len(body), 'line')}):")
                lines.extend(body)
            else:  # its first lines would not show where the edit is: it is in full elsewhere
                lines.append(f"    edited text: {len(body)} lines, in full in --format json and the report")
    return lines


def render_rank(result: Dict[str, Any], top: int = 0) -> str:
    lines: List[str] = []
    name = result["metric"]
    snaps = result["snapshots"]
    lines.append(f"association with {name} across {len(snaps)} snapshots "
                 f"({fmt.direction(result['direction'])})")
    for snap in snaps:
        lines.append(f"  {snap['file']}: median {snap['median']:g} (n={snap['n']})  {snap.get('label') or ''}".rstrip())
    for warning in result["warnings"]:
        lines.append(f"  ! {warning}")
    items = [i for i in result["associations"] if i["rank"] <= top] if top else result["associations"]
    lines.append("")
    if not items:
        lines.append("no key varies across these snapshots (volatile fields aside)")
    shown = set()
    for item in items:
        if item["rank"] in shown:
            continue  # a key of a group already shown with its group
        shown.add(item["rank"])
        effect = "n/a" if item["effect_pct"] is None else f"{item['effect_pct']:.0f}%"
        together = item.get("confounded_with") or []
        names = " = ".join([item["key"]] + together)
        components = sorted({i["component"] for i in items if i["rank"] == item["rank"]})
        if item.get("unique_per_snapshot"):
            lines.append(f"  {item['rank']}. [untested] {names}  unique per snapshot ({', '.join(components)})")
        else:
            lines.append(f"  {item['rank']}. [{item['score']:.2f}] {names}  effect {effect}, "
                         f"p={item['p_value']:.2g} ({', '.join(components)})")
        if together:
            lines.append(f"     these {len(together) + 1} change together in every snapshot: cannot be told apart")
        lines.append(f"     {item['why']}")
    return fmt.text_lines(lines) + "\n"


# ---------------------------------------------------------------- bisect

def _bisect_num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.6g}"


def _show_value(value: Optional[str]) -> str:
    if value is None:
        return "(unset)"
    text = redact_text(value)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _bisect_delta(d: Mapping[str, Any]) -> List[str]:
    if d.get("kind") == "hunk":
        return [f"  hunk {d['hunk']} of {d['of']} of {d['file']} ({d['header']})", f"      {d['where']}"]
    if d.get("kind") == "file":
        lines = [f"  file {d['name']}: {d['change']}, GOOD {d['good']} -> BAD {d['bad']}",
                 f"      {d['where']}"]
    else:
        lines = [f"  {d['name']}: GOOD {_show_value(d['good'])} -> BAD {_show_value(d['bad'])}"
                 f"  [{', '.join(d['sources'])}]"]
    if d.get("note"):
        lines.append(f"      {d['note']}")
    return lines


def _bisect_keep(keep: Mapping[str, Any]) -> List[str]:
    lines = []
    for diff in keep.get("diffs", []):
        if diff.get("binary"):
            lines.append(f"patch of {diff['delta']}: binary (compare the versions by sha256)")
            continue
        lines.append(f"patch of {diff['delta']} (GOOD -> BAD)" + (", redacted" if diff.get("redacted") else "") + ":")
        lines.extend(f"  | {line}" for line in diff.get("lines", []))
        if diff.get("more_lines"):
            lines.append(f"  | ... {diff['more_lines']} more lines")
    for title, key in (("to undo the cause (every other difference stays)", "undo"),
                       ("to keep only the cause (every other difference back to GOOD)", "only")):
        if keep.get(key):
            lines.append(f"{title}:")
            lines.extend(f"  {item['command']}" for item in keep[key])
    for patch in keep.get("patches", []):
        lines.append(f"the cause as a patch for a GOOD checkout: {patch['command']}")
    return lines


def render_bisect(result: Mapping[str, Any]) -> str:
    lines = []
    status = result["status"]
    head = {"isolated": "ISOLATED", "not_distinguishable": "NOT ISOLATABLE", "no_deltas": "NOTHING TO BISECT",
            "budget_exhausted": "NOT ISOLATED", "dry_run": "DRY RUN"}.get(status, status)
    lines.append(f"envsnap bisect: {head}: {result.get('message', '')}")
    metric = result.get("metric")
    if metric:
        g, b = result["good"], result["bad"]
        change = result.get("change_pct")
        lines.append(f"metric {metric} ({fmt.direction(str(result.get('direction')))}): "
                     f"GOOD median {_bisect_num(g.get('median'))} (n={g.get('n')}), "
                     f"BAD median {_bisect_num(b.get('median'))} (n={b.get('n')})"
                     + (f", {change:+.1f}%" if change is not None else ""))
    deltas = result["deltas"]
    files, env, hunks = deltas.get("files", []), deltas["applied"], deltas.get("hunks", [])
    split = sorted({h["file"] for h in hunks})
    whole = [f for f in files if f["name"] not in split]
    runs = result.get("runs", {})
    if status != "dry_run":
        parts = f"{fmt.plural(len(whole), 'file')}, " + (
            f"{fmt.plural(len(hunks), 'hunk')} of {fmt.plural(len(split), 'file')}, " if hunks else "")
        lines.append(f"{fmt.plural(result.get('configurations_run', 0), 'configuration')}, "
                     f"{fmt.plural(runs.get('total', 0), 'run')} "
                     f"({runs.get('from_journal', 0)} from the journal, {runs.get('failed', 0)} failed); "
                     f"{fmt.plural(len(whole) + len(hunks) + len(env), 'delta')} searched ({parts}"
                     f"{fmt.plural(len(env), 'variable')})")
    if (result.get("path") or {}).get("line"):
        lines.append(f"path: {result['path']['line']}")
    if result.get("minimal"):
        title = "minimal failure-inducing set" + (" (1-minimal)" if result.get("one_minimal") else "")
        lines.append(f"{title}:")
        for d in result["minimal"]:
            lines.extend(_bisect_delta(d))
    if result.get("keep"):
        lines.extend(_bisect_keep(result["keep"]))
    if status == "dry_run":
        lines.append(f"files that would be switched ({len(files)}):")
        for d in files:
            lines.extend(_bisect_delta(d))
            lines.append(f"      now: {d.get('current', '?').upper()}'s version")
            mine = [h for h in hunks if h["file"] == d["name"]]
            if mine:
                lines.append(f"      switched hunk by hunk ({fmt.plural(len(mine), 'hunk')}):")
                lines.extend(f"        hunk {h['hunk']} {h['header']}" for h in mine)
        lines.append(f"variables ({len(env)}):")
        for d in env:
            lines.extend(_bisect_delta(d))
    restore = result.get("files_restore")
    if restore:
        left = restore.get("not_restored") or []
        lines.append(f"files: {restore['switched']} switched ({restore['writes']} writes), "
                     + (f"{len(left)} NOT restored (see notes)" if left else
                        "all restored byte for byte (mode and times too)"))
    refused = deltas.get("files_refused", [])
    if refused:
        lines.append(f"refused ({len(refused)}), never written:")
        for d in refused:
            lines.append(f"  {d['name']}: {d.get('note', '')}")
    na = deltas["not_applicable"] + deltas.get("files_not_applicable", [])
    if na:
        lines.append(f"not applicable ({len(na)}):")
        for d in na:
            lines.append(f"  {d['name']}: {d.get('note', '')}")
    if result.get("configurations"):
        lines.append("configurations (BAD deltas switched on over GOOD):")
        lines.append(f"  {'#':>3}  {'outcome':<9} {'pos':>5} {'median':>12} {'n':>3}  deltas")
        for c in result["configurations"]:
            if c["label"] == "GOOD":
                which = "none (GOOD)"
            elif c["label"] == "BAD":
                which = f"all {c['size']} (BAD)"
            else:
                names = ", ".join(c["bad_deltas"])
                which = f"{c['size']}: {names}" if len(names) <= 70 else f"{c['size']}: {names[:67]}..."
            pos = "-" if c["position"] is None else f"{c['position']:.2f}"
            fails = f" ({c['failed_runs']} failed)" if c["failed_runs"] else ""
            lines.append(f"  {c['id']:>3}  {c['outcome'] or '-':<9} {pos:>5} {_bisect_num(c['median']):>12} "
                         f"{c['n']:>3}  {which}{fails}")
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    lines.append(f"journal: {result['journal']}")
    return fmt.text_lines(lines)
