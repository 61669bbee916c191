"""Multimodal checkpoints whose vLLM model module cannot be imported on this machine (Gemma-3 4B/12B/27B:
`gemma3_mm` imports transformers' image processor, which needs torchvision, which the CPU set-up lacks).
vLLM inspects the model class before any config exists, so the offline check would die there. Instead it
builds the config of the text tower as the text model it is (Gemma3ForCausalLM over `text_config`): the
same attention and matmul geometry the served text path launches. The multimodal part is judged from
the launch arguments (the `multimodal-inputs` obligation)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class TextTowerStandIn:
    architecture: str           # as shipped, e.g. Gemma3ForConditionalGeneration
    checked_as: str             # the text architecture whose config was built, e.g. Gemma3ForCausalLM
    missing_module: str         # what the shipped architecture's vLLM module failed to import
    multimodal_inputs: bool     # whether `vllm serve` with these arguments would accept images

    def note(self) -> str:
        return (f"{self.architecture}'s vLLM module needs {self.missing_module}, which is not installed here: "
                f"its text tower was checked as {self.checked_as}")


def _unimportable_module(architecture: str) -> str | None:
    """The module name whose absence stops vLLM from loading this architecture here, or None."""
    from vllm.model_executor.models.registry import ModelRegistry

    module = getattr(ModelRegistry.models.get(architecture), "module_name", None)
    if module is None:
        return None
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        return exc.name or str(exc)
    return None


def _text_architecture(text_config) -> str | None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    from vllm.model_executor.models.registry import ModelRegistry

    arch = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(getattr(text_config, "model_type", None))
    if arch not in ModelRegistry.models or _unimportable_module(arch):
        return None
    return arch


def _as_text_model(architecture: str, user_overrides):
    def override(config):
        text = config.get_text_config()
        if user_overrides and not callable(user_overrides):
            text.update({k: v for k, v in user_overrides.items() if not isinstance(v, dict)})
        text.architectures = [architecture]
        if getattr(text, "torch_dtype", None) is None and getattr(config, "torch_dtype", None) is not None:
            text.torch_dtype = config.torch_dtype
        return text
    return override


def text_tower_stand_in(engine_args) -> TextTowerStandIn | None:
    """Point engine_args at the text tower when the shipped multimodal architecture cannot be loaded here
    (returns what was done), else leave them alone (None)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(engine_args.model, revision=engine_args.revision,
                                            trust_remote_code=engine_args.trust_remote_code)
    except Exception:          # vLLM reports an unreadable config itself
        return None
    archs = getattr(config, "architectures", None) or []
    text = config.get_text_config()
    if not archs or text is config or callable(engine_args.hf_overrides):
        return None
    missing = _unimportable_module(archs[0])
    checked_as = _text_architecture(text) if missing else None
    if checked_as is None:
        return None
    engine_args.hf_overrides = _as_text_model(checked_as, engine_args.hf_overrides)
    return TextTowerStandIn(archs[0], checked_as, missing,
                            multimodal_inputs=not bool(getattr(engine_args, "language_model_only", False)))
