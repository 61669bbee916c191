"""The frontend accepts the Triton subset and rejects anything else with the kernel name and the line."""
import pytest

from vosti_plugin.verifier.frontend import Unsupported, kernel_from_source
from vosti_plugin.verifier import ir

HEADER = "import triton\nimport triton.language as tl\n@triton.jit\n"


def _src(body: str) -> str:
    return HEADER + "def k(x, y, n, BLOCK: tl.constexpr):\n" + "".join("    " + l + "\n" for l in body.splitlines())


@pytest.mark.parametrize("body,what,line", [
    ("i = 0\nwhile i < n:\n    i += 1", "while loop", 6),
    ("offs = tl.arange(0, BLOCK)\ntl.atomic_add(y + offs, 1.0)", "atomic", 6),
    ("v = tl.load(x)\nw = tl.inline_asm_elementwise('mov', '=r,r', [v], dtype=tl.float32, is_pure=True, pack=1)",
     "inline assembly", 6),
    ("v = tl.load(x)\nw = my_helper(v)", "unknown function", 6),
    ("for i in range(n):\n    break", "break", 6),
    ("v = tl.load(x)\nr = tl.cumsum(v, 0)", "scans", 6),
    ("v = tl.load(y)\nx.store([0], v)", "tensor-descriptor stores", 6),
    ("z = x\nv = z.load([0])", "descriptor load on a local name", 6),
    ("v = x.load(0)", "desc.load([offsets])", 5),
])
def test_outside_the_subset_is_rejected_with_line(body, what, line):
    with pytest.raises(Unsupported) as err:
        kernel_from_source(_src(body))
    assert err.value.kernel == "k"
    assert what in err.value.what
    assert err.value.line == line


def test_subset_kernel_becomes_ir_with_lines():
    k = kernel_from_source(_src(
        "pid = tl.program_id(0)\n"
        "offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
        "acc = tl.zeros((BLOCK,), dtype=tl.float32)\n"
        "for i in range(0, n):\n"
        "    acc += tl.where(offs < n, tl.exp(tl.load(x + offs, mask=offs < n, other=0.0)), 0.0)\n"
        "if n > 0:\n"
        "    tl.store(y + offs, tl.maximum(acc, 0.0), mask=offs < n)\n"))
    assert k.name == "k" and [p.name for p in k.params if p.constexpr] == ["BLOCK"]
    kinds = [type(s).__name__ for s in k.body]
    assert kinds == ["Assign", "Assign", "Assign", "For", "If"]
    loop = k.body[3]
    assert isinstance(loop, ir.For) and loop.line == 8
    store = k.body[4].then[0]
    assert isinstance(store, ir.Store) and store.line == 11
