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

Each program runs one non-interactive session (`claude -p`, `codex exec`) in a scratch folder with telemetry
off by environment and every proxy pointed at a closed loopback port, so nothing leaves the machine. Both end
with exit 0 and print REPLY; the server's log shows every /v1/messages and /v1/responses request answered 200.
Thinking is on, as the programs ask by default (Claude Code's `thinking` with a budget and `display: omitted`;
Codex's `reasoning` with effort and summary "auto", its encrypted reasoning sent back on later turns): each
session's streamed output shows the model's reasoning (a thinking block, a reasoning item) beside REPLY.

`make test-agents` installs the pinned versions (AGENT_VERSIONS) into .agents-npm/ and runs this module."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import start_server, write_repository

pytestmark = pytest.mark.slow

AGENT_VERSIONS = {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.171.0"}
NPM_DIR = Path(__file__).resolve().parents[2] / ".agents-npm"
MODEL = "agent-32k"
CONTEXT = 32768
REPLY = "Hi there"
THOUGHT = "Plan"
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


def _scratch(tmp_path: Path) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name in ("notes.txt", "main.py"):
        (scratch / name).write_text(name)
    return scratch


def test_claude_code_runs_a_session(server, tmp_path):
    claude = _bin("claude")
    done = _run([str(claude), "-p", "List the files in this folder", "--max-turns", "3", "--output-format",
                 "stream-json", "--verbose"], _scratch(tmp_path),
                {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "none"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert REPLY in done.stdout
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
"""


def test_codex_runs_a_session(server, tmp_path):
    codex = _bin("codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(CODEX_CONFIG.format(url=server.url))
    done = _run([str(codex), "exec", "--json", "--skip-git-repo-check", "List the files in this folder"],
                _scratch(tmp_path), {"CODEX_HOME": str(home), "CONCH_API_KEY": "none"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert REPLY in done.stdout
    assert '"reasoning"' in done.stdout and THOUGHT in done.stdout, done.stdout[-3000:]
    statuses = _answered(server, "/v1/responses")
    assert statuses and set(statuses) == {"200"}, statuses


def test_npm_versions_are_the_pinned_ones():
    for package, version in AGENT_VERSIONS.items():
        manifest = NPM_DIR / "node_modules" / package / "package.json"
        if not manifest.exists() or shutil.which("node") is None:
            pytest.skip(f"{package} is not installed")
        assert f'"version": "{version}"' in manifest.read_text()
