"""An engine stand-in for the shared conversation path: `get` serves one model whose tokenizer renders a small
Jinja chat template, `prepare` records what it was given (the path under test never reaches a backend)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jinja2

from conch.engine.backend import Capabilities
from conch.engine.errors import ModelNotFound
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest

WITH_TOOLS = ("{% if tools %}[tools:{% for t in tools %} {{ t.function.name }}{% endfor %}]\n{% endif %}"
              "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
              "{% if add_generation_prompt %}<assistant>{% endif %}")
WITHOUT_TOOLS = WITH_TOOLS.replace("tools", "extras")    # a template that knows nothing of tools


@dataclass
class TemplateTokenizer:
    chat_template: str = WITH_TOOLS

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict] | None = None,
                            tokenize: bool = False, add_generation_prompt: bool = True,
                            continue_final_message: bool = False) -> str:
        return jinja2.Template(self.chat_template).render(messages=messages, tools=tools,
                                                          add_generation_prompt=add_generation_prompt)


@dataclass
class FakeModel:
    config: ModelConfig
    tokenizer: TemplateTokenizer
    capabilities: Capabilities

    @property
    def backend(self) -> "FakeModel":
        return self

    @property
    def generator(self) -> "FakeModel":
        return self


@dataclass
class FakeEngine:
    model: FakeModel
    prepared: list[tuple[GenerationRequest, str]] = field(default_factory=list)

    def get(self, name: str, version: str | None = None) -> FakeModel:
        if name != self.model.config.name:
            raise ModelNotFound(f"The model '{name}' does not exist", param="model")
        return self.model

    async def prepare(self, request: GenerationRequest, prompt_param: str = "prompt") -> GenerationRequest:
        self.prepared.append((request, prompt_param))
        return request


def fake_engine(template: str = WITH_TOOLS, **capabilities: bool) -> FakeEngine:
    return FakeEngine(FakeModel(ModelConfig(name="m", backend="fake"), TemplateTokenizer(template),
                                Capabilities(grammar=True, **capabilities)))
