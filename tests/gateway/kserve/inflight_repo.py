"""Conch's own repository in the public `inflight_batcher_llm` layout (ensemble, preprocessing,
tensorrt_llm, postprocessing, tensorrt_llm_bls), with `tensorrt_llm` served on CPU by Conch's engine
(`conch_backend: transformers`) over the tiny random-weights model and its tokenizer folder."""
from __future__ import annotations

import shutil
from pathlib import Path

from conch.engine.weights import ensure_tiny_model

HERE = Path(__file__).parent / "inflight"
WORDS = ('{ name: "bad_words", data_type: TYPE_STRING, dims: [ -1 ], optional: true },\n'
         '  { name: "stop_words", data_type: TYPE_STRING, dims: [ -1 ], optional: true }')
FRONT_INPUTS = f'''input [
  {{ name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] }},
  {{ name: "max_tokens", data_type: TYPE_INT32, dims: [ 1 ] }},
  {WORDS},
  {{ name: "stream", data_type: TYPE_BOOL, dims: [ 1 ], optional: true }}
]
output [ {{ name: "text_output", data_type: TYPE_STRING, dims: [ -1 ] }} ]'''

CONFIGS = {
    "preprocessing": '''backend: "python"
max_batch_size: 4
input [
  { name: "QUERY", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "REQUEST_OUTPUT_LEN", data_type: TYPE_INT32, dims: [ 1 ] },
  { name: "BAD_WORDS_DICT", data_type: TYPE_STRING, dims: [ -1 ], optional: true },
  { name: "STOP_WORDS_DICT", data_type: TYPE_STRING, dims: [ -1 ], optional: true },
  { name: "END_ID", data_type: TYPE_INT32, dims: [ 1 ], optional: true },
  { name: "PAD_ID", data_type: TYPE_INT32, dims: [ 1 ], optional: true }
]
output [
  { name: "INPUT_ID", data_type: TYPE_INT32, dims: [ -1 ] },
  { name: "REQUEST_INPUT_LEN", data_type: TYPE_INT32, dims: [ 1 ] },
  { name: "BAD_WORDS_IDS", data_type: TYPE_INT32, dims: [ 2, -1 ] },
  { name: "STOP_WORDS_IDS", data_type: TYPE_INT32, dims: [ 2, -1 ] },
  { name: "REQUEST_OUTPUT_LEN", data_type: TYPE_INT32, dims: [ -1 ] },
  { name: "OUT_END_ID", data_type: TYPE_INT32, dims: [ 1 ] },
  { name: "OUT_PAD_ID", data_type: TYPE_INT32, dims: [ 1 ] }
]
parameters { key: "tokenizer_dir" value: { string_value: "TOKENIZER" } }''',
    "tensorrt_llm": '''backend: "tensorrtllm"
max_batch_size: 4
model_transaction_policy { decoupled: true }
input [
  { name: "input_ids", data_type: TYPE_INT32, dims: [ -1 ], allow_ragged_batch: true },
  { name: "input_lengths", data_type: TYPE_INT32, dims: [ 1 ], reshape: { shape: [ ] } },
  { name: "request_output_len", data_type: TYPE_INT32, dims: [ 1 ], reshape: { shape: [ ] } },
  { name: "end_id", data_type: TYPE_INT32, dims: [ 1 ], optional: true },
  { name: "pad_id", data_type: TYPE_INT32, dims: [ 1 ], optional: true },
  { name: "stop_words_list", data_type: TYPE_INT32, dims: [ 2, -1 ], optional: true },
  { name: "bad_words_list", data_type: TYPE_INT32, dims: [ 2, -1 ], optional: true },
  { name: "beam_width", data_type: TYPE_INT32, dims: [ 1 ], optional: true },
  { name: "temperature", data_type: TYPE_FP32, dims: [ 1 ], optional: true },
  { name: "runtime_top_k", data_type: TYPE_INT32, dims: [ 1 ], optional: true },
  { name: "random_seed", data_type: TYPE_UINT64, dims: [ 1 ], optional: true },
  { name: "return_log_probs", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "exclude_input_in_output", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "streaming", data_type: TYPE_BOOL, dims: [ 1 ], optional: true }
]
output [
  { name: "output_ids", data_type: TYPE_INT32, dims: [ -1, -1 ] },
  { name: "sequence_length", data_type: TYPE_INT32, dims: [ -1 ] },
  { name: "cum_log_probs", data_type: TYPE_FP32, dims: [ -1 ] },
  { name: "output_log_probs", data_type: TYPE_FP32, dims: [ -1, -1 ] }
]
parameters { key: "conch_backend" value: { string_value: "transformers" } }
parameters { key: "tokenizer_dir" value: { string_value: "TOKENIZER" } }
parameters { key: "dtype" value: { string_value: "float32" } }''',
    "postprocessing": '''backend: "python"
max_batch_size: 4
input [
  { name: "TOKENS_BATCH", data_type: TYPE_INT32, dims: [ -1, -1 ] },
  { name: "SEQUENCE_LENGTH", data_type: TYPE_INT32, dims: [ -1 ] }
]
output [ { name: "OUTPUT", data_type: TYPE_STRING, dims: [ -1 ] } ]
parameters { key: "tokenizer_dir" value: { string_value: "TOKENIZER" } }''',
    "tensorrt_llm_bls": f'''backend: "python"
max_batch_size: 4
model_transaction_policy {{ decoupled: true }}
{FRONT_INPUTS}''',
    "ensemble": f'''platform: "ensemble"
max_batch_size: 4
{FRONT_INPUTS}
ensemble_scheduling {{ step [
  {{ model_name: "preprocessing", model_version: -1,
    input_map {{ key: "QUERY", value: "text_input" }} input_map {{ key: "REQUEST_OUTPUT_LEN", value: "max_tokens" }}
    input_map {{ key: "BAD_WORDS_DICT", value: "bad_words" }}
    input_map {{ key: "STOP_WORDS_DICT", value: "stop_words" }}
    output_map {{ key: "INPUT_ID", value: "_INPUT_ID" }} output_map {{ key: "REQUEST_INPUT_LEN", value: "_INPUT_LEN" }}
    output_map {{ key: "REQUEST_OUTPUT_LEN", value: "_OUTPUT_LEN" }}
    output_map {{ key: "BAD_WORDS_IDS", value: "_BAD_WORDS_IDS" }}
    output_map {{ key: "STOP_WORDS_IDS", value: "_STOP_WORDS_IDS" }}
    output_map {{ key: "OUT_END_ID", value: "_END_ID" }} output_map {{ key: "OUT_PAD_ID", value: "_PAD_ID" }} }},
  {{ model_name: "tensorrt_llm", model_version: -1,
    input_map {{ key: "input_ids", value: "_INPUT_ID" }} input_map {{ key: "input_lengths", value: "_INPUT_LEN" }}
    input_map {{ key: "request_output_len", value: "_OUTPUT_LEN" }} input_map {{ key: "end_id", value: "_END_ID" }}
    input_map {{ key: "pad_id", value: "_PAD_ID" }} input_map {{ key: "streaming", value: "stream" }}
    input_map {{ key: "bad_words_list", value: "_BAD_WORDS_IDS" }}
    input_map {{ key: "stop_words_list", value: "_STOP_WORDS_IDS" }}
    output_map {{ key: "output_ids", value: "_TOKENS_BATCH" }}
    output_map {{ key: "sequence_length", value: "_SEQUENCE_LENGTH" }} }},
  {{ model_name: "postprocessing", model_version: -1,
    input_map {{ key: "TOKENS_BATCH", value: "_TOKENS_BATCH" }}
    input_map {{ key: "SEQUENCE_LENGTH", value: "_SEQUENCE_LENGTH" }}
    output_map {{ key: "OUTPUT", value: "text_output" }} }}
] }}''',
}
MODEL_FILES = {"preprocessing": "preprocessing.py", "postprocessing": "postprocessing.py",
               "tensorrt_llm_bls": "tensorrt_llm_bls.py"}


def build_inflight(root: Path) -> Path:
    tokenizer = str(ensure_tiny_model())
    for name, body in CONFIGS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(f'name: "{name}"\n' + body.replace("TOKENIZER", tokenizer))
        if name in MODEL_FILES:
            shutil.copy(HERE / MODEL_FILES[name], root / name / "1" / "model.py")
    return root
