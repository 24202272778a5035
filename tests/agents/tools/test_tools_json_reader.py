"""JsonReader: canonical output equals json.dumps of json.loads, for any split of the input; failures stop
at the offending character; canonical text is the same in every mode."""
from __future__ import annotations

import json
import random

import pytest

from conch.agents.tools.canonical import dumps, encode_string_body
from conch.agents.tool_formats.reading.json_reader import JsonReader, canonical_object

_CHARS = ['a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\x01', '\x1f', '\x7f', 'é', '大', '😀', '\u2028',
          '{', '}', '[', ']']


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.randint(-10**12, 10**12)
    if kind == 2:
        return rng.choice([0.5, -2.25, 1e-7, 3.0, 123456.789])
    if kind in (3, 4):
        return "".join(rng.choice(_CHARS) for _ in range(rng.randrange(6)))
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {"".join(rng.choice(_CHARS) for _ in range(rng.randrange(4))): _random_value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def _read(text: str, cuts: list[int]) -> tuple[JsonReader, str, int]:
    """Feed text in pieces cut at `cuts`, as a caller with a growing buffer does."""
    reader, buf, pos, out = JsonReader(), "", 0, []
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        buf += text[start:end]
        pos = reader.feed(buf, pos)
        out.append(reader.take())
    return reader, "".join(out), pos


def test_random_documents_any_split():
    rng = random.Random(1234)
    for _ in range(300):
        value = {"v": _random_value(rng)}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 0, 2]),
                          separators=rng.choice([None, (", ", ": "), (",", ":")]))
        cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randrange(1, 12))))
        reader, out, pos = _read(text, cuts)
        assert reader.done and pos == len(text)
        assert out == dumps(value)


@pytest.mark.parametrize("text", ['{"s": "\\ud83d\\ude00 \\uD83D\\uDE00"}', '{"s": "\\ud83d"}', '{"s": "\\ud83dx"}',
                                  '{"s": "\\ude00\\ud83d\\n"}', '{"a": [], "b": {}, "c": [{}]}', '{ "k" :\n\t"v" }'])
def test_surrogates_and_spacing_every_split(text):
    want = dumps(json.loads(text))
    for size in range(1, len(text) + 1):
        reader, out, _ = _read(text, list(range(size, len(text), size)))
        assert reader.done and out == want, size
    assert want.encode("utf-8")  # lone surrogates stay escapes: always encodable


def test_numbers_are_kept_as_written():
    assert canonical_object('{"a": 1.50, "b": -0, "c": 1E+3, "d": 123456789012345678901234567890}') == \
        '{"a":1.50,"b":-0,"c":1E+3,"d":123456789012345678901234567890}'


def test_raw_control_characters_are_accepted_and_escaped():
    assert canonical_object('{"code": "a\n\tb\x01"}') == '{"code":"a\\n\\tb\\u0001"}'


@pytest.mark.parametrize(("text", "stop"), [
    ('{"a" 1}', 5), ('{"a":01}', 7), ('{"a":tru}', 8), ('{"a":1,}', 7), ('[1,]', 3), ('{"a":"\\x"}', 7),
    ('{"a":NaN}', 5), ('{a:1}', 1), ('{"a":"\\u12G4"}', 10), ('{"a":1}}', None), ("[1] x", None),
])
def test_failures_stop_at_the_offending_character(text, stop):
    reader, _, pos = _read(text, [])
    if stop is None:  # a complete value: the reader stops right after it, leaving the rest
        assert reader.done and text[pos:] in ("}", " x")
    else:
        assert reader.failed and pos == stop


def test_depth_limit():
    reader, _, _ = _read("[" * 200, [])
    assert reader.failed


def test_canonical_object_needs_one_object():
    assert canonical_object(' {"a": [1, 2]} ') == '{"a":[1,2]}'
    assert canonical_object("[1]") is None
    assert canonical_object('{"a": 1} {}') is None
    assert canonical_object('{"a": 1') is None


def test_encode_string_body_is_per_character():
    text = 'a"b\\c\nd\x00é😀\ud800'
    assert encode_string_body(text) == "".join(encode_string_body(ch) for ch in text)
    assert encode_string_body(text[:-1]) == json.dumps(text[:-1], ensure_ascii=False)[1:-1]
