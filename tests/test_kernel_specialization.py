"""Every kernel argument that follows a step's size is unspecialized (static, CPU).

Triton compiles a kernel per specialization of its int arguments (a value of 1, a multiple of 16): an argument that
follows the step (its rows, its sequences) would compile a new kernel the first time a step has such a value,
after vLLM's warm-up, while serving. The GPU test that counts the compiles is tests/test_compiles_once.py;
this one keeps every kernel of the package, present and future, to the rule."""
import ast
from pathlib import Path

import vosti_plugin

STEP_SIZED = frozenset({"M", "T", "num_seqs", "num_segments", "num_tokens", "num_rows"})


def specialized_step_sizes(source: str) -> list[tuple[str, str]]:
    """(kernel, argument) for each step-sized int argument of a @triton.jit kernel that Triton would specialize."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        jit = [d for d in node.decorator_list if "jit" in ast.unparse(d)]
        if not jit:
            continue
        unspecialized = set()
        if isinstance(jit[0], ast.Call):
            for kw in jit[0].keywords:
                if kw.arg == "do_not_specialize":
                    unspecialized |= {ast.literal_eval(e) for e in kw.value.elts}
        for arg in node.args.args:
            constexpr = arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)
            if arg.arg in STEP_SIZED and not constexpr and arg.arg not in unspecialized:
                found.append((node.name, arg.arg))
    return found


def test_step_sized_arguments_are_unspecialized_in_every_kernel():
    root = Path(vosti_plugin.__file__).parent
    found = {str(p.relative_to(root)): hits for p in sorted(root.rglob("*.py"))
             if "triton.jit" in (text := p.read_text()) and (hits := specialized_step_sizes(text))}
    assert found == {}, f"add these to the kernel's do_not_specialize: {found}"
    attention = (root / "attention" / "paged_attention.py").read_text()
    assert "_paged_attention_segments_kernel" in attention and specialized_step_sizes(attention) == []


def test_the_rule_names_a_specialized_step_size():
    source = '''
@triton.jit(do_not_specialize=["num_segments"])
def k(x_ptr, num_seqs, num_segments, H, BLOCK: tl.constexpr, M: tl.constexpr):
    pass

@triton.jit
def helper(M):
    pass
'''
    assert specialized_step_sizes(source) == [("k", "num_seqs"), ("helper", "M")]
