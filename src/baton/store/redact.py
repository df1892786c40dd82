"""Redaction by value: secrets never reach the log (docs/design.md, "The log").

Every credential baton hands an agent and baton's own configuration secrets are registered
with a :class:`Redactor`; any occurrence in an entry, and any ``Bearer <token>``, becomes
``[REDACTED]`` before the entry is queued.

An entry is serialized once; the secrets are replaced in that text in the form JSON gives
them (escaped once, and twice for JSON carried inside a string), and the text is parsed back
only when something changed. Should a replacement ever break the JSON (a secret that looks
like an escape sequence), the payload is redacted string by string instead.

Serializing is the hot part of ``SessionLog.append``: orjson does it ~8x faster than the
standard library, with the same output (compact, UTF-8 unescaped, the same string escapes);
what orjson refuses (integers beyond 64 bits, lone surrogates) goes through ``json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

import orjson

from baton.acp.wire import decode_json
from baton.errors import UsageError

__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "Redactor", "encode_json"]

REDACTED: Final = "[REDACTED]"
MIN_SECRET_LENGTH: Final = 8
# RFC 6750 token68 characters; at least 8 so that prose ("bearer of news") survives.
_BEARER: Final = re.compile(r"(\b[Bb]earer|\bBEARER)( +)[A-Za-z0-9\-._~+/]{8,}=*")
_BEARER_HINTS: Final = ("earer", "EARER")
_STDLIB_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_ORJSON_DUMPS: Final = orjson.dumps
_NON_STR_KEYS: Final = orjson.OPT_NON_STR_KEYS


def encode_json(value: Any) -> str:
    """Compact JSON text, as ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""
    try:
        return _ORJSON_DUMPS(value, option=_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError: a huge integer, a lone surrogate, an unknown type
        return _STDLIB_ENCODE(value)


def _json_escaped(value: str) -> str:
    return _STDLIB_ENCODE(value)[1:-1]


class Redactor:
    """Replaces registered secrets and bearer tokens with ``[REDACTED]``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._raw: list[str] = []
        self._escaped: list[str] = []
        for secret in secrets:
            self.add(secret)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._raw)} secrets>)"

    def __len__(self) -> int:
        return len(self._raw)

    def add(self, secret: str) -> None:
        """Register a secret; values shorter than 8 characters are refused (``config_invalid``)."""
        if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
            # Never echo the value: it is meant to be secret.
            raise UsageError(
                "config_invalid",
                f"a secret to redact must be a string of at least {MIN_SECRET_LENGTH} characters",
            )
        if secret in self._raw:
            return
        self._raw.append(secret)
        once = _json_escaped(secret)
        twice = _json_escaped(once)
        self._escaped.extend(form for form in (once, twice) if form not in self._escaped)
        # Longest first, so a secret that contains another is replaced whole.
        self._raw.sort(key=len, reverse=True)
        self._escaped.sort(key=len, reverse=True)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret (raw or JSON-escaped) and bearer token replaced."""
        for form in self._raw:
            if form in text:
                text = text.replace(form, REDACTED)
        return self._replace_escaped(text)

    def redact_json(self, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The redacted payload as compact JSON text (for storage) and as a dict.

        When nothing was redacted the dict returned is ``payload`` itself.
        """
        text = encode_json(payload)
        redacted = self._replace_escaped(text)
        if redacted is text:
            return text, payload
        try:
            parsed = decode_json(redacted)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            parsed = self._redact_value(payload)
            redacted = encode_json(parsed)
        return redacted, parsed

    def _replace_escaped(self, text: str) -> str:
        for form in self._escaped:
            if form in text:
                text = text.replace(form, REDACTED)
        if _BEARER_HINTS[0] in text or _BEARER_HINTS[1] in text:
            replaced = _BEARER.sub(rf"\1\2{REDACTED}", text)
            if replaced != text:
                text = replaced
        return text

    def _redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {self.redact_text(str(key)): self._redact_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._redact_value(item) for item in value]
        return value
