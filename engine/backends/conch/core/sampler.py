"""Turns a batch's logits into one token per sequence.

Order, per row: penalties -> logit_bias -> min_tokens mask -> grammar mask -> (greedy argmax) | (temperature
-> top-k -> top-p -> min-p -> draw with the sequence's own generator).
Logprobs are those of the model's raw distribution.
Shapes: logits (B, V) float32, B = len(seqs).

Isolation: a row whose own values or grammar matcher make an operation raise ends only its sequence
(Sequence.fail: finish_reason "error" and its own error) and gets None; the others are sampled as if it were
not there. The batched part draws nothing, so when it raises, redoing it row by row to find the culprit leaves
every generator (a seeded request's stream) untouched; the draws are per row.
"""
from __future__ import annotations

import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.types import PositionLogprobs, TokenLogprob

Sampled = tuple[int, PositionLogprobs | None]     # one row's token and (if asked) its logprobs


DEAD_END = "the request's grammar allows no token here (a dead end for this model's vocabulary)"


class Sampler:
    def __init__(self, tokenizer, vocab_size: int) -> None:
        self._tokenizer = tokenizer
        self._vocab = vocab_size

    @torch.inference_mode()
    def sample(self, seqs: list[Sequence], logits: torch.Tensor) -> list[Sampled | None]:
        """One (token, logprobs) per row; None for a row that failed (its sequence is finished with the error)."""
        try:
            adjusted, probs = self._distributions(seqs, logits)
        except Exception:                    # one row's values broke a batched op: find it, row by row
            return [self._sample_alone(seq, logits[row:row + 1]) for row, seq in enumerate(seqs)]
        return self._draw(seqs, logits, adjusted, probs)

    def _sample_alone(self, seq: Sequence, logits: torch.Tensor) -> Sampled | None:
        try:
            return self._draw([seq], logits, *self._distributions([seq], logits))[0]
        except Exception as exc:
            seq.fail(f"sampling failed for this request: {exc}")
            return None

    def _distributions(self, seqs: list[Sequence], logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The adjusted logits (B, V), and the filtered probabilities of the non-greedy rows (S, V) or None."""
        logits = logits.clone()
        self._apply_penalties(seqs, logits)
        self._apply_logit_bias(seqs, logits)
        self._apply_min_tokens(seqs, logits)
        self._apply_grammar(seqs, logits)
        sampled = [row for row, seq in enumerate(seqs) if not seq.params.greedy]
        probs = self._filtered_probs([seqs[r] for r in sampled], logits[sampled]) if sampled else None
        return logits, probs

    def _draw(self, seqs: list[Sequence], raw: torch.Tensor, adjusted: torch.Tensor,
              probs: torch.Tensor | None) -> list[Sampled | None]:
        greedy = adjusted.argmax(dim=-1).tolist()
        want = [s.params.logprobs is not None for s in seqs]
        logprobs = torch.log_softmax(raw, dim=-1) if any(want) else None
        out: list[Sampled | None] = []
        drawn = 0                                # index into probs: the non-greedy rows, in order
        for row, seq in enumerate(seqs):
            drawn += not seq.params.greedy and probs is not None           # probs holds every non-greedy row
            if seq.matcher is not None and bool(torch.isneginf(adjusted[row]).all()):
                seq.fail(DEAD_END, is_request=True)                    # the grammar leaves no token
                out.append(None)
                continue
            try:
                token = greedy[row]
                if not seq.params.greedy and probs is not None:
                    token = int(torch.multinomial(probs[drawn - 1], 1, generator=seq.generator))
                wanted = logprobs[row] if want[row] and logprobs is not None else None     # (V,) raw log-probs
                out.append((token, self._logprobs(seq, wanted, token) if wanted is not None else None))
            except Exception as exc:             # e.g. its probabilities hold inf or NaN
                seq.fail(f"sampling failed for this request: {exc}")
                out.append(None)
        return out

    def _apply_penalties(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        for row, seq in enumerate(seqs):
            p = seq.params
            if p.presence_penalty or p.frequency_penalty:
                if seq.output_ids:
                    ids = torch.tensor(seq.output_ids)
                    counts = torch.zeros(logits.shape[-1]).scatter_add_(0, ids, torch.ones(len(ids)))
                    logits[row] -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).float()
            if p.repetition_penalty != 1.0:
                seen = torch.tensor(sorted(set(seq.prompt_ids) | set(seq.output_ids)))
                vals = logits[row, seen]
                logits[row, seen] = torch.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)

    def _apply_logit_bias(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        for row, seq in enumerate(seqs):
            for token_id, bias in seq.params.logit_bias:
                logits[row, token_id] += bias

    @staticmethod
    def _apply_min_tokens(seqs: list[Sequence], logits: torch.Tensor) -> None:
        """Before min_tokens tokens, no stop token (EOS, stop_token_ids) can be drawn; a grammar that allows
        nothing but EOS any more still ends its sequence."""
        for row, seq in enumerate(seqs):
            if len(seq.output_ids) < seq.params.min_tokens and seq.eos_ids:
                if seq.matcher is None or not seq.matcher.is_finished():
                    logits[row, sorted(seq.eos_ids)] = float("-inf")

    def _apply_grammar(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        rows = [row for row, seq in enumerate(seqs) if seq.matcher is not None]
        if not rows:
            return
        from conch.grammars import allocate_bitmask, apply_bitmask

        bitmask = allocate_bitmask(len(seqs), self._vocab)
        for row in rows:
            seqs[row].matcher.fill_bitmask(bitmask, row)
        kernel = native.load("token_mask")               # apply_bitmask's result without unpacking the bits
        if kernel is not None and logits.device.type == "cpu" and logits.dtype == torch.float32:
            kernel.apply_token_mask(logits, bitmask, torch.tensor(rows, dtype=torch.long))
        else:
            apply_bitmask(logits, bitmask, rows)          # one masked op over the batch

    @staticmethod
    def _filtered_probs(seqs: list[Sequence], logits: torch.Tensor) -> torch.Tensor:
        temps = torch.tensor([s.params.temperature for s in seqs]).unsqueeze(-1)
        logits = logits / temps
        top_k = [s.params.top_k for s in seqs]
        top_p = [s.params.top_p for s in seqs]
        if any(k > 0 for k in top_k) or any(p < 1.0 for p in top_p):
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            ranks = torch.arange(logits.shape[-1]).unsqueeze(0)
            k = torch.tensor([k if 0 < k < logits.shape[-1] else logits.shape[-1] for k in top_k]).unsqueeze(-1)
            drop = ranks >= k
            cum = sorted_logits.softmax(-1).cumsum(-1)
            drop |= (cum - sorted_logits.softmax(-1)) > torch.tensor(top_p).unsqueeze(-1)
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            logits = torch.empty_like(logits).scatter_(-1, order, sorted_logits)
        probs = logits.softmax(-1)
        min_p = torch.tensor([s.params.min_p for s in seqs]).unsqueeze(-1)
        if bool((min_p > 0).any()):
            probs = probs.masked_fill(probs < min_p * probs.max(-1, keepdim=True).values, 0.0)
        return probs

    def _logprobs(self, seq: Sequence, row: torch.Tensor, token: int) -> PositionLogprobs:
        k = seq.params.logprobs or 0
        chosen = TokenLogprob(token, self._piece(token), float(row[token]))
        if not k:
            return PositionLogprobs(chosen)
        values, ids = row.topk(k)
        top = tuple(TokenLogprob(int(i), self._piece(int(i)), float(v)) for v, i in zip(values, ids, strict=True))
        return PositionLogprobs(chosen, top)

    def _piece(self, token_id: int) -> str:
        return self._tokenizer.decode([token_id])
