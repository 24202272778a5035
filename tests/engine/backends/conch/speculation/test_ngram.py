"""The prompt lookup's index alone: the continuation of the latest, longest earlier match of the suffix."""
from __future__ import annotations

from conch.engine.backends.conch.speculation.ngram import NgramIndex


def test_proposes_what_followed_the_latest_occurrence_of_the_suffix():
    tokens = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 0, 1, 2]
    assert NgramIndex(2, 4).propose(tokens, 3) == [3, 7, 8]      # (1, 2) last occurred at 6..7


def test_a_longer_match_wins_over_a_later_one():
    tokens = [5, 1, 2, 3, 4, 6, 1, 2, 9, 9, 5, 1, 2]
    assert NgramIndex(2, 4).propose(tokens, 2) == [3, 4]         # (5, 1, 2) beats the later (1, 2)


def test_nothing_without_an_earlier_occurrence_or_room():
    index = NgramIndex(2, 4)
    assert index.propose([1, 2, 3, 4], 4) == []
    assert index.propose([1, 2, 3, 1, 2], 0) == []
    assert NgramIndex(3, 4).propose([1, 2], 4) == []


def test_the_index_grows_with_the_tokens_and_matches_through_the_tail():
    index = NgramIndex(2, 3)
    tokens = [1, 2, 3]
    assert index.propose(tokens, 2) == []
    tokens += [4, 1, 2]
    assert index.propose(tokens, 2) == [3, 4]
    assert index.propose(tokens, 2, tail=[3, 4]) == [1, 2]      # the suffix (3, 4) is matched through the tail
    tokens += [6, 6, 5]
    assert index.propose(tokens, 2) == []        # (6, 5) never occurred: the tail's (4, 1, 2, 3, 4) is not read
