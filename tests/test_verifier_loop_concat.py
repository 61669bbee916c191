"""The frontend reads consecutive loops over adjacent ranges as one loop (obligation loop-concat) only when the
bounds cannot move between the loops: the same loop name, each stop written as the next start, step 1, no bound
assigned in a body and no bound that reads memory."""
import ast
import textwrap

import pytest

from vosti_plugin.verifier.frontend import _ConcatenatedLoops, _concatenated_loops


def _merged(src: str) -> list:
    return [s for s in _concatenated_loops(ast.parse(textwrap.dedent(src)).body) if isinstance(s, _ConcatenatedLoops)]


def test_adjacent_ranges_become_one_loop_that_branches_on_the_index():
    (merged,) = _merged("""
        for t in range(a, b):
            x = x + 1
        for t in tl.range(b, c, num_stages=3):
            x = x + 2
        for t in range(c, d):
            x = x + 3
    """)
    assert [ast.unparse(b) for b in merged.bounds] == ["a", "b", "c", "d"]
    assert ast.unparse(merged.loop.iter) == "range(a, d)"
    assert ast.unparse(merged.loop.body[0].test) == "t < b"


@pytest.mark.parametrize("src", [
    # the first body moves the shared bound
    """
    for t in range(a, b):
        b = b + 1
    for t in range(b, c):
        x = x + 1
    """,
    # a bound that reads memory (a body may store there)
    """
    for t in range(0, tl.load(p)):
        x = x + 1
    for t in range(tl.load(p), c):
        x = x + 1
    """,
    # not the same loop name, not adjacent, or a step
    """
    for t in range(a, b):
        x = x + 1
    for u in range(b, c):
        x = x + 1
    """,
    """
    for t in range(a, b):
        x = x + 1
    for t in range(b + 1, c):
        x = x + 1
    """,
    """
    for t in range(a, b, 2):
        x = x + 1
    for t in range(b, c, 2):
        x = x + 1
    """,
])
def test_loops_whose_bounds_may_move_stay_apart(src):
    assert _merged(src) == []
