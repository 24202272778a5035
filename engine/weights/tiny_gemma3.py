"""A tiny random-weights Gemma 3 vision-language model (Gemma3ForConditionalGeneration: a SigLIP tower, Gemma 3's
pooling projector, a Gemma 3 text model with sliding-window and global layers), built locally from a transformers
Gemma3Config for tests and benchmarks. Its processor is Gemma 3's own (Gemma3Processor over Gemma 3's image
processor: 64x64 pixels, 8x8 patches, average-pooled 2x2 to 16 image tokens, as 896/14 pooled 4x4 give 256),
with Gemma 3's chat template and special tokens (`<start_of_image>`, `<image_soft_token>`, `<end_of_image>`,
`<start_of_turn>`, `<end_of_turn>`) added to SmolLM2's tokenizer. Its outputs are noise; its arithmetic is
Gemma 3's."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conch.engine.weights.cache_dir import DONE, cache_dir, publish
from conch.engine.weights.hub_layout import HubLayout
from conch.engine.weights.smollm2 import ensure_smollm2

TINY_GEMMA3_ID = "tiny-random-gemma3"
IMAGE_SIZE, PATCH, TOKENS = 64, 8, 16
IMAGE_TOKENS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
TURNS = ["<start_of_turn>", "<end_of_turn>"]

# Gemma 3's chat template (google/gemma-3-4b-it's tokenizer_config.json)
CHAT_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""


def gemma3_tokenizer() -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2(), extra_special_tokens=IMAGE_TOKENS)
    tokenizer.add_tokens(TURNS, special_tokens=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def gemma3_processor(tokenizer: Any) -> Any:
    from transformers import Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    images = Gemma3ImageProcessorPil(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    return Gemma3Processor(image_processor=images, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE,
                           image_seq_length=TOKENS)


def tiny_gemma3_config(tokenizer: Any, **text_keys: Any) -> Any:
    """The tiny model's Gemma3Config; `text_keys` override its text model's (a shape llama.cpp's files hold)."""
    from transformers import Gemma3Config, Gemma3TextConfig, SiglipVisionConfig

    keys = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
                layer_types=["sliding_attention", "full_attention"], max_position_embeddings=2048,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id)
    text = Gemma3TextConfig(**{**keys, **text_keys})
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                image_size=IMAGE_SIZE, patch_size=PATCH, vision_use_head=False)   # as Gemma 3's
    return Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=TOKENS,
                        boi_token_index=tokenizer.boi_token_id, eoi_token_index=tokenizer.eoi_token_id,
                        image_token_index=tokenizer.image_token_id)


def ensure_tiny_gemma3(seed: int = 0) -> Path:
    target = cache_dir() / f"{TINY_GEMMA3_ID}-{seed}"
    if not (target / DONE).exists():
        tokenizer = gemma3_tokenizer()
        publish(HubLayout(tiny_gemma3(tiny_gemma3_config(tokenizer), tokenizer, seed)), gemma3_processor(tokenizer),
                target)
    return target      # the processor saves its tokenizer too


def tiny_gemma3(config: Any, tokenizer: Any, seed: int) -> Any:
    """The random-weights model of `config` in float32, its weights drawn from `seed`."""
    import torch
    from transformers import Gemma3ForConditionalGeneration

    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).to(torch.float32)  # type: ignore[arg-type]
    with torch.no_grad():          # HF leaves the projection zeros (a trained model's is loaded): images would be 0
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(std=0.05)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(TURNS[1])]
    return model
