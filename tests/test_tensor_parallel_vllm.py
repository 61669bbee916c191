"""Real vLLM with tensor parallel size 2 on CPU (two worker processes, vLLM's CPU communicator): a
request's raw logits are bitwise the same alone, batched with others and prefilled in other chunks, they
match an independent reference forward, each worker runs vosti's all-reduce, and the certificate records
the TP size and the collective. The engine runs in its own process (tests/tp2_run.py).

The four variation classes against stock TP 2 as the control run through the harness (a few minutes):
    python -m vosti_plugin.integration.harness --scale cpu --modes vosti-tp2,default-tp2 --models tiny --eager
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).parent))
from tp2_run import LONG  # noqa: E402


@pytest.fixture(scope="module")
def tp_run(tiny_model_path, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tp")
    cert, out = tmp / "certificate.json", tmp / "run.json"
    # this checkout's package first, whichever checkout the environment's install points at
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "VOSTI_CERTIFICATE": str(cert),
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, str(Path(__file__).parent / "tp2_run.py"), str(tiny_model_path), str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text()), cert


def test_tp2_logits_are_bitwise_alone_batched_and_chunked(tp_run, tiny_model_path):
    run, _ = tp_run
    assert run["batched"] == run["alone"] and run["reordered"] == run["alone"]

    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_model_path, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        reference = model(torch.tensor([LONG])).logits[0, -1].double()
    first = dict((t, float.fromhex(h)) for t, h in run["alone"][0])
    ours = torch.tensor([first[t] for t in range(reference.shape[0])], dtype=torch.float64)
    assert torch.allclose(ours, reference, atol=2e-4, rtol=0), (ours - reference).abs().max()


def test_each_tp_worker_runs_vostis_all_reduce(tp_run):
    run, _ = tp_run
    assert run["workers"] == [[2, ["vosti_plugin", "vllm", "collectives.py"]]] * 2


def test_tp2_certificate_records_the_tp_size_and_the_collective(tp_run):
    from vosti_plugin.parallel.fixed_order import COLLECTIVE

    _, cert = tp_run
    facts = json.loads(cert.read_text())["model"]
    assert facts["tensor_parallel"] == 2 and facts["tp_collective"] == COLLECTIVE
