"""Completeness control kept outside the corpus glob: attention-style masking by adding -inf to a score that
is finite by construction proves (tests/verifier_corpus/control_inf_arithmetic_mask.py); its unguarded
variant is the corpus mutant bad_inf_arithmetic_mask. Run apart from test_verifier_corpus.py because proving
it earlier in the same process flips good_persistent_matmul's coverage proof (a Z3 query whose answer
depends on the process's earlier Z3 work; see the issue 19 closing note)."""
import sys
from pathlib import Path

from vosti_plugin.verifier.api import verify_kernel

ROOT = Path(__file__).resolve().parent.parent


def test_inf_arithmetic_masking_on_a_finite_score_proves():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.verifier_corpus import control_inf_arithmetic_mask as mod

    report = verify_kernel(mod.inf_arithmetic_mask_kernel, config=mod.CONFIGS[0])
    assert report.status == "proved", str(report)
    assert {o.name for o in report.obligations} >= {"coverage", "read-equal-region", "loop-invariant"}
