"""A diff result against its TypedDicts (model/result_types.py) at run time: tests/model/test_result_types.py
checks the golden outputs with it, and a test whose analysis makes a part no golden has (recorded patches)
checks that part where it makes it."""
from __future__ import annotations

import typing
from typing import Any, List, Optional, Set, Union


def is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def mismatches(value: Any, tp: Any, path: str = "$", met: Optional[Set[Any]] = None) -> List[str]:
    """Where `value` does not have type `tp` (a TypedDict, List, Dict, Optional/Union, Any or a scalar);
    `met` collects every TypedDict some value was checked against."""
    if tp is Any:
        return []
    if is_typed_dict(tp):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not {tp.__name__}"]
        if met is not None:
            met.add(tp)
        hints = typing.get_type_hints(tp)
        out = [f"{path}: {tp.__name__} lacks {k!r}" for k in sorted(tp.__required_keys__ - set(value))]
        out += [f"{path}: {tp.__name__} has no field {k!r}" for k in sorted(set(value) - set(hints))]
        for key, item in value.items():
            if key in hints:
                out += mismatches(item, hints[key], f"{path}.{key}", met)
        return out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union:
        found = [mismatches(value, arg, path, met) for arg in args]
        return [] if any(not f for f in found) else [f"{path}: {value!r:.80} is none of {tp}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [m for i, item in enumerate(value) for m in mismatches(item, args[0], f"{path}[{i}]", met)]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a dict"]
        return [m for key, item in value.items()
                for m in mismatches(key, args[0], f"{path} key") + mismatches(item, args[1], f"{path}.{key}", met)]
    if tp is type(None):
        return [] if value is None else [f"{path}: {value!r:.80} is not None"]
    if tp is float:  # JSON writes a whole float as an int
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{path}: {value!r:.80} is not {tp.__name__}"]
