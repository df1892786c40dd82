"""The S3-compatible blob store against moto's S3 server on loopback (started here).

``moto[server]`` is in the ``test`` extra, so ``make setup`` installs it: these tests run on every
machine, CI's included, and never skip themselves.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.errors import BatonError
from baton.snapshots import GitObjects, blob_store_for, build_archive, restore_archive
from baton.snapshots.s3 import S3BlobStore

from .conftest import init_repo, shadow, work_tree_state

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server (a test dependency, so never skipped) on a free loopback port."""
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BATON_"))}
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"moto's S3 server did not start:\n{log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.1)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


def store(endpoint: str, bucket: str) -> S3BlobStore:
    environ = {"BATON_S3_ACCESS_KEY_ID": "baton-test-key", "BATON_S3_SECRET_ACCESS_KEY": "baton-test-secret"}
    opened = blob_store_for(f"s3://{bucket}/blobs?endpoint={endpoint}&region=eu-west-1", Path("/unused"), environ)
    assert isinstance(opened, S3BlobStore)
    opened.create_bucket()
    return opened


def test_put_exists_fetch(moto_endpoint: str, tmp_path: Path) -> None:
    blobs = store(moto_endpoint, "baton-blobs")
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(100_000))
    key = blobs.put_file(source)
    assert key.startswith("sha256:") and blobs.exists(key)
    assert blobs.put_file(source) == key  # content-addressed: stored once
    blobs.fetch(key, tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
    missing = "sha256:" + "0" * 64
    assert not blobs.exists(missing)
    with pytest.raises(BatonError) as not_found:
        blobs.fetch(missing, tmp_path / "none")
    assert not_found.value.code == "snapshot_not_found"


def test_a_snapshot_archive_through_s3_restores(moto_endpoint: str, tmp_path: Path) -> None:
    blobs = store(moto_endpoint, "baton-archives")
    repo = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    shadow_repo = shadow(tmp_path, repo)
    shadow_repo.prepare()
    (repo / "b.txt").write_text("b\n")
    snapshot = shadow_repo.capture()
    assert snapshot is not None
    build_archive(shadow_repo, snapshot, tmp_path / "s1.tar.gz")
    key = blobs.put_file(tmp_path / "s1.tar.gz")
    blobs.fetch(key, tmp_path / "fetched.tar.gz")
    restore_archive(tmp_path / "fetched.tar.gz", tmp_path / "out", base=GitObjects(shadow_repo.environment))
    assert work_tree_state(tmp_path / "out") == work_tree_state(repo)


def test_an_s3_url_without_credentials_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(BatonError) as refused:
        blob_store_for("s3://bucket", tmp_path, {})
    assert refused.value.code == "config_invalid"
