"""decode_json: json.loads's values at orjson's speed — the cases where the two differ go to json."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.acp.wire import decode_json

TRICKY = [
    "18446744073709551615",  # the largest integer orjson keeps
    "18446744073709551616",  # one more: orjson makes it a float
    "-9223372036854775808",
    "-9223372036854775809",
    "123456789012345678901234567890",
    '{"n": [1, 340282366920938463463374607431768211456, {"m": -99999999999999999999}]}',
    '{"id": "sess-12345678901234567890123", "t": 1.5}',
    '"\\ud800 a lone surrogate"',  # an undecodable file name: orjson refuses it
    '{"a": NaN, "b": Infinity, "c": -Infinity}',
    "1e400",
    "0.1234567890123456789012",
    '{"k": 1, "k": 2}',
]


def same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


@pytest.mark.parametrize("text", TRICKY)
def test_the_values_json_loads_gives_from_text_and_from_bytes(text: str) -> None:
    expected = json.loads(text)
    assert same(decode_json(text), expected)
    if "\\ud800" not in text:
        assert same(decode_json(text.encode()), expected)


def test_a_huge_integer_stays_an_exact_int() -> None:
    value = decode_json(b'{"size": 18446744073709551616, "neg": -9223372036854775809}')
    assert value == {"size": 2**64, "neg": -(2**63) - 1}
    assert type(value["size"]) is int and type(value["neg"]) is int


@pytest.mark.parametrize("data", [b"{", b"not json", b"\xff\xfe{}", "", '{"a": 1} x'])
def test_what_is_not_json_raises_a_value_error_as_json_loads_does(data: bytes | str) -> None:
    with pytest.raises(ValueError):
        json.loads(data)
    with pytest.raises(ValueError):
        decode_json(data)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@given(JSON)
def test_any_value_round_trips_as_json_loads_reads_it(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert same(decode_json(text), json.loads(text))
        try:
            encoded = text.encode()
        except UnicodeEncodeError:
            continue  # a lone surrogate has no UTF-8 form
        assert same(decode_json(encoded), json.loads(encoded))


def test_a_long_fraction_is_read_as_json_loads_reads_it() -> None:
    text = '{"total_cost_usd": 0.0024000000000000002, "n": [0.12345678901234567890123456789, 12345678901234567890]}'
    assert same(decode_json(text), json.loads(text))
