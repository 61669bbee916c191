"""vLLM engine objects for vosti's tooling (demo, presets, harness): the offline `LLM` and its
`SamplingParams`. vosti_plugin.integration.engine_presets chooses the settings."""
from __future__ import annotations


def llm(**engine_kwargs):
    from vllm import LLM

    return LLM(**engine_kwargs)


def sampling_params(**kwargs):
    from vllm import SamplingParams

    return SamplingParams(**kwargs)
