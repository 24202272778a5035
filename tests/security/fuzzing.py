"""The fuzz bodies both fuzz tests send (test_fuzz.py: the older routes' connection handling; test_fuzz_faces.py:
every face's statuses and error shapes) and tests/bench/bench_fuzz_rss.py replays against the default model.

A mutation sets, drops or replaces keys of a valid template body or of an object nested in it (two levels down:
a message, an input item, a tool's format) with hostile values; one body in ten has a bare NaN / Infinity in
place of a string value. Beside the mutations, arbitrary JSON (and, where the test asks, arbitrary bytes)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from hypothesis import HealthCheck, settings, strategies as st

SearchStrategy = st.SearchStrategy
NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))


def values(keys: tuple[str, ...], strings: list[str]) -> SearchStrategy:
    """Scalars (with `strings`, the route's suspects), and lists and objects of them keyed by `keys` or noise."""
    scalars = st.one_of(SCALARS, st.sampled_from(strings))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), inner, max_size=4),
                        max_leaves=12)


@dataclass(frozen=True)
class Mutations:
    templates: dict[str, dict]                        # route -> a valid body
    keys: tuple[str, ...]                             # the keys a mutation may set, beside the template's own
    value_for: Callable[[str], SearchStrategy]        # the values a key may take
    rounds: int = 3                                   # at most this many mutations a body
    raw: tuple[SearchStrategy, ...] = ()              # other bodies, as bytes (arbitrary JSON, bytes)

    def bodies(self, path: str) -> SearchStrategy:
        return st.one_of(*[self.mutated(path)] * 3, *self.raw)

    def mutated(self, path: str) -> SearchStrategy:
        return _mutated(self, self.templates[path])


@st.composite
def _mutated(draw, m: Mutations, template: dict) -> bytes:
    body = json.loads(json.dumps(template))
    for _ in range(draw(st.integers(1, m.rounds))):
        target = _pick_object(draw, body)
        key = draw(st.sampled_from(sorted(target) or ["model"]) | st.sampled_from(m.keys))
        if draw(st.integers(0, 5)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(m.value_for(key))
    text = json.dumps(body)
    if draw(st.integers(0, 9)) == 0:              # a bare NaN / Infinity in place of one value
        text = text.replace('"hi"', draw(NON_FINITE), 1)
    return text.encode("utf-8", "surrogatepass")


def _pick_object(draw, body: dict) -> dict:
    """The body or an object nested in it, two levels down (an input item, a tool's format, a message)."""
    objects = [body]
    for value in body.values():
        for child in (value if isinstance(value, list) else [value]):
            if isinstance(child, dict):
                objects += [child, *(v for v in child.values() if isinstance(v, dict))]
    return draw(st.sampled_from(objects))


def as_json(strategy: SearchStrategy) -> SearchStrategy:
    return strategy.map(lambda v: json.dumps(v).encode("utf-8", "surrogatepass"))


def fuzz_settings(examples: int, derandomize: bool = True) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])
