"""What a vLLM request's pages hold: exact token tuples and the extra keys that are part of a page's
identity (tenant namespace = cache salt + LoRA on every page, plus vLLM's per-block multimodal /
prompt-embedding keys when the request has any). Both are lazy sequences: a lookup that misses on
page 0 of a long prompt builds one page key, not all of them."""
from __future__ import annotations

from collections.abc import Hashable, Sequence


def tenant_namespace(request) -> Hashable:
    """Part of every page's identity: (cache salt, LoRA). Pages are shared only within equal namespaces.

    An empty salt: vLLM's OpenAI server refuses `cache_salt=""` (HTTP 400, `validate_cache_salt`), and
    vLLM's offline renderer drops a falsy salt before the engine, so `LLM.generate` with `""` sends an
    unsalted request (use a non-empty salt for isolation). A request that still reaches this manager with
    `""` (built directly) is a tenant of its own: `""` is not `None`, so it never shares with unsalted ones.
    """
    lora = request.lora_request
    return (request.cache_salt, None if lora is None else (lora.lora_name, lora.lora_int_id))


class _LazyPages(Sequence):
    def __init__(self, request, page_size: int, num_pages: int) -> None:
        self.request, self.page_size, self.num_pages = request, page_size, num_pages
        self._cache: dict[int, object] = {}

    def __len__(self) -> int:
        return self.num_pages

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.num_pages))]
        if not 0 <= i < self.num_pages:
            raise IndexError(i)
        if i not in self._cache:
            self._cache[i] = self._build(i)
        return self._cache[i]


class PageTokens(_LazyPages):
    def _build(self, i: int) -> tuple[int, ...]:
        return tuple(self.request.all_token_ids[i * self.page_size : (i + 1) * self.page_size])


class PageExtras(_LazyPages):
    def __init__(self, request, page_size: int, num_pages: int) -> None:
        super().__init__(request, page_size, num_pages)
        self.namespace = tenant_namespace(request)
        self.needs_vllm_keys = bool(request.mm_features) or getattr(request, "prompt_embeds", None) is not None

    def _build(self, i: int) -> Hashable:
        if not self.needs_vllm_keys:
            return (self.namespace, None)
        from vllm.v1.core.kv_cache_utils import generate_block_hash_extra_keys

        keys, _ = generate_block_hash_extra_keys(self.request, i * self.page_size, (i + 1) * self.page_size, 0)
        return (self.namespace, keys)


def page_tokens(request, page_size: int, num_pages: int) -> PageTokens:
    return PageTokens(request, page_size, num_pages)


def page_extras(request, page_size: int, num_pages: int) -> PageExtras:
    return PageExtras(request, page_size, num_pages)
