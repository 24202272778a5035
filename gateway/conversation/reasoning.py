"""A conversation's thinking request, the same for every face (Messages `thinking`, Responses
`reasoning.effort`, chat `reasoning_effort`), turned into the model's reasoning switch and an engine
ReasoningControl.

Meaning (docs/reasoning.md): `enabled` None keeps the model's own default; False renders the template with its
switch off (Qwen3's `enable_thinking`) and has the engine close any thinking at once (budget 0); True with
`budget` caps the thinking tokens (past it the engine forces the end text, then the answer). A model whose
chat template writes no reasoning answers without thinking whatever is asked (its reasoning is empty).
Efforts map to budgets: minimal and none turn thinking off; low, medium and high cap it at `EFFORT_BUDGETS`,
and at that share (`EFFORT_SHARES`) of the request's max_tokens when it names one, so thinking never eats the
whole answer's room; xhigh leaves it unbounded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conch.agents.reasoning import Phase, ReasoningFormat
from conch.engine import ReasoningControl

EFFORT_BUDGETS: dict[str, int | None] = {"low": 1024, "medium": 4096, "high": 16384, "xhigh": None}
EFFORT_SHARES: dict[str, float] = {"low": 0.25, "medium": 0.5, "high": 0.75, "xhigh": 1.0}
EFFORTS = ("none", "minimal", *EFFORT_BUDGETS)


@dataclass(frozen=True)
class Thinking:
    enabled: bool | None = None      # None: the model's default
    budget: int | None = None        # most thinking tokens (None: unbounded)
    effort: str | None = None        # the effort asked, passed to templates that read one (gpt-oss)

    @classmethod
    def from_effort(cls, effort: str | None, max_tokens: int | None = None) -> "Thinking":
        if effort is None:
            return cls()
        if effort in ("none", "minimal"):
            return cls(enabled=False, effort=effort)
        budget = EFFORT_BUDGETS[effort]
        if max_tokens is not None and effort != "xhigh":
            share = int(max_tokens * EFFORT_SHARES[effort])
            budget = share if budget is None else min(budget, share)
        return cls(enabled=True, budget=budget, effort=effort)


def template_kwargs(fmt: ReasoningFormat | None, thinking: Thinking) -> dict[str, Any]:
    """The chat-template variables that carry the thinking request."""
    out: dict[str, Any] = {}
    if fmt is not None and thinking.enabled is not None:
        out.update(fmt.template_switch(thinking.enabled))
    if thinking.effort is not None and thinking.effort in EFFORT_BUDGETS:
        out["reasoning_effort"] = thinking.effort
    return out


def reasoning_control(fmt: ReasoningFormat, tokenizer, phase: Phase, thinking: Thinking) -> ReasoningControl:
    """The engine's view of the reply's thinking: the format's texts as the model's token ids."""
    def ids(text: str) -> tuple[int, ...]:
        return tuple(tokenizer.encode(text, add_special_tokens=False))

    budget = 0 if thinking.enabled is False else thinking.budget
    return ReasoningControl(ids(fmt.start), ids(fmt.end), ids(fmt.forced_end), int(phase), budget)
