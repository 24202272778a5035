"""Issue 42: Conch serving GGUF files beside llama-server on the same files, in the same run, their runs alternated.

Part `llama` and part `qwen3`: a Llama-3.2-1B-shaped and a Qwen3-1.7B-shaped model with RANDOM weights (decode
speed does not depend on their values), each built here from a transformers config written with the published
shapes (CONFIGS: the real vocabularies, 128,256 and 151,936 rows, tied embeddings, Llama 3.2's llama3 rope
scaling), SmolLM2's tokenizer in the folder (llama.cpp's converter pads its 49,152 tokens to the config's
vocabulary with [PADn] tokens, so the LM head has its real size), converted by llama.cpp's own
convert_hf_to_gguf.py (--outtype f16) and quantized by its llama-quantize to Q4_K_M and Q8_0. Cached under
~/.cache/conch/bench-gguf/ (CONCH_BENCH_GGUF_CACHE): a second run builds nothing. For each model x type,
llama-server (16 slots of 256 tokens, --threads 2 --threads-batch 2, --jinja) and then `conch serve --model
m=FILE` (its defaults: 2 threads here, kv_cache_mb 2048) on the same file, both kept up (llama-server probed
once first: where its AMX repacked product crashes, as on some AMX machines, it is measured with --no-repack,
and the run says so). The host's memory bandwidth can move by half from one minute to the next, so one server
measured after the other gave c1 ratios 0.80x and 1.20x on the same file within 10 minutes: the decode runs
are taken in CONCH_BENCH_GGUF_ROUNDS (default 3) rounds, each a c1 run of one server then the other, then a
c16 run of each (which server goes first alternates by round); a server's figure is its median over the
rounds, a ratio the median of the rounds' ratios:
  load     process start until it answers a first chat request (1 token; Conch as a user's shell starts it,
           its bytecode cached: SERVER_ENV), the median of
           CONCH_BENCH_GGUF_STARTS (default 3) starts of each server, theirs alternated (each printed); Conch's
           native kernels are built (or found cached) before any server starts, and that time is printed apart
  c1, c16  decode tokens/s: streamed chat completions over HTTP with the openai SDK, short prompts, greedy
           (temperature 0), ignore_eos, CONCH_BENCH_GGUF_TOKENS (default 64) new tokens each, counted from the
           stream's usage; c1: CONCH_BENCH_GGUF_C1_REQUESTS (default 4) one after another; c16: 16 at once;
           after both servers idled CONCH_BENCH_GGUF_SETTLE_S (default 10) seconds (what a server does in
           the background once it serves -- Conch moves its weights into huge pages while idle, huge_pages.py
           -- is over before any measured run and takes no core from the other's) and a warm-up of 16
           requests of 4 tokens at once (the other server idle meanwhile)
  RSS      VmRSS of the server process (and its children) after the decode runs: mapped pages of the file
           that were read count, for both servers; set against the file's size + the server's KV budget
           (llama-server: its 4,096 cells x the f16 K and V a cell holds, allocated at start; Conch: kv_cache_mb,
           a bound its slot store grows towards as sequences need it)
  floor    a plain read's bandwidth on this machine (torch summing a 2 GiB float32 tensor on 2 threads, the
           best of 5, measured in this run) over the bytes of weights one decode step reads (every blk.*
           matrix and the LM head: output.weight, or token_embd.weight when tied; gguf's n_bytes per tensor)
Then a table with the CPU's flags (lscpu) and the issue's goals: Conch / llama-server at c1 (>= 1.0x) and c16
(>= 2x), Conch c1 / floor (>= 1/1.5), Conch RSS / (file + KV) (<= 1.2x), Conch load / llama-server's (<= 2x).

Part `phi3` (not among the defaults: the issue's speed goals name the two above; ~8 GB and ~10 minutes to
build): a Phi-4-mini-shaped model (3.8B, vocabulary 200,064, fused qkv and gate_up, partial rotary) the same way.

Part `default`: the default model SmolLM2-135M-Instruct through Conch only, served from the registry package's
own Q4_1 GGUF and from its bf16 folder (ensure_smollm2()), c1 and c16 tokens/s, load time and RSS of each: the
issue's question whether to serve the packaged GGUF directly.

CONCH_BENCH_GGUF_PARTS (default llama,qwen3,default; phi3 where named) picks parts, CONCH_BENCH_GGUF_TYPES
(default Q4_K_M,Q8_0) the types. llama.cpp: CONCH_BENCH_LLAMA_CPP (bench_peers': .llama-cpp/, `make llama-cpp`),
its converter run by CONCH_BENCH_CONVERTER_PY (default: .venv-llama-cpp beside that folder, else this python).
Figures printed, no timed asserts; `make bench-gguf`, or `python -m tests.bench bench_gguf`. Not part of `make test`.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.bench.bench_engine_speed import CHAT, _client, stop
from tests.bench.bench_peers import LLAMA_CPP, LLAMA_SERVER, _llama_server
from tests.conftest import Server, start_server

CACHE = Path(os.environ.get("CONCH_BENCH_GGUF_CACHE", "~/.cache/conch/bench-gguf")).expanduser()
QUANTIZE = LLAMA_CPP / "bin" / "llama-quantize"
CONVERTER_PY = os.environ.get("CONCH_BENCH_CONVERTER_PY") or next(
    (str(p) for p in [LLAMA_CPP.parent / ".venv-llama-cpp" / "bin" / "python"] if p.exists()), sys.executable)
TOKENS = int(os.environ.get("CONCH_BENCH_GGUF_TOKENS", "64"))
C1_REQUESTS = int(os.environ.get("CONCH_BENCH_GGUF_C1_REQUESTS", "4"))
ROUNDS = int(os.environ.get("CONCH_BENCH_GGUF_ROUNDS", "3"))
STARTS = int(os.environ.get("CONCH_BENCH_GGUF_STARTS", "3"))
SETTLE_S = float(os.environ.get("CONCH_BENCH_GGUF_SETTLE_S", "10"))
RUNS = (("c1", C1_REQUESTS, 1), ("c16", 16, 16))       # (kind, requests, at once)
SLOTS, SLOT_TOKENS = 16, 256                 # llama-server's: one slot per c16 request, a short prompt + 64 new
FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile")
TOKENIZER_IDS = dict(bos_token_id=1, eos_token_id=2)          # SmolLM2's <|im_start|>, <|im_end|>


def _llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
                       rope_theta=500000.0, max_position_embeddings=131072, rms_norm_eps=1e-5,
                       rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                       **TOKENIZER_IDS)


def _qwen3_config():
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                       rope_theta=1000000.0, max_position_embeddings=40960, rms_norm_eps=1e-6, **TOKENIZER_IDS)


def _phi3_config():
    """Phi-4-mini's shape: fused qkv and gate_up, 3/4 of each head rotated (its longrope left out: the rotary
    table's values do not change a step's work, and both servers serve its original 4,096-token context)."""
    from transformers import Phi3Config

    return Phi3Config(vocab_size=200064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                      num_attention_heads=24, num_key_value_heads=8, tie_word_embeddings=True, pad_token_id=199999,
                      max_position_embeddings=4096, rms_norm_eps=1e-5, rope_parameters=dict(
                          rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.75), **TOKENIZER_IDS)


# part -> (its files' stem, its transformers config)
CONFIGS: dict[str, tuple[str, Callable]] = {"llama": ("llama-3.2-1b-random", _llama_config),
                                            "qwen3": ("qwen3-1.7b-random", _qwen3_config),
                                            "phi3": ("phi-4-mini-random", _phi3_config)}


def _converter() -> Path | None:
    found = sorted(LLAMA_CPP.glob("llama_cpp_python-*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    return found[-1] if found else None


def _hf_folder(stem: str, config: Callable) -> Path:
    """The random-weights model in bfloat16 (safetensors) with SmolLM2's tokenizer, saved once."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from conch.engine.weights import ensure_smollm2

    folder = CACHE / stem
    if (folder / "config.json").exists():
        return folder
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config(), dtype=torch.bfloat16)
    model.save_pretrained(folder.with_suffix(".tmp"))
    del model
    AutoTokenizer.from_pretrained(ensure_smollm2()).save_pretrained(folder.with_suffix(".tmp"))
    if stem.startswith("phi"):               # the converter's Phi-3 reads a GPT-2 style vocabulary as Phi-4's
        settings = folder.with_suffix(".tmp") / "tokenizer_config.json"
        settings.write_text(json.dumps({**json.loads(settings.read_text()), "tokenizer_class": "GPT2Tokenizer"}))
    folder.with_suffix(".tmp").rename(folder)
    return folder


def _gguf(stem: str, config: Callable, qtype: str) -> Path:
    """CACHE/stem-qtype.gguf, converted (f16) and quantized by llama.cpp's own tools unless present."""
    out = CACHE / f"{stem}-{qtype.lower()}.gguf"
    if out.exists():
        return out
    f16 = CACHE / f"{stem}-f16.gguf"
    if not f16.exists():
        start = time.perf_counter()
        subprocess.run([CONVERTER_PY, str(_converter()), str(_hf_folder(stem, config)), "--outtype", "f16",
                        "--outfile", f"{f16}.tmp"], check=True, capture_output=True)
        Path(f"{f16}.tmp").rename(f16)
        print(f"{f16.name}: converted in {time.perf_counter() - start:.0f} s", flush=True)
    start = time.perf_counter()
    subprocess.run([str(QUANTIZE), str(f16), f"{out}.tmp", qtype, "2"], check=True, capture_output=True)
    Path(f"{out}.tmp").rename(out)
    print(f"{out.name}: quantized in {time.perf_counter() - start:.0f} s", flush=True)
    return out


@dataclass
class FileFacts:
    size: int                # bytes of the file
    step_bytes: int          # bytes of the matrices one decode step reads
    kv_per_token: int        # bytes of f16 K and V one token holds over all layers


def _facts(path: Path) -> FileFacts:
    from gguf import GGUFReader

    reader = GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    head = "output.weight" if "output.weight" in tensors else "token_embd.weight"
    step = sum(int(t.n_bytes) for name, t in tensors.items()
               if (name.startswith("blk.") and len(t.shape) >= 2) or name == head)
    arch = reader.fields["general.architecture"].contents()

    def value(key: str) -> int:
        return int(reader.fields[f"{arch}.{key}"].contents())

    kv_dim = value("attention.head_count_kv") * (value("attention.key_length") if
                                                 f"{arch}.attention.key_length" in reader.fields else
                                                 value("embedding_length") // value("attention.head_count"))
    return FileFacts(path.stat().st_size, step, value("block_count") * kv_dim * 2 * 2)


def bandwidth(gib: int = 2, tries: int = 5) -> float:
    """A plain read's bytes/s: torch summing a `gib` GiB float32 tensor on 2 threads, the best of `tries`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.ones(gib * 2**28)
        x.sum()
        best = min(_timed(x.sum) for _ in range(tries))
        return x.numel() * x.element_size() / best
    finally:
        torch.set_num_threads(threads)


def _timed(fn: Callable) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_flags() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    have = next((line.split(":", 1)[1].split() for line in out.splitlines() if line.startswith("Flags")), [])
    return " ".join(f"{flag}{'+' if flag in have else '-'}" for flag in FLAGS)


def rss(pid: int) -> int:
    """VmRSS in bytes of `pid` and its descendants."""
    import psutil

    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    return sum(p.memory_info().rss for p in procs)


async def _one(client, prompt: str, max_tokens: int, model: str = "m") -> int:
    """One streamed greedy chat; the completion tokens its usage counts (its content chunks without one)."""
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
        stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks, usage = 0, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
    return usage if usage is not None else chunks


async def decode(url: str, requests: int, concurrency: int, max_tokens: int = TOKENS) -> float:
    """Tokens/s of `requests` chats of `max_tokens` each, `concurrency` at a time (wall clock over all)."""
    sem = asyncio.Semaphore(concurrency)
    async with _client(url) as client:
        async def one(i: int) -> int:
            async with sem:
                return await _one(client, CHAT[i % len(CHAT)], max_tokens)

        start = time.perf_counter()
        tokens = await asyncio.gather(*[one(i) for i in range(requests)])
        return sum(tokens) / (time.perf_counter() - start)


def _loaded(start: Callable[[Path], Server], path: Path) -> tuple[Server, float]:
    """The server `start` starts on `path` and the seconds from its start until it answered a 1-token chat."""
    began = time.perf_counter()
    server = start(path)
    asyncio.run(decode(server.url, 1, 1, max_tokens=1))
    return server, time.perf_counter() - began


def measure(start: Callable[[Path], Server], path: Path) -> dict[str, float]:
    """load s, warm-up, c1 and c16 tokens/s, then the RSS, of the server `start` starts on `path`; stopped after."""
    server, load = _loaded(start, path)
    try:
        return _figures(server, load, _rounds({"one": server}, 1)["one"])
    finally:
        stop(server)


def measure_pair(path: Path) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """llama-server and Conch on `path`, both up at once: each one's load (the median of STARTS starts, the two
    servers' alternated, each start with the other stopped but for the last: Conch's last while llama-server
    idles), warm-up, then ROUNDS rounds of c1 and c16 runs, the two servers' runs alternated (which goes first
    alternates too), so a minute when the host's memory is slower weighs on both; then each one's RSS.
    Returns each server's medians over the rounds and the medians of the rounds' Conch / llama-server ratios."""
    loads: dict[str, list[float]] = {"llama": [], "conch": []}
    for _ in range(STARTS - 1):
        for name, start in (("llama", start_llama), ("conch", start_conch)):
            server, load = _loaded(start, path)
            stop(server)
            loads[name].append(load)
    llama, llama_load = _loaded(start_llama, path)
    try:
        conch, conch_load = _loaded(start_conch, path)
        try:
            runs = _rounds({"llama": llama, "conch": conch}, ROUNDS)
            ratios = {kind: statistics.median(ours / theirs for ours, theirs in
                                              zip(runs["conch"][kind], runs["llama"][kind], strict=True))
                      for kind, _, _ in RUNS}
            load = {name: statistics.median(v + [last]) for (name, v), last in
                    zip(loads.items(), (llama_load, conch_load), strict=True)}
            print(f"  {path.name}: starts, llama-server {_seconds(loads['llama'] + [llama_load])}, Conch "
                  f"{_seconds(loads['conch'] + [conch_load])}", flush=True)
            return (_figures(llama, load["llama"], runs["llama"]), _figures(conch, load["conch"], runs["conch"]),
                    ratios)
        finally:
            stop(conch)
    finally:
        stop(llama)


def _seconds(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values) + " s"


def _rounds(servers: dict[str, Server], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Each server's tokens/s of each of RUNS, `rounds` times, after a warm-up each: within a round, each run
    of every server in turn; which server goes first alternates by round."""
    time.sleep(SETTLE_S)
    for server in servers.values():
        asyncio.run(decode(server.url, 16, 16, max_tokens=4))
    runs: dict[str, dict[str, list[float]]] = {name: {kind: [] for kind, _, _ in RUNS} for name in servers}
    for i in range(rounds):
        order = list(servers) if i % 2 == 0 else list(reversed(servers))
        for kind, requests, concurrency in RUNS:
            for name in order:
                runs[name][kind].append(asyncio.run(decode(servers[name].url, requests, concurrency)))
    return runs


def _figures(server: Server, load: float, runs: dict[str, list[float]]) -> dict[str, float]:
    """load s, each run's median tokens/s, then the server's RSS."""
    return {"load": load, **{kind: statistics.median(v) for kind, v in runs.items()}, "rss": rss(server.process.pid)}


# A server started as a user's shell starts it: its modules' bytecode cached after the first start (this machine's
# environment sets PYTHONDONTWRITEBYTECODE, which would have each start compile Conch's sources again: ~0.3 s)
SERVER_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": ""}


def start_conch(path: Path) -> Server:
    """`conch serve --model m=PATH` with its defaults (threads: every core; kv_cache_mb 2048)."""
    log_dir = CACHE / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    return start_server(["--model", f"m={path}"], log_dir, timeout=900, env=SERVER_ENV)


LLAMA_ARGS: list[str] = []        # ["--no-repack"] when llama-server crashes at its first product here (_probe)


def start_llama(path: Path) -> Server:
    return _llama_server(SLOTS, SLOT_TOKENS, path, *LLAMA_ARGS)


def _probe(path: Path) -> None:
    """llama-server on `path` answering one request, before any timing; if it crashes, every measured start
    goes without weight repacking: its AMX repacked product segfaults at the first product on some AMX
    machines (llama.cpp issue 20824, no fix), and --no-repack keeps the weights in the file's blocks."""
    try:
        stop(_loaded(start_llama, path)[0])
    except RuntimeError as exc:
        if "exited with -11" not in str(exc):
            raise
        LLAMA_ARGS.append("--no-repack")
        print("llama-server crashed at its first product (SIGSEGV, llama.cpp issue 20824): measured with "
              "--no-repack", flush=True)


def _print_run(label: str, server: str, f: dict[str, float]) -> None:
    print(f"{label:22} {server:12} load {f['load']:6.1f} s  c1 {f['c1']:6.2f} tok/s  c16 {f['c16']:6.2f} tok/s  "
          f"RSS {f['rss'] / 2**20:7.0f} MiB", flush=True)


def _model_part(part: str, types: list[str]) -> list[tuple[str, FileFacts, dict, dict, dict]]:
    stem, config = CONFIGS[part]
    rows = []
    for qtype in types:
        path = _gguf(stem, config, qtype)
        label = f"{part} {qtype}"
        llama, conch, ratios = measure_pair(path)
        _print_run(label, "llama-server", llama)
        _print_run(label, "conch", conch)
        rows.append((label, _facts(path), llama, conch, ratios))
    return rows


def _goals(rows: list[tuple[str, FileFacts, dict, dict, dict]], bw: float) -> None:
    print(f"\nread bandwidth {bw / 1e9:.2f} GB/s (torch sum, 2 threads, best of 5); KV budgets: llama-server "
          f"{SLOTS * SLOT_TOKENS} cells (f16, at start), Conch kv_cache_mb 2048 (a bound, grown as needed)")
    print(f"  {'file':15} {'MiB':>6} {'step MiB':>8} {'floor':>6} {'c1 C/L':>7} {'c16 C/L':>7} {'C1/floor':>8} "
          f"{'RSS C':>6} {'RSS L':>6} {'load C/L':>8} {'load C':>6} {'load L':>6}")
    for label, facts, llama, conch, ratios in rows:
        floor = bw / facts.step_bytes
        kv_llama = SLOTS * SLOT_TOKENS * facts.kv_per_token
        print(f"  {label:15} {facts.size / 2**20:6.0f} {facts.step_bytes / 2**20:8.0f} {floor:6.2f} "
              f"{ratios['c1']:6.2f}x {ratios['c16']:6.2f}x {conch['c1'] / floor:7.2f}x "
              f"{conch['rss'] / (facts.size + 2048 * 2**20):5.2f}x {llama['rss'] / (facts.size + kv_llama):5.2f}x "
              f"{conch['load'] / llama['load']:7.2f}x {conch['load']:6.1f} {llama['load']:6.1f}")
    print("  goals: c1 C/L >= 1.0x, c16 C/L >= 2x, C1/floor >= 0.67x, RSS C (Conch RSS / (file + its KV budget)) "
          "<= 1.2x, load C/L <= 2x. floor: tokens/s = bandwidth / step bytes; RSS L: llama-server's, the same")


def _default_part() -> None:
    from conch.engine.weights import ensure_smollm2
    from conch.engine.weights.smollm2 import gguf_path

    runs = {"Q4_1 GGUF": measure(start_conch, gguf_path()),
            "bf16 folder": measure(start_conch, ensure_smollm2())}
    for name, f in runs.items():
        _print_run(f"smollm2 {name}", "conch", f)
    gguf, folder = runs["Q4_1 GGUF"], runs["bf16 folder"]
    print(f"  SmolLM2-135M Conch, packaged Q4_1 GGUF / bf16 folder: c1 {gguf['c1'] / folder['c1']:.2f}x  "
          f"c16 {gguf['c16'] / folder['c16']:.2f}x  load {gguf['load'] / folder['load']:.2f}x  "
          f"RSS {gguf['rss'] / folder['rss']:.2f}x", flush=True)


def _missing() -> str | None:
    if LLAMA_SERVER.exists() and QUANTIZE.exists() and _converter() is not None:
        return None
    return f"{LLAMA_SERVER}, {QUANTIZE} or the converter is missing under {LLAMA_CPP}: run `make llama-cpp`"


def _native() -> None:
    """Conch's native kernels built (or found cached) before any Conch server starts: out of its load time."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "conch.engine.backends.conch.native"], check=True, capture_output=True)
    print(f"Conch's native kernels ready in {time.perf_counter() - start:.1f} s (not in any load time)", flush=True)


def main() -> None:
    parts = os.environ.get("CONCH_BENCH_GGUF_PARTS", "llama,qwen3,default").split(",")
    types = os.environ.get("CONCH_BENCH_GGUF_TYPES", "Q4_K_M,Q8_0").split(",")
    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} cores; {TOKENS} tokens a request", flush=True)
    _native()
    models = [p for p in parts if p in CONFIGS]
    if models and (why := _missing()):
        print(f"{','.join(models)}: {why}; left out", flush=True)
        models = []
    CACHE.mkdir(parents=True, exist_ok=True)
    for part in models:                        # every file built before any timing
        for qtype in types:
            _gguf(*CONFIGS[part], qtype)
    if models:
        _probe(_gguf(*CONFIGS[models[0]], types[0]))
    bw = bandwidth()
    rows = [row for part in models for row in _model_part(part, types)]
    if rows:
        _goals(rows, max(bw, bandwidth()))
    if "default" in parts:
        _default_part()


if __name__ == "__main__":
    main()
