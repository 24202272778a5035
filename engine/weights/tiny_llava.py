"""A tiny random-weights Llava-1.5 (a CLIP vision tower, Llava's two-layer projector and a Llama language model),
built locally from a transformers LlavaConfig for tests and benchmarks: SmolLM2's tokenizer with `<image>`
added as one special token, and the CLIP image processor constructed in code (32x32 pixels, 8x8 patches: 16
image tokens an image, as Llava-1.5's 336/14 give 576). Its outputs are noise; its arithmetic is Llava's."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conch.engine.weights.cache_dir import DONE, cache_dir, publish
from conch.engine.weights.hub_layout import HubLayout
from conch.engine.weights.smollm2 import ensure_smollm2

TINY_LLAVA_ID = "tiny-random-llava-v2"     # v2: head_dim 64, the hub's tensor names (a v1 cache is not reused)
IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH = 32, 8


class _TokenizerAndProcessor:
    """Both saved into the one folder (publish saves a model and one more thing)."""

    def __init__(self, tokenizer: Any, processor: Any) -> None:
        self.tokenizer, self.processor = tokenizer, processor

    def save_pretrained(self, folder: Path) -> None:
        self.tokenizer.save_pretrained(folder)
        self.processor.save_pretrained(folder)


def image_processor() -> Any:
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    return CLIPImageProcessorPil(size={"shortest_edge": IMAGE_SIZE},
                                 crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


def tiny_llava_config(tokenizer: Any) -> Any:
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig

    text = LlamaConfig(          # head_dim 64: one vLLM-CPU's attention takes (and Conch's native kernels)
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              image_size=IMAGE_SIZE, patch_size=PATCH, projection_dim=32)
    return LlavaConfig(vision_config=vision, text_config=text,
                       image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
                       vision_feature_layer=-2, vision_feature_select_strategy="default",
                       tie_word_embeddings=True)


def ensure_tiny_llava(seed: int = 0) -> Path:
    target = cache_dir() / f"{TINY_LLAVA_ID}-{seed}"
    if (target / DONE).exists():
        return target
    import torch
    from transformers import AutoTokenizer, LlavaForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2())
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(tiny_llava_config(tokenizer)).to(torch.float32)  # type: ignore[arg-type]
    publish(HubLayout(model), _TokenizerAndProcessor(tokenizer, image_processor()), target)   # vLLM reads it
    return target
