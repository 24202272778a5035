"""Prompt logprobs (vLLM's `prompt_logprobs`; what /v1/completions' echo with logprobs returns, and how
evaluation harnesses score log-likelihood): each prompt token's log-probability given the tokens before it.

Kept apart from the batched prefill, whose logits keep only the last position: one extra forward pass over
the whole prompt, without KV cache, only for the requests that ask. It runs on the engine thread, between two
steps (backend.py's `_on_engine_thread`: every torch call of the model does). Shapes: ids (1, P), logits (P - 1, V).
"""
from __future__ import annotations

import torch

from conch.engine.types import GenerationDelta, GenerationRequest, PositionLogprobs, RequestStatus, TokenLogprob, Usage


@torch.inference_mode()
def prompt_logprobs(model: torch.nn.Module, tokenizer, prompt_ids: list[int], k: int) -> tuple[PositionLogprobs, ...]:
    """P - 1 entries: position i scores prompt_ids[i] (i = 1..P-1), with the k most likely tokens there."""
    if len(prompt_ids) < 2:
        return ()
    ids = torch.tensor(prompt_ids).unsqueeze(0)
    logits = model(input_ids=ids, use_cache=False).logits[0, :-1].float()   # (P - 1, V): predicts ids[1:]
    rows = torch.log_softmax(logits, dim=-1)
    targets = prompt_ids[1:]
    chosen = rows.gather(-1, torch.tensor(targets).unsqueeze(-1)).squeeze(-1).tolist()
    top_values, top_ids = rows.topk(k, dim=-1) if k else (None, None)
    out = []
    for i, token in enumerate(targets):
        top = () if top_values is None or top_ids is None else tuple(
            TokenLogprob(int(t), tokenizer.decode([int(t)]), float(v))
            for v, t in zip(top_values[i], top_ids[i], strict=True))
        out.append(PositionLogprobs(TokenLogprob(token, tokenizer.decode([token]), chosen[i]), top))
    return tuple(out)


def prompt_deltas(request: GenerationRequest, scored: tuple[PositionLogprobs, ...]) -> list[GenerationDelta]:
    """Each choice's first delta, carrying the prompt's logprobs; with max_tokens 0 also its last."""
    score_only = request.params.max_tokens == 0
    prompt_tokens = len(request.prompt_token_ids or ())
    return [GenerationDelta(request.id, i, prompt_logprobs=scored,
                            status=RequestStatus.FINISHED_LENGTH if score_only else RequestStatus.RUNNING,
                            usage=Usage(prompt_tokens, 0) if score_only else None)
            for i in range(request.params.n)]
