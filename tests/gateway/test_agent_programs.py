"""Claude Code and Codex CLI, unmodified, from the npm registry, against a real `conch serve` on loopback.

The served model is a 32k-context Llama built here from a transformers config with SmolLM2's tokenizer, `<think>`
and `</think>` added and a Qwen3-style thinking chat template (builtin:tiny-think's; no hub download): the
agents' prompts (10-22k tokens) fit. Its weights are random but shaped so the real engine answers briefly: every
layer's output projections are zero, so the next token depends only on the current one (a bigram model), and
the language-model head maps each token of CHAIN to the next and every other token to end-of-turn. CHAIN starts
at the thinking generation prompt's last token ("<think>\n"), so with thinking on the model writes THOUGHT,
`</think>`, a blank line and REPLY; with thinking off the prompt already ends with the closed empty block, whose
last token ("\n\n") is CHAIN's too, so the model writes REPLY alone. A random model's free text would run to
the context's end on every turn.

Each program runs one non-interactive session (`claude -p`, `codex exec`: "List the files in this folder") in a
scratch folder with telemetry off by environment and every proxy pointed at a closed loopback port, so nothing
leaves the machine, and goes through its tool loop: the program's shell tool runs `ls`, its output comes back
in the next request, and the answer names a listed file. A bigram model decides nothing, so a loopback proxy
between program and server (forcing_proxy.py, test code) adds the fields that steer the real engine's
constrained decoding: turn 1 a forced call of the shell tool whose schema admits `ls` only, turn 2 a JSON
answer whose schema admits only {"file": NAME} for the names the tool's output (as the program sent it)
listed. Both sessions end with exit 0; every request is answered 200 and streamed (the server's log and the
proxy's record), Codex's also over the Responses WebSocket (`supports_websockets`). Thinking is on, as the
programs ask by default (Claude Code's `thinking`, Codex's `reasoning` with summary "auto", its encrypted
reasoning sent back on turn 2): each session's output shows the model's reasoning beside the answer.

`make test-agents` installs the pinned versions (AGENT_VERSIONS) into .agents-npm/ and runs this module."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_server, write_repository
from tests.gateway.forcing_proxy import Exchange, ForcingProxy, listed_names, one_of

pytestmark = pytest.mark.slow

AGENT_VERSIONS = {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.171.0"}
NPM_DIR = Path(__file__).resolve().parents[2] / ".agents-npm"
MODEL = "agent-32k"
CONTEXT = 32768
REPLY = "Hi there"
THOUGHT = "Plan"
LISTING = "ls"          # the command each program's shell tool is forced to run
QUIET = {
    "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_BUG_COMMAND": "1", "DO_NOT_TRACK": "1",
    "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
}


def _bin(name: str) -> Path:
    path = NPM_DIR / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in {NPM_DIR} (make test-agents installs {AGENT_VERSIONS})")
    return path


def build_bigram_model(target: Path) -> None:
    """The model described above, saved to `target` with its tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conch.engine.weights.smollm2 import ensure_smollm2
    from conch.engine.weights.tiny_think import ADDED_TOKENS, QWEN3_STYLE_TEMPLATE

    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2())
    tokenizer.add_tokens(ADDED_TOKENS, special_tokens=False)
    tokenizer.chat_template = QWEN3_STYLE_TEMPLATE
    hidden = 64
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32)  # type: ignore[arg-type]
    ends = [tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                           add_generation_prompt=True, enable_thinking=on),
                             add_special_tokens=False)[-1] for on in (True, False)]
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    chain = [ends[0], *encode(THOUGHT), *encode("</think>"), ends[1], *encode(REPLY)]
    assert len(set(chain)) == len(chain) and len(chain) < hidden, chain
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, 0] = 1.0                  # every token: dimension 0 ...
        model.lm_head.weight.zero_()
        model.lm_head.weight[tokenizer.eos_token_id, 0] = 10.0      # ... is followed by end-of-turn
        for k, (token, after) in enumerate(zip(chain, chain[1:], strict=False), start=1):
            model.model.embed_tokens.weight[token] = 0.0
            model.model.embed_tokens.weight[token, k] = 1.0          # a chain token: its own dimension k ...
            model.lm_head.weight[after, k] = 10.0                   # ... is followed by the next one
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("agents")
    weights = root / "weights"
    build_bigram_model(weights)
    repo = write_repository(root / "repo", {MODEL: {"weights": str(weights), "dtype": "float32",
                                                    "context_length": CONTEXT, "max_batch_size": 4}})
    server = start_server(["--model-repository", str(repo), "--model-alias", f"claude-*={MODEL}",
                           "--model-alias", f"gpt-*={MODEL}"], root, timeout=600)
    yield server
    server.stop()


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {"PATH": os.environ["PATH"], "HOME": str(cwd.parent / "home"), "TERM": "dumb", **QUIET, **env}
    (cwd.parent / "home").mkdir(exist_ok=True)
    return subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)


def _answered(server, path: str) -> list[str]:
    """The status of every request to `path` in the server's log."""
    return re.findall(rf'"POST {re.escape(path)}[^"]*" (\d+)', server.log.read_text())


SCRATCH_FILES = ("notes.txt", "main.py")


def _scratch(tmp_path: Path) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name in SCRATCH_FILES:
        (scratch / name).write_text(name)
    return scratch


def _events(stdout: str) -> list[dict]:
    """A program's JSON-lines stdout (`--output-format stream-json`, `--json`)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _streamed(proxy: ForcingProxy, path: str) -> list[Exchange]:
    exchanges = [e for e in proxy.exchanges if e.path == path]
    assert exchanges and all(e.status == 200 and e.content_type.startswith("text/event-stream") for e in exchanges), \
        [(e.status, e.content_type) for e in exchanges]
    return exchanges


# Claude Code: its `Bash` tool, forced to run `ls`; after the tool's result, an answer naming what it listed.
def force_claude(path: str, body: dict[str, Any]) -> dict[str, Any]:
    tools = {tool.get("name"): tool for tool in body.get("tools", [])}
    if path != "/v1/messages" or "Bash" not in tools:
        return body
    listing = _claude_tool_result(body)
    if listing is None:
        body["tool_choice"] = {"type": "tool", "name": "Bash"}
        tools["Bash"]["input_schema"] = only_listing("command")
    else:
        body["tool_choice"] = {"type": "none"}
        body["output_config"] = {**body.get("output_config", {}),
                                 "format": {"type": "json_schema", "schema": one_of(listed_names(listing))}}
    return body


def only_listing(key: str) -> dict[str, Any]:
    """A tool's parameters that admit one call: {key: LISTING}."""
    return {"type": "object", "properties": {key: {"type": "string", "enum": [LISTING]}}, "required": [key],
            "additionalProperties": False}



def _claude_tool_result(body: dict[str, Any]) -> str | None:
    last = body["messages"][-1]["content"]
    for block in last if isinstance(last, list) else ():
        if block.get("type") == "tool_result":
            content = block.get("content")
            return content if isinstance(content, str) else "\n".join(c.get("text", "") for c in content or ())
    return None


def test_claude_code_lists_files_through_its_tool_loop(server, tmp_path):
    claude = _bin("claude")
    with ForcingProxy(server.url, force_claude) as proxy:
        done = _run([str(claude), "-p", "List the files in this folder", "--max-turns", "3", "--output-format",
                     "stream-json", "--verbose", "--allowedTools", f"Bash({LISTING})"], _scratch(tmp_path),
                    {"ANTHROPIC_BASE_URL": proxy.url, "ANTHROPIC_API_KEY": "none"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    turns = [e for e in _streamed(proxy, "/v1/messages") if any(t.get("name") == "Bash" for t in e.body["tools"])]
    assert len(turns) == 2, [e.body["messages"][-1] for e in turns]
    listing = _claude_tool_result(turns[1].body)            # the tool ran: its output is the next turn's input
    assert listing is not None and all(name in listing for name in SCRATCH_FILES), turns[1].body["messages"][-1]
    answer = [e["result"] for e in _events(done.stdout) if e["type"] == "result"]
    assert answer and json.loads(answer[-1])["file"] in SCRATCH_FILES, done.stdout[-3000:]   # {"file": NAME}
    assert re.search(r'"type":\s*"(redacted_)?thinking"', done.stdout), done.stdout[-3000:]
    statuses = _answered(server, "/v1/messages")
    assert statuses and set(statuses) == {"200"}, statuses


CODEX_CONFIG = """
model = "gpt-5-codex"
model_provider = "conch"
model_reasoning_summary = "auto"
model_reasoning_effort = "medium"

[model_providers.conch]
name = "conch"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "CONCH_API_KEY"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = {websocket}
"""
CODEX_SHELL = "exec_command"      # 0.171.0's shell tool: {"cmd": "..."}


# Codex: its shell tool, forced to run `ls`; after the call's output, an answer naming what it listed.
def force_codex(path: str, body: dict[str, Any]) -> dict[str, Any]:
    tools = {tool.get("name"): tool for tool in body.get("tools", [])}
    if path != "/v1/responses" or CODEX_SHELL not in tools:
        return body
    listing = _codex_call_output(body)
    if listing is None:
        body["tool_choice"] = {"type": "function", "name": CODEX_SHELL}
        tools[CODEX_SHELL]["parameters"] = only_listing("cmd")
    else:
        body["tool_choice"] = "none"
        body["text"] = {**body.get("text", {}), "format": {"type": "json_schema", "name": "listing",
                                                          "schema": one_of(listed_names(listing)), "strict": True}}
    return body


def _codex_call_output(body: dict[str, Any]) -> str | None:
    outputs = [item for item in body["input"] if item.get("type") == "function_call_output"]
    if not outputs:
        return None
    output = outputs[-1]["output"]
    return output if isinstance(output, str) else "\n".join(part.get("text", "") for part in output)


@pytest.mark.parametrize("websocket", [False, True], ids=["sse", "websocket"])
def test_codex_lists_files_through_its_tool_loop(server, tmp_path, websocket):
    codex = _bin("codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    with ForcingProxy(server.url, force_codex) as proxy:
        (home / "config.toml").write_text(CODEX_CONFIG.format(url=proxy.url, websocket=str(websocket).lower()))
        done = _run([str(codex), "exec", "--json", "--skip-git-repo-check", "List the files in this folder"],
                    _scratch(tmp_path), {"CODEX_HOME": str(home), "CONCH_API_KEY": "none"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    turns = _socket_turns(proxy) if websocket else _streamed(proxy, "/v1/responses")
    assert len(turns) == 2, [e.body["input"][-1] for e in turns]
    listing = _codex_call_output(turns[1].body)
    assert listing is not None and all(name in listing for name in SCRATCH_FILES), turns[1].body["input"][-3:]
    answer = [e["item"]["text"] for e in _events(done.stdout)
              if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"]
    assert answer and json.loads(answer[-1])["file"] in SCRATCH_FILES, done.stdout[-3000:]   # {"file": NAME}
    assert '"reasoning"' in done.stdout and THOUGHT in done.stdout, done.stdout[-3000:]
    statuses = _answered(server, "/v1/responses")
    assert statuses and set(statuses) == {"200"}, statuses


def _socket_turns(proxy: ForcingProxy) -> list[Exchange]:
    """Over a WebSocket: every exchange was one (no HTTP fallback) and ended response.completed; the turns are
    those that generated (Codex warms the socket up first with `generate: false`)."""
    assert proxy.exchanges and all(e.content_type == "websocket" and e.last_event == "response.completed"
                                   for e in proxy.exchanges), [(e.content_type, e.last_event) for e in proxy.exchanges]
    return [e for e in proxy.exchanges if e.body.get("generate") is not False]


def test_npm_versions_are_the_pinned_ones():
    for package, version in AGENT_VERSIONS.items():
        manifest = NPM_DIR / "node_modules" / package / "package.json"
        if not manifest.exists() or shutil.which("node") is None:
            pytest.skip(f"{package} is not installed")
        assert f'"version": "{version}"' in manifest.read_text()
