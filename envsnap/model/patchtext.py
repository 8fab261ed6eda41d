"""Unified diffs as text: split git's patch output per file, name each file, reverse, count, make.

Pure functions shared by the capture (splitting `git diff HEAD` into one patch per dirty file,
redacting each with its own file's rules) and the analysis (reversing a patch, counting what it
changes, diffing two texts). git's formats, from git-diff(1) "GENERATING PATCH TEXT WITH -P":
every file starts with `diff --git a/<path> b/<path>` (git C-quotes a path with special
characters: `"a/x\\ty"`), then extended header lines (`rename to <path>`, `new file mode`,
`index`), then `---`/`+++` and hunks. A line inside a hunk starts with ' ', '+', '-' or '\\',
so a line that starts with `diff --git ` always opens a new file.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

_HEADER = b"diff --git "
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13,
            ord('"'): 34, ord("\\"): 92}
# git's default function-name rule (userdiff.c, no diff driver): a line that starts with a
# letter, '_' or '$' names the hunk's context after its @@ ... @@.
_FUNCNAME = re.compile(r"^[A-Za-z_$]")


def unquote_path(raw: bytes) -> bytes:
    """A path as git prints it: as is, or C-quoted ("a\\tb", octal escapes for other bytes)."""
    if len(raw) < 2 or not (raw.startswith(b'"') and raw.endswith(b'"')):
        return raw
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char == 92 and i + 1 < len(body):  # backslash
            nxt = body[i + 1]
            octal = body[i + 1:i + 4]
            if len(octal) == 3 and all(48 <= c <= 55 for c in octal):
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return bytes(out)


def _strip_prefix(path: bytes, prefix: bytes) -> bytes:
    return path[len(prefix):] if path.startswith(prefix) else path


def chunk_path(chunk: bytes) -> Optional[str]:
    """The path (relative to the repository) one file's patch is about: its new name."""
    lines = chunk.split(b"\n", 12)
    for line in lines[1:]:
        if line.startswith((b"@@", b"--- ", b"+++ ", b"Binary files")):
            break
        for marker in (b"rename to ", b"copy to "):
            if line.startswith(marker):
                return unquote_path(line[len(marker):]).decode("utf-8", "replace")
    rest = lines[0][len(_HEADER):] if lines[0].startswith(_HEADER) else b""
    # Without a rename both names are the same path with a/ and b/ before it (quoted alike):
    # the separating space is exactly in the middle, whatever spaces the name itself holds.
    if len(rest) % 2 == 1 and rest[len(rest) // 2:len(rest) // 2 + 1] == b" ":
        right = unquote_path(rest[len(rest) // 2 + 1:])
        return _strip_prefix(right, b"b/").decode("utf-8", "replace")
    for line in lines[1:]:
        if line.startswith(b"+++ ") and line[4:] != b"/dev/null":
            return _strip_prefix(unquote_path(line[4:]), b"b/").decode("utf-8", "replace")
        if line.startswith(b"--- ") and line[4:] != b"/dev/null":
            return _strip_prefix(unquote_path(line[4:]), b"a/").decode("utf-8", "replace")
    return None


def split_git_patch(data: bytes) -> List[Tuple[Optional[str], bytes]]:
    """(path, bytes of that file's patch) for each file of git's patch output, in order."""
    if not data:
        return []
    starts = [0] if data.startswith(_HEADER) else []
    position = data.find(b"\n" + _HEADER)
    while position != -1:
        starts.append(position + 1)
        position = data.find(b"\n" + _HEADER, position + 1)
    if not starts:
        return [(None, data)]
    chunks: List[Tuple[Optional[str], bytes]] = []
    if starts[0] > 0:  # text before the first file (never written by git diff): kept, unnamed
        chunks.append((None, data[:starts[0]]))
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(data)
        chunk = data[start:end]
        chunks.append((chunk_path(chunk), chunk))
    return chunks


def split_text_patch(text: str) -> List[Tuple[Optional[str], str]]:
    """split_git_patch for a patch already held as text."""
    return [(path, chunk.decode("utf-8", "surrogateescape"))
            for path, chunk in split_git_patch(text.encode("utf-8", "surrogateescape"))]


def reverse(patch: str) -> str:
    """The patch that undoes `patch`: '-' and '+' lines swap, and so do the ---/+++ names and the
    ranges of each @@ header (enough for reading; a/ and b/ keep their meaning of old and new)."""
    out: List[str] = []
    lines = patch.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            old, new = line[4:], lines[index + 1][4:]
            out.append("--- " + _swap_prefix(new, "b/", "a/"))
            out.append("+++ " + _swap_prefix(old, "a/", "b/"))
            index += 2
            continue
        match = _HUNK.match(line)
        if match:
            a, b, c, d, tail = match.groups()
            out.append(f"@@ -{c}{',' + d if d is not None else ''} +{a}{',' + b if b is not None else ''} @@{tail}")
        elif line.startswith("+") and not line.startswith("+++ "):
            out.append("-" + line[1:])
        elif line.startswith("-") and not line.startswith("--- "):
            out.append("+" + line[1:])
        elif line.startswith("new file mode "):
            out.append("deleted file mode " + line[len("new file mode "):])
        elif line.startswith("deleted file mode "):
            out.append("new file mode " + line[len("deleted file mode "):])
        else:
            out.append(line)
        index += 1
    # Inside a hunk, a '-' line must come before the '+' lines it pairs with for readers used to
    # git's order: swapping prefixes left each change's '+' lines first; put them back in order.
    return "\n".join(_reorder_changes(out))


def _swap_prefix(name: str, old: str, new: str) -> str:
    if name == "/dev/null":
        return name
    return new + name[len(old):] if name.startswith(old) else name


def _reorder_changes(lines: List[str]) -> List[str]:
    out: List[str] = []
    plus: List[str] = []
    minus: List[str] = []
    in_hunk = False

    def flush() -> None:
        out.extend(minus)
        out.extend(plus)
        minus.clear()
        plus.clear()

    for line in lines:
        if line.startswith("@@"):
            flush()
            in_hunk = True
            out.append(line)
        elif in_hunk and line.startswith("-"):
            minus.append(line)
        elif in_hunk and line.startswith("+"):
            plus.append(line)
        else:
            flush()
            if line.startswith("diff --git "):
                in_hunk = False
            out.append(line)
    flush()
    return out


def stats(patch: str) -> Tuple[int, int, int]:
    """(lines added, lines removed, hunks) of a unified diff."""
    added = removed = hunks = 0
    for line in patch.split("\n"):
        if line.startswith("@@"):
            hunks += 1
        elif line.startswith("+") and not line.startswith("+++ "):
            added += 1
        elif line.startswith("-") and not line.startswith("--- "):
            removed += 1
    return added, removed, hunks


def changed_lines(patch: str) -> List[str]:
    """The '+' and '-' lines of a unified diff, without their marker."""
    return [line[1:] for line in patch.split("\n")
            if (line.startswith("+") and not line.startswith("+++ ")) or (line.startswith("-") and not line.startswith("--- "))]


def unified(old: str, new: str, old_name: str, new_name: str, context: int = 3) -> str:
    """A unified diff of two texts in git's layout (hunk headers name the enclosing function the way
    git's default rule does; a last line without a newline is marked). '' when they are equal."""
    import difflib  # here: most readers of patches (every diff) never build one

    a, b = old.splitlines(True), new.splitlines(True)
    out: List[str] = []
    for line in difflib.unified_diff(a, b, old_name, new_name, n=context):
        if line.startswith(("--- ", "+++ ")):
            out.append(line.rstrip("\n"))
            continue
        if line.startswith("@@"):
            match = _HUNK.match(line.rstrip("\n"))
            header = line.rstrip("\n")
            if match:
                start = int(match.group(1))
                # difflib numbers an empty range's position one line lower than git: the line before
                func = _function_before(a, start - 1 if match.group(2) != "0" else start)
                header = header + (" " + func if func else "")
            out.append(header)
            continue
        if line.endswith("\n"):
            out.append(line[:-1])
        else:
            out.append(line)
            out.append("\\ No newline at end of file")
    return "\n".join(out) + ("\n" if out else "")


def _function_before(lines: List[str], index: int) -> str:
    """git's default funcname: the nearest line above `index` (0-based, exclusive) that starts with
    a letter, '_' or '$', cut at 80 characters."""
    for position in range(min(index, len(lines)) - 1, -1, -1):
        line = lines[position].rstrip("\r\n")
        if _FUNCNAME.match(line):
            return line[:80].rstrip()
    return ""
