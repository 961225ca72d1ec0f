"""The lenient reading of a schema its draft's metaschema refuses.

Draft-04 habits are translated to what they meant (which only ever refuses more), and
whatever still cannot be read is dropped (never a ``pattern``: one that is refused
refuses every call), so the lenient reading never accepts what the strict reading
refuses on the parts it can read.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from toolscout.schemas.drafts import _draft_name, _meta_errors
from toolscout.schemas.problems import _NUMERIC_BOUNDS, _number
from toolscout.schemas.walk import _walk

# --------------------------------------------------------------------------- lenient reading


def _lenient(schema: Mapping[str, Any], cls: Any) -> dict[str, Any]:
    """A copy of ``schema`` the draft's metaschema accepts, refusing at least as much.

    Draft-04 habits become what they meant; whatever is still unreadable is dropped.
    """
    out: dict[str, Any] = copy.deepcopy(dict(schema))
    draft = _draft_name(cls)
    for _path, node, _ in list(_walk(out)):
        assert isinstance(node, dict)
        for bound in _NUMERIC_BOUNDS:
            if isinstance(node.get(bound), str):
                number = _number(node[bound])
                if number is None:
                    del node[bound]
                else:
                    node[bound] = number
        if draft not in ("3", "4"):
            for excl, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                flag = node.get(excl)
                if isinstance(flag, bool):
                    del node[excl]
                    if flag and isinstance(node.get(plain), int | float):
                        node[excl] = node.pop(plain)
        props = node.get("properties")
        if isinstance(props, dict):
            required = node.get("required")
            names = list(required) if isinstance(required, list) else []
            for name, sub in props.items():
                flag = sub.get("required") if isinstance(sub, dict) else None
                if isinstance(flag, bool):
                    del sub["required"]
                    if flag and name not in names:
                        names.append(name)
            if names:
                node["required"] = names
    for _ in range(500):
        errors = _meta_errors(cls, out)
        if not errors:
            break
        if not _drop(out, tuple(errors[0].path)):
            return {"type": "object"}
    else:  # pragma: no cover - a schema with more than 500 unreadable parts
        return {"type": "object"}
    return out


def _drop(schema: dict[str, Any], path: tuple[Any, ...]) -> bool:
    """Delete what ``path`` points at; ``False`` when it is the root."""
    if not path:
        return False
    parent: Any = schema
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return True
