"""A Gradio chat in front of Conch's Triton face: each turn is one POST /v2/models/{m}/generate_stream
(Triton's generate extension), its `text_output` events streamed into the chat as they arrive
(`--no-stream`: one POST /v2/models/{m}/generate per turn).

    pip install 'conch[demo]'              # gradio, an optional extra
    make run                               # or: conch serve  (SmolLM2 on :8000)
    python examples/gradio_demo.py --url http://127.0.0.1:8000 --model smollm2-135m-instruct

The generate extension takes a raw prompt (`text_input`), so the demo renders the conversation itself in
ChatML, the template of the default model (SmolLM2); pass --no-chatml for a model that wants plain text.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Iterator

import httpx

try:
    import gradio as gr
except ImportError:                      # gradio is an optional extra, not a dependency of Conch
    gr = None


def chatml(history: list, message: str, system: str | None) -> str:
    turns = ([{"role": "system", "content": system}] if system else []) + _messages(history) + \
            [{"role": "user", "content": message}]
    text = "".join(f"<|im_start|>{t['role']}\n{_text(t['content'])}<|im_end|>\n" for t in turns)
    return text + "<|im_start|>assistant\n"


def _messages(history: list) -> list[dict]:
    """Gradio's history as messages: already {"role", "content"} dicts, or (user, assistant) pairs."""
    out = []
    for item in history:
        if isinstance(item, dict):
            out.append(item)
        else:
            pair = zip(("user", "assistant"), item, strict=True)      # Gradio's tuples: (user, assistant)
            out += [{"role": r, "content": c} for r, c in pair if c is not None]
    return out


def _text(content) -> str:
    """Gradio's message content: a string, or a list of parts (text parts kept)."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def generate_stream(url: str, model: str, prompt: str, parameters: dict) -> Iterator[str]:
    """The text of each generate_stream event, in order; an error event raises."""
    body = {"text_input": prompt, "parameters": parameters}
    with httpx.stream("POST", f"{url}/v2/models/{model}/generate_stream", json=body, timeout=300) as r:
        if r.status_code != 200:
            r.read()
            raise RuntimeError(f"{r.status_code}: {r.json().get('error', r.text)}")
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                raise RuntimeError(event["error"])
            yield event.get("text_output", "")


def generate(url: str, model: str, prompt: str, parameters: dict) -> Iterator[str]:
    """The whole reply at once, from POST /v2/models/{m}/generate (the prompt left out of text_output)."""
    body = {"text_input": prompt, "exclude_input_in_output": True, "parameters": parameters}
    r = httpx.post(f"{url}/v2/models/{model}/generate", json=body, timeout=300)
    if r.status_code != 200:
        raise RuntimeError(f"{r.status_code}: {r.json().get('error', r.text)}")
    yield r.json()["text_output"]


def build(args: argparse.Namespace):
    call = generate_stream if args.stream else generate

    def respond(message: str, history: list[dict], temperature: float, max_tokens: int) -> Iterator[str]:
        prompt = chatml(history, message, args.system) if args.chatml else message
        reply = ""
        for piece in call(args.url, args.model, prompt,
                                     {"temperature": temperature, "max_tokens": int(max_tokens)}):
            reply += piece
            yield reply

    return gr.ChatInterface(
        respond, title=f"Conch: {args.model} over /v2 generate_stream",
        additional_inputs=[gr.Slider(0.0, 2.0, value=0.7, step=0.1, label="temperature"),
                           gr.Slider(1, 1024, value=256, step=1, label="max_tokens")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--system", default=None, help="a system message for every conversation")
    parser.add_argument("--no-chatml", dest="chatml", action="store_false", help="send the message as it is")
    parser.add_argument("--no-stream", dest="stream", action="store_false",
                        help="one POST .../generate per turn instead of generate_stream")
    parser.add_argument("--port", type=int, default=7860)
    args = parser.parse_args()
    if gr is None:
        sys.exit("this demo needs gradio: pip install 'conch[demo]'")
    build(args).launch(server_port=args.port)


if __name__ == "__main__":
    main()
