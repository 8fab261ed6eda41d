"""What a start-up hook's text does to the environment, read from its code (Python's own parser, never run).

A hook that mentions a variable is not a hook that sets it: a comment, a log line or a read names it too. The
variables a hook *sets* are those its code assigns: `os.environ[NAME] = ...`, `os.environ.setdefault(NAME, ...)`,
`os.environ.update({NAME: ...})`, `os.putenv(NAME, ...)`, and the ones it unsets (`del os.environ[NAME]`,
`os.environ.pop(NAME)`, `os.unsetenv(NAME)`): CPython's os.environ writes through to putenv/unsetenv (Lib/os.py,
class _Environ). A hook whose every statement is such a setting (or `import os`, a docstring, a read whose value
it drops) does nothing else at start-up: what it can do to the work is what those variables do.
"""
from __future__ import annotations

import ast
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Set

from envsnap.model.snapshot import as_dict, section_data

_SETTERS = ("setdefault", "update", "pop", "putenv", "unsetenv", "__setitem__", "__delitem__")


class HookEffects(NamedTuple):
    sets: Set[str]  # the variables its code sets or unsets (names given as string constants)
    only_settings: bool  # every statement sets or unsets a variable, imports, or is a docstring


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" or (
        isinstance(node, ast.Name) and node.id == "environ")


def _key(node: ast.AST) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _names_set(node: ast.AST) -> List[str]:
    """The variable names one statement or expression sets (empty when it sets none)."""
    found: List[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = sub.targets if isinstance(sub, (ast.Assign, ast.Delete)) else [sub.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and _is_environ(target.value):
                    key = _key(target.slice)
                    if key:
                        found.append(key)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in _SETTERS:
            owner = sub.func.value
            if sub.func.attr in ("putenv", "unsetenv") or _is_environ(owner):
                if sub.args and _key(sub.args[0]):
                    found.append(str(_key(sub.args[0])))
                elif sub.args and isinstance(sub.args[0], ast.Dict):
                    found.extend(k for k in (_key(key) for key in sub.args[0].keys if key is not None) if k)
                found.extend(str(kw.arg) for kw in sub.keywords if kw.arg)
    return found


def _is_read(node: ast.AST) -> bool:
    """A call that only reads the environment: os.environ.get(...), os.getenv(...), environ.get(...)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Attribute, ast.Name)):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return (func.attr == "get" and _is_environ(func.value)) or func.attr == "getenv"
    return func.id == "getenv"


def _harmless(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.ImportFrom):
        return statement.module == "os"
    if isinstance(statement, ast.Import):
        return all(alias.name.split(".")[0] == "os" for alias in statement.names)
    # a docstring, or an expression that only reads the environment (its value unused)
    return isinstance(statement, ast.Expr) and (isinstance(statement.value, ast.Constant) or _is_read(statement.value))


def effects(text: str) -> Optional[HookEffects]:
    """What the hook's Python text does to the environment; None when it is not Python the parser reads
    (a .pth file's path lines, a syntax error)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    sets: Set[str] = set()
    only = True
    for statement in tree.body:
        names = _names_set(statement)
        sets.update(names)
        if not names and not _harmless(statement):
            only = False
        elif names and not isinstance(statement, (ast.Assign, ast.AugAssign, ast.Delete, ast.Expr)):
            only = False  # a setting inside an if/for/def: the statement does more than set it
    return HookEffects(sets, only)


def settings(text: str) -> Optional[Dict[str, Set[str]]]:
    """{variable: the source of each statement that sets it} of a Python text (any module, not only a hook);
    None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    out: Dict[str, Set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete, ast.Expr)):
            for name in _names_set(node):
                out.setdefault(name, set()).add(ast.get_source_segment(text, node) or ast.dump(node))
    return out


def changed_settings(good: Optional[str], bad: Optional[str]) -> Set[str]:
    """The variables whose setting statements differ between two versions of a Python file (one version known
    only: every variable it sets)."""
    found = [settings(text) if text is not None else None for text in (good, bad)]
    if found[0] is not None and found[1] is not None:
        return {name for name in set(found[0]) | set(found[1]) if found[0].get(name) != found[1].get(name)}
    known = found[0] if found[0] is not None else found[1]
    return set(known or {})


def hook_text(snap: Mapping[str, Any], path: str) -> Optional[str]:
    """The text a snapshot holds of the start-up hook at `path` (a .pth file: its executed import lines)."""
    hooks = as_dict(as_dict(section_data(snap, "python")).get("startup_hooks"))
    hook = as_dict(hooks.get(path))
    if not hook:
        return None
    content = as_dict(hook.get("content"))
    if isinstance(content.get("text"), str):
        return str(content["text"])
    lines = hook.get("import_lines")
    if hook.get("kind") == "pth" and isinstance(lines, list):
        return "\n".join(str(line) for line in lines)
    return None


def hook_effects(snap: Mapping[str, Any], path: str) -> Optional[HookEffects]:
    text = hook_text(snap, path)
    return effects(text) if text is not None else None
