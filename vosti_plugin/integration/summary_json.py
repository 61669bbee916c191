"""JSON for the summary.json files kept in git: indented, but a dict or list of scalars stays on one line
(one table row per line), so a summary stays small and diffs row by row."""
from __future__ import annotations

import json

_INLINE_LIMIT = 160


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def dumps(value, indent: int = 0) -> str:
    flat = json.dumps(value)
    inline = (isinstance(value, list) and all(_scalar(v) for v in value)) or \
        (isinstance(value, dict) and all(_scalar(v) or (isinstance(v, list) and all(map(_scalar, v)))
                                         for v in value.values()))
    if _scalar(value) or not value or (inline and len(flat) <= _INLINE_LIMIT):
        return flat
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(value, list):
        return "[\n" + ",\n".join(inner + dumps(v, indent + 1) for v in value) + "\n" + pad + "]"
    return "{\n" + ",\n".join(f"{inner}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in value.items()) \
        + "\n" + pad + "}"
