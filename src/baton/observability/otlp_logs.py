"""OTLP log records encoded by baton: the protobuf bytes of ``ExportLogsServiceRequest`` built
directly from the committed entries, a batch at a time.

The SDK's way (a ``LogRecord`` object per entry, attribute validation and a copy, then its
encoder building a protobuf message per record and hashing the resource of each) cost ~25 µs
of CPU an entry; this costs a few (bench/otel_export.py). The wire format is protobuf's
(https://protobuf.dev/programming-guides/encoding/) for the messages of
``opentelemetry/proto/logs/v1/logs.proto``: concatenated fields, a submessage as its length
and its bytes, so a record is a join of byte strings and the parts every record shares (the
severity, the span context of a group, the ``direction`` attribute, a method's ``event_type``)
are encoded once. The resource and the scope, once per run, are encoded with opentelemetry-proto's
message classes. The tests decode what this builds with those classes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourceMessage

from baton.store.redact import encode_json

if TYPE_CHECKING:
    from baton.store.committed import Row

__all__ = ["SCOPE_NAME", "body_prefix", "context_fields", "encode_request", "encode_resource_logs_head", "record_bytes"]

SCOPE_NAME: Final = "baton.session_log"

_K = TypeVar("_K")
_V = TypeVar("_V")

_SMALL: Final = [bytes([n]) for n in range(128)]
_PACK_Q: Final = struct.Struct("<Q").pack
_PACK_I: Final = struct.Struct("<I").pack

# LogRecord fields: tag = field number << 3 | wire type (0 varint, 1 fixed64, 2 length, 5 fixed32).
_TIME: Final = b"\x09"  # 1 time_unix_nano, fixed64
_SEVERITY: Final = b"\x10\x09\x1a\x04INFO"  # 2 severity_number = SEVERITY_NUMBER_INFO (9), 3 severity_text
_BODY: Final = b"\x2a"  # 5 body, AnyValue
_ATTRIBUTE: Final = b"\x32"  # 6 attributes, KeyValue
_FLAGS: Final = b"\x45"  # 8 flags, fixed32
_TRACE_ID: Final = b"\x4a\x10"  # 9 trace_id, 16 bytes
_SPAN_ID: Final = b"\x52\x08"  # 10 span_id, 8 bytes
_OBSERVED: Final = b"\x59"  # 11 observed_time_unix_nano, fixed64
_STRING: Final = b"\x0a"  # AnyValue 1 string_value; KeyValue 1 key; ScopeLogs/ResourceLogs 1 scope/resource
_VALUE: Final = b"\x12"  # KeyValue 2 value; ScopeLogs 2 log_records; ResourceLogs 2 scope_logs
_INT: Final = b"\x18"  # AnyValue 3 int_value, varint
_SEQ_KEY: Final = b"\x0a\x03seq"


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _string_attribute(key: str, value: str) -> bytes:
    pair = _length(_STRING, key.encode()) + _length(_VALUE, _length(_STRING, value.encode()))
    return _length(_ATTRIBUTE, pair)


class _Cache(dict[_K, _V]):
    """Bytes encoded once per key (directions and methods, lengths: few), bounded."""

    def __init__(self, encode: Callable[[_K], _V], limit: int = 512) -> None:
        super().__init__()
        self._encode, self._limit = encode, limit

    def __missing__(self, key: _K) -> _V:
        encoded = self._encode(key)
        if len(self) < self._limit:
            self[key] = encoded
        return encoded


def _tail(key: tuple[str, str | None]) -> bytes:
    """The ``direction`` and ``event_type`` attributes of a record."""
    direction, method = key
    tail = _string_attribute("direction", direction)
    return tail + _string_attribute("event_type", method) if method is not None else tail


# The body's JSON around the entry's seq, ts and payload: ``{"run_id":…,"seq":`` is the run's
# (:func:`body_prefix`); then ``,"ts":"TS``, then this, then the payload's text and ``}``.
_BODY_MIDDLE: Final[_Cache[tuple[str, str | None], bytes]] = _Cache(
    lambda key: f'","direction":{encode_json(key[0])},"method":{encode_json(key[1])},"payload":'.encode()
)
# (the body's middle, the attributes) of a (direction, method); the varints of the lengths seen.
_PARTS: Final[_Cache[tuple[str, str | None], tuple[bytes, bytes]]] = _Cache(lambda key: (_BODY_MIDDLE[key], _tail(key)))
_LENGTHS: Final[_Cache[int, bytes]] = _Cache(_varint, limit=1 << 14)


def _time_fields(ts: str) -> tuple[bytes, bytes]:
    """(``time_unix_nano`` field, the ``ts`` in the body) of an entry's ``ts`` (milliseconds, ``…Z``)."""
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return _TIME + _PACK_Q(int(moment.timestamp() * 1000) * 1_000_000), b',"ts":' + encode_json(ts).encode()[:-1]


def body_prefix(run_id: str) -> bytes:
    """The start of the body of every record of ``run_id``."""
    return b'{"run_id":' + encode_json(run_id).encode() + b',"seq":'


def context_fields(trace_id: int, span_id: int, flags: int) -> bytes:
    """The span context every record of a group carries (``flags``, ``trace_id``, ``span_id``)."""
    if not trace_id or not span_id:
        return b""
    return _FLAGS + _PACK_I(flags) + _TRACE_ID + trace_id.to_bytes(16, "big") + _SPAN_ID + span_id.to_bytes(8, "big")


def record_bytes(rows: Sequence[Row], prefix: bytes, context: bytes, observed_ns: int) -> list[bytes]:
    """The ``ScopeLogs.log_records`` fields (tag, length, LogRecord) of the committed ``rows``
    (the session log's columns: the payload's JSON text is as committed, redacted) of one run;
    ``prefix`` is :func:`body_prefix` of the run."""
    shared = _SEVERITY + context + _OBSERVED + _PACK_Q(observed_ns)
    # The record's bytes but the body's and the seq's: the time (9), ``shared``, the body's tag,
    # the seq attribute's tag, length, key (5), value tag and value length.
    fixed = 9 + len(shared) + 1 + 1 + 1 + len(_SEQ_KEY) + 1 + 1
    parts, lengths, varint, small, join = _PARTS, _LENGTHS, _varint, _SMALL, b"".join
    last_ts, time_field, ts_text = "", b"", b""
    out: list[bytes] = []
    append = out.append
    for _run_key, seq, ts, direction, method, text, _chunk in rows:
        if ts != last_ts:  # entries of one millisecond share it
            time_field, ts_text = _time_fields(ts)
            last_ts = ts
        middle, tail = parts[direction, method]
        body = join((prefix, b"%d" % seq, ts_text, middle, text.encode(errors="replace"), b"}"))
        body_length = lengths[len(body)]
        value_length = 1 + len(body_length) + len(body)
        value_prefix = lengths[value_length]
        seq_value = varint(seq)  # at most 10 bytes: the seq attribute's lengths are one byte each
        size = fixed + len(value_prefix) + value_length + 1 + len(seq_value) + len(tail)
        append(
            join(
                (
                    _VALUE,
                    lengths[size],
                    time_field,
                    shared,
                    _BODY,
                    value_prefix,
                    _STRING,
                    body_length,
                    body,
                    _ATTRIBUTE,
                    small[len(seq_value) + 8],
                    _SEQ_KEY,
                    _VALUE,
                    small[len(seq_value) + 1],
                    _INT,
                    seq_value,
                    tail,
                )
            )
        )
    return out


def _any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[_any_value(item) for item in value]))
    return AnyValue(string_value=str(value))


def encode_resource_logs_head(attributes: Mapping[str, Any], schema_url: str = "") -> tuple[bytes, bytes]:
    """(``ResourceLogs`` fields before its scope logs: the resource; ``ScopeLogs`` fields before
    its records: the scope) for a run's resource, encoded once."""
    resource = ResourceMessage(attributes=[KeyValue(key=k, value=_any_value(v)) for k, v in attributes.items()])
    head = _length(_STRING, resource.SerializeToString())
    if schema_url:
        head += _length(b"\x1a", schema_url.encode())  # 3 schema_url
    scope = _length(_STRING, InstrumentationScope(name=SCOPE_NAME).SerializeToString())
    return head, scope


def encode_request(groups: Iterable[tuple[tuple[bytes, bytes], list[bytes]]]) -> bytes:
    """``ExportLogsServiceRequest``: a ``ResourceLogs`` per (resource head, records)."""
    parts: list[bytes] = []
    for (head, scope), records in groups:
        scope_logs = scope + b"".join(records)
        resource_logs = head + _VALUE + _varint(len(scope_logs)) + scope_logs
        parts.append(_STRING + _varint(len(resource_logs)) + resource_logs)
    return b"".join(parts)
