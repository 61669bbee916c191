"""Multimodal checkpoints whose vLLM model module cannot be imported on this machine (Gemma-3 4B/12B/27B:
`gemma3_mm` imports transformers' image processor, which needs torchvision, which the CPU set-up lacks).
vLLM inspects the model class before any config exists, so the offline check and a vosti engine would die
there. Instead both build the config of the text tower as the text model it is (Gemma3ForCausalLM over
`text_config`): the same attention and matmul geometry the served text path launches. A vosti engine
serves it through a registered subclass of that text model (TEXT_TOWER_MODELS, vosti_plugin.vllm.
text_tower_model) that maps the checkpoint's multimodal weight names to the text model's and skips the
vision tower and projector. The multimodal part is judged from the launch arguments (the
`text-only-inputs` obligation): the shipped architecture and whether the launch would take images ride on
the text config (MARKER), so every process's launch facts read them from the config it was given.

A text-only launch (`--language-model-only`) of such a checkpoint takes the same text tower where the
multimodal module does import (a GPU host): vLLM builds the multimodal model's attention layers for a
prefix LM (bidirectional over image tokens, `is_mm_prefix_lm`), a mask vosti's attention does not
implement and vLLM refuses to pair with it, although a text-only launch never sees an image token."""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

# text architecture -> (the architecture name vosti registers, "module:Class" vLLM imports lazily)
TEXT_TOWER_MODELS = {
    "Gemma3ForCausalLM": ("VostiGemma3TextTowerForCausalLM",
                          "vosti_plugin.vllm.text_tower_model:Gemma3TextTowerForCausalLM"),
}
# Attribute of the text config built in place of a multimodal one: a dict of the TextTowerStandIn fields.
MARKER = "vosti_text_tower"


@dataclass(frozen=True)
class TextTowerStandIn:
    architecture: str           # as shipped, e.g. Gemma3ForConditionalGeneration
    checked_as: str             # the text architecture whose config was built, e.g. Gemma3ForCausalLM
    missing_module: str         # what the shipped architecture's vLLM module failed to import ("": it imports,
                                # and the launch is text only)
    multimodal_inputs: bool     # whether `vllm serve` with these arguments would accept images
    served_as: str = ""         # the registered architecture that loads the checkpoint's text weights, if any

    def note(self) -> str:
        if not self.missing_module:
            return (f"{self.architecture} launched text only (--language-model-only): its text tower was checked "
                    f"as {self.checked_as}")
        return (f"{self.architecture}'s vLLM module needs {self.missing_module}, which is not installed here: "
                f"its text tower was checked as {self.checked_as}")

    def serve_note(self) -> str:
        """What a vosti engine serving this checkpoint says once, when its config is built."""
        served = (f"serving its text tower as {self.checked_as} ({self.served_as}: the text weights under the "
                  "text model's names)") if self.served_as else \
            f"its text tower is built as {self.checked_as}, but no vosti text-tower loader knows its weight names"
        refused = ("image inputs are refused (launch obligation text-only-inputs: pass --language-model-only)"
                   if self.multimodal_inputs else "the launch is text only (--language-model-only)")
        why = (f"vLLM's module for it needs {self.missing_module}, which is not installed here" if self.missing_module
               else "the launch is text only, and vLLM's multimodal model would build its attention layers for "
                    "bidirectional attention over image tokens, which vosti's attention does not implement")
        return (f"vosti: the vision tower of {self.architecture} is not served: {why}; {served}; its vision tower "
                f"and projector weights are skipped and {refused}")


def register_text_tower_models(registry=None) -> dict:
    """Register every TEXT_TOWER_MODELS architecture with vLLM's ModelRegistry (lazily: nothing is imported
    until a config names it). Returns {architecture: what the registry held before, or None} for undo."""
    if registry is None:
        from vllm.model_executor.models.registry import ModelRegistry as registry
    before = {}
    for name, qualname in TEXT_TOWER_MODELS.values():
        before[name] = registry.models.get(name)
        registry.register_model(name, qualname)
    return before


def unregister_text_tower_models(before: dict, registry=None) -> None:
    """Put back what register_text_tower_models found (an architecture absent before is removed again)."""
    if registry is None:
        from vllm.model_executor.models.registry import ModelRegistry as registry
    for name, held in before.items():
        if held is None:
            registry.models.pop(name, None)
        else:
            registry.models[name] = held


def stand_in_of(hf_config) -> TextTowerStandIn | None:
    """The stand-in a config was built by (read from the text config vLLM holds), or None."""
    marker = getattr(hf_config, MARKER, None)
    return TextTowerStandIn(**marker) if isinstance(marker, dict) else None


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


@dataclass(frozen=True, eq=False)
class _AsTextModel:
    """engine_args.hf_overrides: the text config in place of the multimodal one (a module-level class, so a
    ModelConfig holding it pickles into spawned engine processes)."""
    architecture: str
    marker: dict
    user_overrides: object = None       # the user's own --hf-overrides (a dict), applied to the text config

    def __call__(self, config):
        text = config.get_text_config()
        if self.user_overrides and not callable(self.user_overrides):
            text.update({k: v for k, v in self.user_overrides.items() if not isinstance(v, dict)})
        text.architectures = [self.architecture]
        if getattr(text, "torch_dtype", None) is None and getattr(config, "torch_dtype", None) is not None:
            text.torch_dtype = config.torch_dtype
        setattr(text, MARKER, dict(self.marker))
        return text


def text_tower_stand_in(engine_args) -> TextTowerStandIn | None:
    """Point engine_args at the text tower when the shipped multimodal architecture cannot be loaded here, or
    the launch is text only and vosti has a loader for its text tower (returns what was done); else leave them
    alone (None)."""
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
    text_only = bool(getattr(engine_args, "language_model_only", False))
    checked_as = _text_architecture(text) if missing or text_only else None
    if checked_as is None:
        return None
    served_as = _served_as(checked_as)
    if not missing and not served_as:       # no vosti loader for this text tower: vLLM's own model, as shipped
        return None
    stand_in = TextTowerStandIn(archs[0], checked_as, missing or "", multimodal_inputs=not text_only,
                                served_as=served_as or "")
    engine_args.hf_overrides = _AsTextModel(served_as or checked_as, dataclasses.asdict(stand_in),
                                            engine_args.hf_overrides)
    return stand_in


def has_text_tower_loader(hf_config) -> bool:
    """Whether vosti serves this multimodal config's text tower when the launch is text only."""
    text = hf_config.get_text_config()
    if text is hf_config:
        return False
    architecture = _text_architecture(text)
    return architecture is not None and _served_as(architecture) is not None


def _served_as(text_architecture: str) -> str | None:
    """The registered text-tower architecture for this text architecture (None: none registered here)."""
    from vllm.model_executor.models.registry import ModelRegistry

    name = TEXT_TOWER_MODELS.get(text_architecture, (None,))[0]
    return name if name in ModelRegistry.models else None
