"""The vLLM adapter: the only package of vosti_plugin that imports vllm (tests/test_layering.py).

What lives here: the attention backend classes (attention_backend), the schedulers (scheduler), the
KV-manager and block-pool adapters (kv_manager, block_pool, request_pages), launch facts read from a
vllm_config (launch_facts), multimodal checkpoints served as their text tower where vLLM's module for
them cannot be imported (text_tower, text_tower_model), every attribute of vLLM vosti replaces
(patches: the inventory and its apply/undo; replacements in hooks, ops_layers, sampling_patches), the
one place that knows vLLM
releases and checks the installed one (compat), and engine objects for tooling (engine).
Importing this package imports no vLLM.
"""
