"""A tiny random-weights Llama that speaks like a Qwen3 reasoning model: SmolLM2's tokenizer with `<think>` and
`</think>` added as single tokens (kept in decoded text, as Qwen3's are; `<tool_call>` stays spelled in
pieces, as SmolLM2 spells it: tests/grammars/test_added_tokens.py covers a grammar over a single added one)
and a chat template in Qwen3's shape (hermes tool calls, `reasoning_content` rendered back after the last
user turn; the generation prompt opens the thinking, as Qwen3's thinking releases do, and `enable_thinking`
false writes an empty block instead). Built locally for tests: its output is noise, so tests force shapes through
the thinking budget and a grammar."""
from __future__ import annotations

from pathlib import Path

from conch.engine.weights.cache_dir import DONE, cache_dir, publish
from conch.engine.weights.smollm2 import ensure_smollm2
from conch.engine.weights.tiny import tiny_llama

TINY_THINK_ID = "tiny-random-think-v3"
ADDED_TOKENS = ["<think>", "</think>"]

QWEN3_STYLE_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- set ns = namespace(last_query=-1) %}"
    "{%- for message in messages %}{%- if message.role == 'user' %}{%- set ns.last_query = loop.index0 %}"
    "{%- endif %}{%- endfor %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.reasoning_content and loop.index0 > ns.last_query %}"
    "{{- '<think>\\n' + message.reasoning_content.strip() + '\\n</think>\\n\\n' }}{%- endif %}"
    "{{- message.content or '' }}"
    "{%- for tc in message.tool_calls or [] %}{%- if tc.function %}{%- set tc = tc.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + tc.name + '\", \"arguments\": ' }}"
    "{%- if tc.arguments is string %}{{- tc.arguments }}{%- else %}{{- tc.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)


def ensure_tiny_think_model(seed: int = 0) -> Path:
    target = cache_dir() / f"{TINY_THINK_ID}-{seed}"
    if (target / DONE).exists():
        return target
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2())
    tokenizer.add_tokens(ADDED_TOKENS, special_tokens=False)
    tokenizer.chat_template = QWEN3_STYLE_TEMPLATE
    publish(tiny_llama(tokenizer, seed, max_positions=8192), tokenizer, target)
    return target
