"""The text tower of a multimodal checkpoint as vLLM's text model (registered by vosti_plugin.vllm.text_tower,
imported by vLLM only when a config names it). Imports vLLM's model module at import time.

Gemma-3 4B/12B/27B checkpoints name their text weights for the multimodal model (`language_model.model.*`
before transformers 4.52, `model.language_model.*` after) and also hold the vision tower and projector;
the text model's loader gets the text weights under its own names and never sees the others."""
from __future__ import annotations

from collections.abc import Iterable

from vllm.model_executor.models.gemma3 import Gemma3ForCausalLM
from vllm.model_executor.models.utils import WeightsMapper

# Prefixes are applied in order, each to the name the previous ones left; None drops the weight.
GEMMA3_TEXT_TOWER_MAPPER = WeightsMapper(orig_to_new_prefix={
    "model.language_model.": "model.",            # transformers >= 4.52
    "language_model.model.": "model.",            # older checkpoints
    "language_model.lm_head.": "lm_head.",        # (tied to the embeddings: usually absent)
    "model.vision_tower.": None,
    "vision_tower.": None,
    "model.multi_modal_projector.": None,
    "multi_modal_projector.": None,
})


class Gemma3TextTowerForCausalLM(Gemma3ForCausalLM):
    """Gemma3ForCausalLM over `text_config`, loading a Gemma3ForConditionalGeneration checkpoint's text
    weights (the vision tower and projector are skipped: not built, not loaded)."""

    text_tower_mapper = GEMMA3_TEXT_TOWER_MAPPER

    def load_weights(self, weights: Iterable[tuple[str, "torch.Tensor"]]) -> set[str]:  # noqa: F821
        return super().load_weights(self.text_tower_mapper.apply(weights))
