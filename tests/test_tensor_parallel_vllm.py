"""Real vLLM with tensor parallel size 2 on CPU (two worker processes, vLLM's CPU communicator): a
request's raw logits are bitwise the same alone, batched with others and prefilled in other chunks, they
match an independent reference forward, and the certificate records the TP size and vosti's collective.

The four variation classes against stock TP 2 as the control run through the harness (a few minutes):
    python -m vosti_plugin.integration.harness --scale cpu --modes vosti-tp2,default-tp2 --models tiny --eager
"""
import gc
import json

import pytest
import torch

pytestmark = pytest.mark.vllm

BUDGET = 64
LONG = [(i * 37 + 11) % 500 + 3 for i in range(90)]          # prefilled in chunks of at most BUDGET tokens
SHORT = [[(i * 53 + 5 + k) % 500 + 3 for i in range(n)] for k, n in ((1, 23), (2, 41), (3, 7))]


@pytest.fixture(scope="module")
def tp_run(tiny_model_path, tmp_path_factory):
    from vosti_plugin.integration.engine_presets import build_llm

    cert = tmp_path_factory.mktemp("tp") / "certificate.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("VOSTI_CERTIFICATE", str(cert))
    mp.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")   # apply_model sends a function to the workers
    try:
        llm = build_llm(tiny_model_path, tensor_parallel_size=2, distributed_executor_backend="mp",
                        skip_tokenizer_init=True, max_num_batched_tokens=BUDGET, max_model_len=256,
                        enforce_eager=True, max_logprobs=-1)
        yield llm, cert
    finally:
        mp.undo()
    del llm
    gc.collect()


def _raw_logits(llm, prompts):
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=3, temperature=0.0, logprobs=-1, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [[tuple(sorted((t, float(lp.logprob).hex()) for t, lp in step.items())) for step in o.outputs[0].logprobs]
            for o in outs]


def test_tp2_logits_are_bitwise_alone_batched_and_chunked(tp_run, tiny_model_path):
    llm, _ = tp_run
    alone = _raw_logits(llm, [LONG])[0]
    batched = _raw_logits(llm, [SHORT[0], LONG, SHORT[1]])[1]    # LONG's chunks now share the budget
    reordered = _raw_logits(llm, [SHORT[2], SHORT[1], SHORT[0], LONG])[3]
    assert batched == alone and reordered == alone

    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_model_path, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        reference = model(torch.tensor([LONG])).logits[0, -1].double()
    first = dict((t, float.fromhex(h)) for t, h in alone[0])
    ours = torch.tensor([first[t] for t in range(reference.shape[0])], dtype=torch.float64)
    assert torch.allclose(ours, reference, atol=2e-4, rtol=0), (ours - reference).abs().max()


def test_tp2_certificate_records_the_tp_size_and_the_collective(tp_run):
    from vosti_plugin.parallel.fixed_order import COLLECTIVE

    _, cert = tp_run
    facts = json.loads(cert.read_text())["model"]
    assert facts["tensor_parallel"] == 2 and facts["tp_collective"] == COLLECTIVE


def _all_reduce_in_worker(model):
    from vllm.distributed.parallel_state import get_tp_group

    group = get_tp_group()
    return group.world_size, type(group)._all_reduce_out_place.__code__.co_filename.rsplit("/", 3)[-3:]


def test_each_tp_worker_runs_vostis_all_reduce(tp_run):
    llm, _ = tp_run
    assert llm.apply_model(_all_reduce_in_worker) == [(2, ["vosti_plugin", "vllm", "collectives.py"])] * 2
