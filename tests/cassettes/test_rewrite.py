"""A recorded stream made fit for the replaying run: a path the API cut between two deltas is
still rewritten (the deltas of one block are merged first)."""

from __future__ import annotations

import json

from baton.cassettes.rewrite import replay_events


def _delta(index: int, partial: str) -> bytes:
    data = {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial},
    }
    return f"event: content_block_delta\ndata: {json.dumps(data)}\n\n".encode()


def test_a_path_cut_between_two_deltas_is_rewritten_and_the_pieces_keep_their_times() -> None:
    chunks = [
        (0.1, b'event: ping\ndata: {"type": "ping"}\n\n'),
        (0.2, _delta(1, '{"file_path": "/work/rec')),
        (0.3, _delta(1, 'orded/hello.txt"}')[:20]),  # an event cut between two pieces too
        (0.4, _delta(1, 'orded/hello.txt"}')[20:]),
        (0.5, b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 1}\n\n'),
    ]
    events = replay_events(chunks, [("/work/recorded", "/tmp/replaying")])
    assert [at for at, _ in events] == [0.1, 0.4, 0.5]
    merged = json.loads(events[1][1].decode().split("data: ", 1)[1])
    assert merged["delta"]["partial_json"] == '{"file_path": "/tmp/replaying/hello.txt"}'
