"""``GET /v1/runs/{id}/cassette``: a recorded run's cassette for its owner or an admin, nobody else;
a run whose model answers were not kept is ``run_not_recorded`` (409)."""

from __future__ import annotations

from pathlib import Path

from tests.server._server import KeyPair, RunningServer
from tests.server.test_server_auth import get, keys, server, token  # noqa: F401  (fixtures)

from baton.store import RunRecord

CASSETTE = '{"baton_cassette": 1, "recorded_at": "2026-12-02T04:00:00Z", "agent": "claude", "endpoint": null}\n'


def _run(running: RunningServer, owner: str, source: dict[str, object]) -> RunRecord:
    async def create() -> RunRecord:
        request = {"prompt": "go", "model_source": source}
        return await running.baton.store.create_run(agent="claude", owner=owner, repo="/tmp/x", request=request)

    return running.call(create)


def test_the_cassette_of_a_recorded_run_goes_to_its_owner_and_an_admin_only(
    server: RunningServer,  # noqa: F811
    keys: tuple[KeyPair, ...],  # noqa: F811
    tmp_path: Path,
) -> None:
    first = keys[0]
    cassette = tmp_path / "recorded.jsonl"
    cassette.write_text(CASSETTE)
    recorded = _run(server, "carol", {"kind": "scenario", "scenario": "plain", "record": str(cassette)})
    replayed = _run(server, "carol", {"kind": "cassette", "cassette": str(cassette), "timing": "fast"})
    on_endpoint = _run(server, "carol", {"kind": "endpoint", "url": None})
    carol, dave = token(first, sub="carol", scope="runs:read"), token(first, sub="dave", scope="runs:read")
    admin = token(first, sub="root", scope="runs:read admin")

    for run in (recorded, replayed):
        answer = get(server, f"/v1/runs/{run.id}/cassette", carol)
        assert answer.status_code == 200 and answer.text == CASSETTE, answer.text
        assert answer.headers["content-type"].startswith("application/jsonl")
    assert get(server, f"/v1/runs/{recorded.id}/cassette", admin).text == CASSETTE
    hidden = get(server, f"/v1/runs/{recorded.id}/cassette", dave)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "run_not_found"
    refused = get(server, f"/v1/runs/{on_endpoint.id}/cassette", carol)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_not_recorded"
    cassette.unlink()
    gone = get(server, f"/v1/runs/{recorded.id}/cassette", carol)
    assert gone.status_code == 409 and "is gone" in gone.json()["error"]["message"]
