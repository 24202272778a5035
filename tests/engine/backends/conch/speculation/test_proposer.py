"""What a decoding sequence proposes: its grammar's forced tokens first, the prompt lookup after them, never
more than its length limits leave room for."""
from __future__ import annotations

from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.backends.conch.speculation import Speculation
from conch.engine.types import GenerationRequest, SamplingParams


class _Forcing:
    """A matcher that forces `forced` next."""

    def __init__(self, forced: list[int]) -> None:
        self.forced = forced

    def forced_tokens(self) -> list[int]:
        return self.forced


def _seq(prompt: list[int], max_tokens: int | None = 32, matcher=None, max_total: int = 64,
         asked: int | None = None) -> Sequence:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, speculative_tokens=asked)
    return Sequence(request=GenerationRequest(id="r", model="m", params=params), index=0, prompt_ids=prompt,
                    eos_ids=frozenset(), max_total=max_total, matcher=matcher)


PROMPT = [7, 8, 9, 1, 2, 3, 4, 5, 6, 1, 2]


def test_the_lookup_continues_after_the_forced_tokens():
    seq = _seq(PROMPT, matcher=_Forcing([3]))
    assert Speculation(tokens=4).draft(seq) == (3, 4, 5, 6)       # forced 3, then what followed (1, 2, 3)
    other = _seq(PROMPT, matcher=_Forcing([9]))                  # (2, 9) never occurred: nothing follows 9
    assert Speculation(tokens=4).draft(other) == (9,)
    assert Speculation(tokens=4, grammar=False).draft(other) == (3, 4, 5, 6)
    assert Speculation(tokens=2).draft(_seq(PROMPT, matcher=_Forcing([9, 9, 9]))) == (9, 9)


def test_proposals_leave_room_for_the_token_after_them():
    seq = _seq(PROMPT, max_tokens=3)
    seq.output_ids = [3]                                          # 2 more tokens: 1 proposal and the row after it
    assert Speculation(tokens=4).draft(seq) == (4,)
    assert Speculation(tokens=4).draft(_seq(PROMPT, max_tokens=None, max_total=len(PROMPT) + 3)) == (3, 4)
    seq.output_ids = [3, 4]
    assert Speculation(tokens=4).draft(seq) == ()


def test_off_with_zero_tokens():
    assert Speculation(tokens=0).drafts([_seq(PROMPT)]) == ((),)


def test_a_request_caps_its_proposals_under_the_models():
    assert Speculation(tokens=4).draft(_seq(PROMPT, asked=2)) == (3, 4)
    assert Speculation(tokens=4).draft(_seq(PROMPT, asked=0)) == ()
    assert Speculation(tokens=2).draft(_seq(PROMPT, asked=8)) == (3, 4)        # never past the model's setting
