"""One JSON decoder for everything baton reads from agents and from its own log: :func:`decode_json`.

orjson parses several times faster than the standard library, but it differs from
``json.loads`` in three ways a log must not see: an integer beyond 64 bits silently becomes a
float (``2**64`` → ``1.8446744073709552e19``), and a lone surrogate (an undecodable file name)
or ``NaN``/``Infinity``/``1e400`` are refused. :func:`decode_json` gives exactly what
``json.loads`` gives: a text with a run of 19 or more digits (where an integer might not fit in
64 bits; one C pass over the bytes, ~6 % of orjson's own time) and any text orjson refuses are
decoded by the standard library (a long fraction, ``0.0024000000000000002``, is orjson's).
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

__all__ = ["JSONDecodeError", "decode_json"]

JSONDecodeError: Final = json.JSONDecodeError  # a ValueError, as orjson's own

_ORJSON_LOADS: Final = orjson.loads
_STDLIB_LOADS: Final = json.loads
# Every digit → "9", a "." stays, everything else → " ": an integer is then a run of "9"s
# not after a "." (a fraction's digits are: a long float orjson reads as json does).
_DIGITS: Final = bytes(57 if 48 <= byte <= 57 else 46 if byte == 46 else 32 for byte in range(256))
_LONG_RUN: Final = b"9" * 19  # 19 digits: the shortest integer that may not fit (-2**63 - 1, 2**64)
_DOT: Final = 46


def decode_json(data: bytes | str) -> Any:
    """``json.loads(data)``, through orjson wherever orjson gives the same value.

    Raises :class:`json.JSONDecodeError` (a ``ValueError``) for text that is not JSON, and
    ``UnicodeDecodeError`` (a ``ValueError`` too) for bytes that are not UTF-8, as ``json.loads`` does.
    """
    shape = (data if type(data) is bytes else str(data).encode("utf-8", "surrogatepass")).translate(_DIGITS)
    if _LONG_RUN not in shape or not _has_long_integer(shape):
        try:
            return _ORJSON_LOADS(data)
        except orjson.JSONDecodeError:
            pass  # a lone surrogate, NaN, an overflowing float…: the standard library's answer
    return _STDLIB_LOADS(data)


def _has_long_integer(shape: bytes) -> bool:
    """Whether a run of 19 "9"s in ``shape`` starts an integer's digits (not a fraction's)."""
    at = shape.find(_LONG_RUN)
    while at >= 0:
        if at == 0 or shape[at - 1] != _DOT:
            return True
        end = at + len(_LONG_RUN)
        while end < len(shape) and shape[end] == 57:
            end += 1
        at = shape.find(_LONG_RUN, end)
    return False
