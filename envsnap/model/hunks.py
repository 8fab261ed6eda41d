"""Hunks of unified diffs: parsed per file, named by a stable identity, cut out one at a time.

Pure functions shared by the capture (a `--patch` file split into single-hunk patches that `git apply
--check` judges one by one; the hunks of each dirty file's `git diff HEAD`) and the analysis (which hunks
two snapshots share). The format is the one git-apply(1) reads: see the comment above `parse`.
"""
from __future__ import annotations

import re
from typing import Iterable, List, NamedTuple, Optional, Tuple

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*?)\s*$")
_GIT_HEADER = "diff --git "
# Extended header lines git writes between `diff --git` and `---` (git-diff(1)).
_EXTENDED = ("old mode ", "new mode ", "deleted file mode ", "new file mode ", "copy from ", "copy to ",
             "rename from ", "rename to ", "similarity index ", "dissimilarity index ", "index ")
EDIT_ID_CHARS = 16  # hex digits of a hunk's identity (64 bits: no two hunks of one file collide by chance)


class Hunk(NamedTuple):
    """One hunk: its @@ line and body lines (each with its line ending), where it starts in the patch."""
    header: str
    lines: Tuple[str, ...]
    line: int  # 1-based line number of its @@ line in the patch text
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    function: str  # what follows the second @@ (git's function context)
    complete: bool  # the text held every line its counts promise
    raw_header: str = ""  # the @@ line as written, its line ending included

    @property
    def body(self) -> Tuple[str, ...]:
        return self.lines

    @property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.startswith("+"))

    @property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.startswith("-"))

    @property
    def context(self) -> int:
        return sum(1 for line in self.lines if not line.startswith(("+", "-", "\\")))


class FilePatch(NamedTuple):
    """One file's part of a patch: its header lines (through `+++`), its hunks, the names it gives."""
    header: Tuple[str, ...]
    hunks: Tuple[Hunk, ...]
    old: Optional[str]  # the old name as written (prefix and all), None for /dev/null
    new: Optional[str]
    line: int  # 1-based line of its first header line
    binary: bool  # a binary patch (git's literal/delta data, or "Binary files differ")

    @property
    def name(self) -> Optional[str]:
        """The name the patch is about: the new one, else the old one (a deletion)."""
        return self.new if self.new is not None else self.old

    @property
    def creates(self) -> bool:
        return self.old is None and self.new is not None

    @property
    def deletes(self) -> bool:
        return self.new is None and self.old is not None


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def _unquote(name: str) -> str:
    """A name as git prints it: C-quoted when it holds special characters."""
    if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
        from envsnap.model.patchtext import unquote_path

        raw = unquote_path(name.encode("utf-8", "surrogateescape"))
        return raw.decode("utf-8", "surrogateescape")
    return name


def _name(field: str) -> Optional[str]:
    """The name of a `---`/`+++` line (after the marker): /dev/null is None; diff's tab and timestamp go."""
    field = _strip_eol(field)
    if not field.startswith('"') and "\t" in field:
        field = field.split("\t", 1)[0]
    field = _unquote(field.strip() if not field.startswith('"') else field)
    return None if field == "/dev/null" or not field else field


def _git_names(line: str) -> Tuple[Optional[str], Optional[str]]:
    """The two names of a `diff --git a/X b/Y` line when they can be told apart (same name: the space
    in the middle; otherwise quoted names, or the only ` b/` in it)."""
    rest = _strip_eol(line)[len(_GIT_HEADER):]
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        if end != -1:
            return _unquote(rest[:end + 1]), _unquote(rest[end + 2:])
    if len(rest) % 2 == 1 and rest[len(rest) // 2] == " ":
        return rest[:len(rest) // 2], rest[len(rest) // 2 + 1:]
    if rest.count(" b/") == 1:
        old, new = rest.split(" b/")
        return old, "b/" + new
    return None, None


def split_lines(text: str) -> List[str]:
    """Lines with their endings ("\\n", "\\r\\n"); a last line without one is kept as it is."""
    return text.splitlines(keepends=True) if "\r" not in text.replace("\r\n", "") else _split_lf(text)


def _split_lf(text: str) -> List[str]:
    # A lone "\r" inside a line is content, not a line break (str.splitlines would cut there).
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _read_hunk(lines: List[str], index: int, match: "re.Match[str]") -> Tuple[Hunk, int]:
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_left = int(match.group(2)) if match.group(2) is not None else 1
    new_left = int(match.group(4)) if match.group(4) is not None else 1
    old_count, new_count = old_left, new_left
    body: List[str] = []
    position = index + 1
    while position < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[position]
        marker = line[:1]
        if marker in (" ", "\n", "\r") or line in ("\n", "\r\n"):
            old_left, new_left = old_left - 1, new_left - 1
        elif marker == "-":
            old_left -= 1
        elif marker == "+":
            new_left -= 1
        elif marker == "\\":
            pass
        else:
            break  # the hunk ends early: git calls it a corrupt patch; the check will say so
        body.append(line)
        position += 1
    # A "\ No newline at end of file" after the last counted line is still this hunk's.
    if position < len(lines) and lines[position].startswith("\\"):
        body.append(lines[position])
        position += 1
    complete = old_left <= 0 and new_left <= 0
    hunk = Hunk(_strip_eol(lines[index]), tuple(body), index + 1, old_start, old_count, new_start, new_count,
                match.group(5) or "", complete, lines[index])
    return hunk, position


# The format git-apply(1) reads, GNU diff's unified format with git's extended headers (git-diff(1)
# "GENERATING PATCH TEXT WITH -P"):
# - a file's patch opens with `diff --git a/X b/Y` (git) or with a `--- X` line directly followed by a
#   `+++ Y` line (diff -u, quilt, a patch script's own text); a line of anything else between files
#   (a commit message, an email header) belongs to no file;
# - a hunk is `@@ -start[,count] +start[,count] @@[ function]`, then exactly `count` old and new lines:
#   ' ' (both), '-' (old), '+' (new), '\ No newline at end of file' (neither); git takes an empty line as
#   an empty context line, and so does this parser. A hunk is read by its counts, as git reads it: what
#   follows the last counted line is not the hunk's;
# - a file with no hunks is a binary patch (`GIT binary patch`, `Binary files ... differ`), a mode change,
#   a rename or an empty new file: one unit of its own.
# Text is held as `str` decoded with surrogateescape (a patch of a Latin-1 file keeps its exact bytes);
# each line keeps its own ending, so a patch written back is the patch read, CRLF and all.
def parse(text: str) -> List[FilePatch]:
    """Every file's part of a unified diff, in order (the format: the comment above)."""
    lines = split_lines(text)
    files: List[FilePatch] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        git = line.startswith(_GIT_HEADER)
        plain = (line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "))
        if not git and not plain:
            index += 1
            continue
        start = index
        old = new = None
        binary = False
        if git:
            old, new = _git_names(line)
            index += 1
            while index < len(lines):
                current = lines[index]
                if current.startswith(_EXTENDED):
                    for marker, is_new in (("rename from ", False), ("rename to ", True), ("copy from ", False),
                                           ("copy to ", True)):
                        if current.startswith(marker):
                            value = _unquote(_strip_eol(current[len(marker):]))
                            old, new = (old, value) if is_new else (value, new)
                    index += 1
                elif current.startswith(("GIT binary patch", "Binary files ")):
                    binary = True
                    index += 1
                    # literal/delta data runs to the next file or the end
                    while index < len(lines) and not lines[index].startswith((_GIT_HEADER, "--- ")):
                        index += 1
                    break
                else:
                    break
            header_new_file = any(lines[i].startswith("new file mode ") for i in range(start, index))
            header_deleted = any(lines[i].startswith("deleted file mode ") for i in range(start, index))
            if header_new_file:
                old = None
            if header_deleted:
                new = None
        if not binary and index + 1 < len(lines) and lines[index].startswith("--- ") \
                and lines[index + 1].startswith("+++ "):
            # The ---/+++ names are the ones git applies by (/dev/null included).
            old, new = _name(lines[index][4:]), _name(lines[index + 1][4:])
            index += 2
        header = tuple(lines[start:index])
        hunks: List[Hunk] = []
        while not binary and index < len(lines):
            match = _HUNK.match(lines[index])
            if match is None:
                break
            hunk, index = _read_hunk(lines, index, match)
            hunks.append(hunk)
        files.append(FilePatch(header, tuple(hunks), old, new, start + 1, binary))
        if index == start:  # never loop on a line that opened nothing
            index += 1
    return files


def edit_id(lines: Iterable[str]) -> str:
    """A hunk's identity: the sha256 of its changed lines ('-' and '+', in order), each without its line
    ending and trailing whitespace, cut to EDIT_ID_CHARS hex digits. Context lines and line numbers are
    left out on purpose: the same edit made next to another edit, or lower in a longer file, is the
    same edit; a different line added or removed is a different one."""
    import hashlib  # here: a diff that reads hunks never hashes (OpenSSL's load is not paid by every reader)

    digest = hashlib.sha256()
    for line in lines:
        if line.startswith(("+", "-")):
            digest.update(line.rstrip(" \t\r\n").encode("utf-8", "surrogateescape"))
            digest.update(b"\n")
    return digest.hexdigest()[:EDIT_ID_CHARS]


def single_hunk_patch(file_patch: FilePatch, hunk: Optional[Hunk]) -> str:
    """The file's header and one of its hunks (or the header alone: a hunk-less unit), as a patch
    `git apply` takes on its own. A hunk cut short by the end of the text is given as it is."""
    text = "".join(file_patch.header)
    if text and not text.endswith("\n"):
        text += "\n"
    if hunk is not None:
        raw = hunk.raw_header or hunk.header
        text += raw if raw.endswith("\n") else raw + "\n"
        body = "".join(hunk.lines)
        text += body if body.endswith("\n") or not body else body + "\n"
    return text


def diff_hunks(diff: str) -> List[Tuple[Optional[str], Hunk]]:
    """(file name, hunk) of every hunk of a unified diff, in order."""
    return [(fp.name, h) for fp in parse(diff) for h in fp.hunks]


def hunk_text(hunk: Hunk) -> str:
    """A hunk as it reads in a patch: its @@ line and body."""
    return hunk.header + "\n" + "".join(hunk.lines)


def strip_components(name: str, count: int) -> Optional[str]:
    """`name` without its first `count` slash-separated components (git apply -p; a leading '/' is an
    empty first component), None when it has no more than that."""
    parts = name.split("/")
    if count >= len(parts):
        return None
    return "/".join(parts[count:])


def unsafe(rel: str) -> bool:
    """Whether a path would leave the directory it is taken in (absolute, or a `..` component)."""
    return rel.startswith("/") or ".." in rel.split("/") or "\0" in rel or rel in ("", ".")
