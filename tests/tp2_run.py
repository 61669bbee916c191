"""`python tests/tp2_run.py MODEL OUT.json`: one vosti engine at tensor parallel size 2 on CPU, in its own
process (vLLM's parallel state and CPU thread binding are process-wide), for tests/test_tensor_parallel_vllm.py."""
import json
import os
import sys

BUDGET = 64
LONG = [(i * 37 + 11) % 500 + 3 for i in range(90)]          # prefilled in chunks of at most BUDGET tokens
SHORT = [[(i * 53 + 5 + k) % 500 + 3 for i in range(n)] for k, n in ((1, 23), (2, 41), (3, 7))]


def _raw_logits(llm, prompts):
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=3, temperature=0.0, logprobs=-1, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [[sorted((t, float(lp.logprob).hex()) for t, lp in step.items()) for step in o.outputs[0].logprobs]
            for o in outs]


def _all_reduce_in_worker(model):
    from vllm.distributed.parallel_state import get_tp_group

    group = get_tp_group()
    return group.world_size, type(group)._all_reduce_out_place.__code__.co_filename.rsplit("/", 3)[-3:]


def main(model: str, out: str) -> None:
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"   # apply_model sends a function to the workers
    from vosti_plugin.integration.engine_presets import build_llm

    llm = build_llm(model, tensor_parallel_size=2, distributed_executor_backend="mp", skip_tokenizer_init=True,
                    max_num_batched_tokens=BUDGET, max_model_len=256, enforce_eager=True, max_logprobs=-1)
    result = {
        "alone": _raw_logits(llm, [LONG])[0],
        "batched": _raw_logits(llm, [SHORT[0], LONG, SHORT[1]])[1],      # LONG's chunks now share the budget
        "reordered": _raw_logits(llm, [SHORT[2], SHORT[1], SHORT[0], LONG])[3],
        "workers": llm.apply_model(_all_reduce_in_worker),
    }
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
