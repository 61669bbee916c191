"""Public class path `vosti_plugin.attention.backend.VostiAttentionBackend` (vLLM's CUSTOM backend points
at it). The classes live in the vLLM adapter, vosti_plugin.vllm.attention_backend; importing this module
gives that module itself (one module object, so its workspaces and SPLIT_WORKSPACE_BYTES have one home)."""
import sys

from vosti_plugin.vllm import attention_backend as _adapter

sys.modules[__name__] = _adapter
