"""The identity of a registered page (no vLLM imports)."""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

ROOT = -1
"""Parent id of a depth-0 page."""


@dataclass(frozen=True)
class PageKey:
    group: int
    parent: int
    depth: int
    tokens: tuple[int, ...]
    extra: Hashable = None
