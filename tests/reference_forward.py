"""What the CPU engine tests compare: an engine's raw logits, and the independent reference, transformers'
forward of the bundled tiny model in fp32."""
import torch


def assert_first_step_matches_reference(tiny_model_path, prompt: list[int], first_step: tuple, atol: float = 2e-4):
    """first_step: one generation step's (token id, logprob as float.hex()) pairs over the whole vocabulary."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_model_path, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        reference = model(torch.tensor([prompt])).logits[0, -1].double()
    step = dict((t, float.fromhex(h)) for t, h in first_step)
    ours = torch.tensor([step[t] for t in range(reference.shape[0])], dtype=torch.float64)
    assert torch.allclose(ours, reference, atol=atol, rtol=0)


def raw_logits(llm, prompts):
    """Greedy generation of 3 tokens per prompt; each step's (token id, raw logit as float.hex()) pairs."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=3, temperature=0.0, logprobs=-1, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [[tuple(sorted((t, float(lp.logprob).hex()) for t, lp in step.items())) for step in o.outputs[0].logprobs]
            for o in outs]
