"""Tensor-descriptor loads in the verifier: `desc.load([o0, o1])` is the masked load of a block that the
contract's descriptor shape bounds (TMA's zero fill), and a descriptor is read only that way."""
import inspect

import pytest

from vosti_plugin.verifier.api import verify_kernel
from vosti_plugin.verifier.contracts import contract_of

from tests.verifier_corpus import good_descriptor_matmul as good

SPEC = contract_of(good.descriptor_matmul_kernel)
SOURCE = inspect.getsource(good.descriptor_matmul_kernel.fn)
SOURCE = SOURCE[SOURCE.index("@triton.jit"):]
CONFIG = good.CONFIGS[0]


def test_the_descriptor_matmul_is_proved():
    assert verify_kernel(SOURCE, SPEC, CONFIG).status == "proved"


@pytest.mark.parametrize("old,new,obligation", [
    # row x + 1 is past a one-row launch's M there, so its zero fill differs from the M-row launch's element
    ("a_t = a.load([pid_m * BLOCK_M, k0])", "a_t = a.load([pid_m * BLOCK_M + 1, k0])", "guard-agreement"),
    ("for k0 in range(0, K, BLOCK_K):", "for k0 in range(0, K + (M % 2) * BLOCK_K, BLOCK_K):", "masked-noop"),  # an extra block past K
])
def test_a_broken_descriptor_kernel_is_rejected(old, new, obligation):
    mutant = SOURCE.replace(old, new)
    assert mutant != SOURCE
    report = verify_kernel(mutant, SPEC, CONFIG)
    assert report.status == "failed" and report.failure.name == obligation, str(report)


@pytest.mark.parametrize("old,new,what", [
    ("a_t = a.load([pid_m * BLOCK_M, k0])", "a_t = tl.load(a)", "tl.load through tensor descriptor a"),
    ("tl.store(c + rm", "junk = c.load([0, 0])\n    tl.store(c + rm", "not a tensor-descriptor parameter"),
    ("a_t = a.load([pid_m * BLOCK_M, k0])", "a_t = a.load([pid_m * BLOCK_M])", "1 offsets for a rank-2"),
    # a reshape that moves elements (not only axes of size 1)
    ("a_t = a.load([pid_m * BLOCK_M, k0])", "a_t = a.load([pid_m * BLOCK_M, k0]).reshape(BLOCK_K, BLOCK_M)",
     "only axes of size 1"),
    ("a_t = a.load([pid_m * BLOCK_M, k0])", "a_t = tl.reshape(a.load([pid_m * BLOCK_M, k0]), [BLOCK_M, BLOCK_K], "
     "can_reorder=True)", "can_reorder=False"),
])
def test_a_descriptor_used_outside_desc_load_is_unsupported(old, new, what):
    mutant = SOURCE.replace(old, new)
    assert mutant != SOURCE
    report = verify_kernel(mutant, SPEC, CONFIG)
    assert report.status == "unsupported" and what in str(report), str(report)


def test_a_reshape_through_axes_of_size_1_is_proved():
    mutant = SOURCE.replace("a_t = a.load([pid_m * BLOCK_M, k0])",
                            "a_t = tl.reshape(a.load([pid_m * BLOCK_M, k0]), [BLOCK_M, 1, BLOCK_K]).reshape(BLOCK_M, BLOCK_K)")
    assert mutant != SOURCE
    assert verify_kernel(mutant, SPEC, CONFIG).status == "proved"
