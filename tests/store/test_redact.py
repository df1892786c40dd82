from __future__ import annotations

import json

import pytest

from baton.errors import UsageError
from baton.store import REDACTED, Redactor

pytestmark = pytest.mark.timeout(10)

SECRET = "sk-ant-canary-0123456789"


def test_a_secret_in_a_nested_payload_is_redacted() -> None:
    payload = {"params": {"env": [{"ANTHROPIC_API_KEY": SECRET}], "note": f"key={SECRET};"}}
    text, redacted = Redactor([SECRET]).redact_json(payload)
    assert SECRET not in text
    assert json.loads(text) == redacted
    assert redacted == {"params": {"env": [{"ANTHROPIC_API_KEY": REDACTED}], "note": f"key={REDACTED};"}}
    assert payload["params"]["note"] == f"key={SECRET};"  # the caller's dict is untouched


def test_an_unchanged_payload_is_returned_as_is() -> None:
    payload = {"jsonrpc": "2.0", "params": {"text": "nothing to hide, ünïcode kept"}}
    text, redacted = Redactor([SECRET]).redact_json(payload)
    assert redacted is payload
    assert text == '{"jsonrpc":"2.0","params":{"text":"nothing to hide, ünïcode kept"}}'


def test_redact_text() -> None:
    redactor = Redactor([SECRET])
    assert redactor.redact_text(f"export KEY={SECRET}\n") == f"export KEY={REDACTED}\n"
    assert redactor.redact_text("plain") == "plain"


@pytest.mark.parametrize("secret", ['pa"ss\\word-42', "back\\slash\\tail\\", "tab\tand\nnewline!"])
def test_secrets_that_json_escapes(secret: str) -> None:
    payload = {"output": f"before {secret} after", "nested": json.dumps({"token": secret})}
    text, redacted = Redactor([secret]).redact_json(payload)
    assert secret not in json.dumps(redacted)
    assert json.dumps(secret)[1:-1] not in text
    assert redacted["output"] == f"before {REDACTED} after"
    assert json.loads(redacted["nested"]) == {"token": REDACTED}


def test_a_replacement_that_would_break_json_falls_back_to_each_string() -> None:
    # "nabcdefgh" is found in the text inside the escape "\nabcdefgh" (a newline, not the secret).
    payload = {"a": "\nabcdefgh", "b": "xnabcdefghx"}
    text, redacted = Redactor(["nabcdefgh"]).redact_json(payload)
    assert redacted == {"a": "\nabcdefgh", "b": f"x{REDACTED}x"}
    assert json.loads(text) == redacted


def test_bearer_tokens_are_redacted_without_registration() -> None:
    payload = {"headers": {"Authorization": "Bearer eyJhbGciOi.J9x-y_z~+/abc="}, "prose": "the bearer of news"}
    text, redacted = Redactor().redact_json(payload)
    assert redacted["headers"]["Authorization"] == f"Bearer {REDACTED}"
    assert redacted["prose"] == "the bearer of news"
    assert "eyJhbGciOi" not in text
    assert Redactor().redact_text("curl -H 'authorization: bearer abcdefgh12345'") == (
        f"curl -H 'authorization: bearer {REDACTED}'"
    )


def test_short_secrets_are_refused_without_echoing_them() -> None:
    with pytest.raises(UsageError) as refused:
        Redactor(["x"])
    assert refused.value.code == "config_invalid"
    redactor = Redactor()
    with pytest.raises(UsageError) as refused:
        redactor.add("seven77")
    assert "seven77" not in str(refused.value)
    assert len(redactor) == 0
    redactor.add("eight888")
    assert "eight888" not in repr(redactor)


def test_a_secret_containing_another_is_replaced_whole() -> None:
    redactor = Redactor(["abcdefgh", "abcdefgh-longer"])
    assert redactor.redact_text("abcdefgh-longer") == REDACTED


@pytest.mark.parametrize(
    "payload",
    [
        {"text": 'quotes " backslash \\ tab \t newline \n control \x01 \x1f del \x7f é ✓ \u2028 😀'},
        {"n": [0, -1, 2**63 - 1, 1.5, 1e300, True, None], "nested": {"list": [[], {}]}},
        {"huge": 2**80},  # beyond orjson: encoded by the standard library
        {"surrogate": "\ud800"},  # likewise
        {1: "int key", None: "null key"},
    ],
)
def test_the_fast_encoding_is_the_standard_one(payload: dict[object, object]) -> None:
    expected = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    text, redacted = Redactor([SECRET]).redact_json(payload)  # type: ignore[arg-type]
    assert text == expected
    assert redacted is payload


def test_a_secret_next_to_escapes_is_redacted_in_the_fast_encoding() -> None:
    secret = 'pa"ss\\word\t1234'
    payload = {"params": {"env": {"TOKEN": secret}, "args": json.dumps({"token": secret})}}
    text, redacted = Redactor([secret]).redact_json(payload)
    assert "pa" not in text.replace("params", "")
    assert redacted == {"params": {"env": {"TOKEN": REDACTED}, "args": json.dumps({"token": REDACTED})}}
