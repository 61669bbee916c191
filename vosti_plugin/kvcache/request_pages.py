"""What a vLLM request's pages hold: exact token tuples and the extra keys that are part of a page's
identity (tenant namespace = cache salt + LoRA on every page, plus vLLM's per-block multimodal /
prompt-embedding keys)."""
from __future__ import annotations

from collections.abc import Hashable


def page_tokens(request, page_size: int, num_pages: int) -> list[tuple[int, ...]]:
    tokens = request.all_token_ids
    return [tuple(tokens[i * page_size : (i + 1) * page_size]) for i in range(num_pages)]


def tenant_namespace(request) -> Hashable:
    lora = request.lora_request
    return (request.cache_salt, None if lora is None else (lora.lora_name, lora.lora_int_id))


def page_extras(request, page_size: int, num_pages: int) -> list[Hashable]:
    from vllm.v1.core.kv_cache_utils import generate_block_hash_extra_keys

    namespace = tenant_namespace(request)
    extras = []
    for i in range(num_pages):
        keys, _ = generate_block_hash_extra_keys(request, i * page_size, (i + 1) * page_size, 0)
        extras.append((namespace, keys))
    return extras
