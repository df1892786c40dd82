"""The S3 blob store against moto's S3 server on loopback (started here, signatures checked).

``moto[server]`` is in the ``test`` extra, so ``make setup`` installs it: these tests run on every
machine, CI's included, and never skip themselves (a missing moto fails them). Faults the server
cannot make itself (a body cut mid-way, a flipped byte, ``503 SlowDown``) come from a loopback
proxy in front of it (tests/snapshots/_s3_faults.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from baton.agents.claude.environment import claude_environment
from baton.agents.recipe import allowed_environment
from baton.config import Settings
from baton.errors import BatonError
from baton.snapshots import GitObjects, blob_store_for, build_archive, restore_archive
from baton.snapshots.s3 import S3BlobStore, S3Location
from baton.testing.s3 import S3Server, TemporaryS3

from ._s3_faults import faulty_proxy
from .conftest import init_repo, shadow, work_tree_state

pytestmark = pytest.mark.timeout(90)

MiB = 1 << 20


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with TemporaryS3() as server:
        yield server


def store(s3: S3Server, bucket: str, *, endpoint: str | None = None, **options: int) -> S3BlobStore:
    location = S3Location.parse(s3.blob_url(bucket))
    if endpoint is not None:
        location = S3Location(location.bucket, location.prefix, endpoint, location.region)
    blobs = S3BlobStore(location, s3.access_key, s3.secret_key, **options)
    blobs.create_bucket()
    return blobs


def raw_client(s3: S3Server) -> object:
    return boto3.session.Session(aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key).client(
        "s3", endpoint_url=s3.endpoint, region_name="eu-west-1"
    )


def random_file(path: Path, size: int) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def code_of(error: pytest.ExceptionInfo[BatonError]) -> str:
    return error.value.code


def test_put_exists_fetch(s3: S3Server, tmp_path: Path) -> None:
    blobs = blob_store_for(s3.blob_url("baton-blobs"), Path("/unused"), s3.environ)
    assert isinstance(blobs, S3BlobStore)
    blobs.create_bucket()
    blobs.create_bucket()  # an existing bucket is fine
    source = random_file(tmp_path / "blob.bin", 100_000)
    key = blobs.put_file(source)
    assert key.startswith("sha256:") and blobs.exists(key)
    assert blobs.put_file(source) == key  # content-addressed: stored once
    blobs.fetch(key, tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
    missing = "sha256:" + "0" * 64
    assert not blobs.exists(missing)
    with pytest.raises(BatonError) as not_found:
        blobs.fetch(missing, tmp_path / "none")
    assert code_of(not_found) == "snapshot_not_found"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back.bin", "blob.bin"]  # no temporary file left


def test_the_aws_variables_and_a_session_token_are_read_too(s3: S3Server, tmp_path: Path) -> None:
    environ = {"AWS_ACCESS_KEY_ID": s3.access_key, "AWS_SECRET_ACCESS_KEY": s3.secret_key}
    blobs = blob_store_for(s3.blob_url("baton-aws-vars"), tmp_path, environ)
    assert isinstance(blobs, S3BlobStore)
    blobs.create_bucket()
    assert blobs.exists(blobs.put_file(random_file(tmp_path / "a.bin", 10)))
    # BATON_S3_* win over AWS_* (moto takes no session token, so only the reading is checked)
    both = {**environ, "BATON_S3_ACCESS_KEY_ID": "baton", "BATON_S3_SECRET_ACCESS_KEY": "the-secret-value"}
    both["AWS_SESSION_TOKEN"] = "t"
    chosen = blob_store_for(s3.blob_url("x"), tmp_path, both)
    assert isinstance(chosen, S3BlobStore)
    assert chosen._credentials.access_key == "baton" and chosen._credentials.session_token is None
    assert "the-secret-value" not in repr(chosen._credentials)


def test_a_large_archive_goes_up_in_parts(s3: S3Server, tmp_path: Path) -> None:
    blobs = store(s3, "baton-multipart", multipart_threshold=5 * MiB, part_size=5 * MiB)
    source = random_file(tmp_path / "big.bin", 12 * MiB)
    key = blobs.put_file(source)
    name = blobs._object(key)
    head = raw_client(s3).head_object(Bucket="baton-multipart", Key=name)  # type: ignore[attr-defined]
    assert head["ETag"].strip('"').endswith("-3")  # three parts: 5 + 5 + 2 MiB
    blobs.fetch(key, tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()


def test_a_snapshot_archive_through_s3_restores(s3: S3Server, tmp_path: Path) -> None:
    blobs = store(s3, "baton-archives")
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


@pytest.mark.parametrize("wrong", ["secret", "key"])
def test_wrong_credentials_are_blob_store_denied(s3: S3Server, tmp_path: Path, wrong: str) -> None:
    good = store(s3, "baton-denied")
    key = good.put_file(random_file(tmp_path / "a.bin", 1000))
    access = "AKIANOSUCHKEY0000000" if wrong == "key" else s3.access_key
    bad = S3BlobStore(good.location, access, "not-the-secret", max_attempts=2)
    for attempt in (
        lambda: bad.exists(key),
        lambda: bad.put_file(random_file(tmp_path / "b.bin", 1000)),
        lambda: bad.fetch(key, tmp_path / "c.bin"),
    ):
        with pytest.raises(BatonError) as denied:
            attempt()
        assert code_of(denied) == "blob_store_denied"
        assert "BATON_S3_ACCESS_KEY_ID" in denied.value.message and "not-the-secret" not in str(denied.value)
    assert not (tmp_path / "c.bin").exists()


def test_a_missing_bucket_is_blob_bucket_missing(s3: S3Server, tmp_path: Path) -> None:
    location = S3Location.parse(s3.blob_url("baton-no-such-bucket"))
    blobs = S3BlobStore(location, s3.access_key, s3.secret_key)
    assert not blobs.exists("sha256:" + "1" * 64)  # a HEAD cannot tell: the put says it
    with pytest.raises(BatonError) as on_put:
        blobs.put_file(random_file(tmp_path / "a.bin", 10))
    assert code_of(on_put) == "blob_bucket_missing" and "baton-no-such-bucket" in on_put.value.message
    with pytest.raises(BatonError) as on_fetch:
        blobs.fetch("sha256:" + "1" * 64, tmp_path / "out")
    assert code_of(on_fetch) == "blob_bucket_missing"


@pytest.mark.parametrize(
    "key",
    [
        "sha256:" + "../" * 21 + "a",
        "sha256:" + "0" * 62 + "/.",
        "sha256:" + "A" * 64,
        "sha256:" + "0" * 64 + "/../other",
        "sha256:" + "0" * 63,
        "md5:" + "0" * 32,
        "../../etc/passwd",
    ],
)
def test_a_hostile_key_is_refused_before_any_request(s3: S3Server, tmp_path: Path, key: str) -> None:
    with faulty_proxy(s3.endpoint) as (proxy, faults):
        blobs = store(s3, "baton-hostile", endpoint=proxy)
        before = len(faults.seen)
        for attempt in (lambda: blobs.exists(key), lambda: blobs.fetch(key, tmp_path / "out")):
            with pytest.raises(BatonError) as refused:
                attempt()
            assert code_of(refused) == "invalid_argument"
        assert faults.seen[before:] == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url",
    ["s3://bucket/../up", "s3://bucket/a//b", "s3://bucket/./a", "s3://bucket?endpoint=file:///etc", "s3:///nobucket"],
)
def test_a_hostile_blob_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(BatonError) as refused:
        S3Location.parse(url)
    assert code_of(refused) == "config_invalid"


def test_an_s3_url_without_credentials_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(BatonError) as refused:
        blob_store_for("s3://bucket", tmp_path, {})
    assert code_of(refused) == "config_invalid"


def test_a_download_cut_mid_way_resumes_where_it_stopped(s3: S3Server, tmp_path: Path) -> None:
    with faulty_proxy(s3.endpoint) as (proxy, faults):
        blobs = store(s3, "baton-cut", endpoint=proxy)
        source = random_file(tmp_path / "a.bin", 3 * MiB)
        key = blobs.put_file(source)
        faults.cut = 1
        blobs.fetch(key, tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
        gets = [line for line in faults.seen if line.startswith("GET") and "/sha256/" in line]
        assert gets[-2].endswith("range=None") and gets[-1].endswith(f"range=bytes={3 * MiB // 2}-")


def test_a_download_cut_every_time_fails_and_leaves_nothing(s3: S3Server, tmp_path: Path) -> None:
    with faulty_proxy(s3.endpoint) as (proxy, faults):
        blobs = store(s3, "baton-cut-always", endpoint=proxy, max_attempts=3)
        key = blobs.put_file(random_file(tmp_path / "a.bin", MiB))
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "back.bin").write_bytes(b"what was there before")
        faults.cut = 1000
        with pytest.raises(BatonError) as cut:
            blobs.fetch(key, tmp_path / "out" / "back.bin")
        assert code_of(cut) == "blob_store_unavailable" and "cut off 3 times" in cut.value.message
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["back.bin"]  # no partial file beside it
        assert (tmp_path / "out" / "back.bin").read_bytes() == b"what was there before"


def test_bytes_damaged_in_transit_are_caught_by_the_checksum(s3: S3Server, tmp_path: Path) -> None:
    with faulty_proxy(s3.endpoint) as (proxy, faults):
        blobs = store(s3, "baton-flip", endpoint=proxy)
        source = random_file(tmp_path / "a.bin", 200_000)
        key = blobs.put_file(source)
        faults.flip = 1  # once: read again, and right
        blobs.fetch(key, tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
        faults.flip = 1000  # always: damaged
        with pytest.raises(BatonError) as damaged:
            blobs.fetch(key, tmp_path / "again.bin")
        assert code_of(damaged) == "snapshot_not_found" and "damaged" in damaged.value.message
        assert not (tmp_path / "again.bin").exists()


def test_an_object_whose_bytes_do_not_match_its_key_is_never_handed_out(s3: S3Server, tmp_path: Path) -> None:
    blobs = store(s3, "baton-planted")
    key = "sha256:" + "ab" * 32
    raw_client(s3).put_object(Bucket="baton-planted", Key=blobs._object(key), Body=b"other bytes")  # type: ignore[attr-defined]
    assert blobs.exists(key)
    with pytest.raises(BatonError) as damaged:
        blobs.fetch(key, tmp_path / "out.bin")
    assert code_of(damaged) == "snapshot_not_found" and not (tmp_path / "out.bin").exists()


def test_a_throttled_server_is_retried_and_then_reported(s3: S3Server, tmp_path: Path) -> None:
    with faulty_proxy(s3.endpoint) as (proxy, faults):
        blobs = store(s3, "baton-throttled", endpoint=proxy, max_attempts=3)
        faults.unavailable = 2  # the HEAD of the put, then the PUT: each retried
        key = blobs.put_file(random_file(tmp_path / "a.bin", 1000))
        assert faults.unavailable == 0 and blobs.exists(key)
        faults.unavailable = 1000
        with pytest.raises(BatonError) as unavailable:
            blobs.exists(key)
        assert code_of(unavailable) == "blob_store_unavailable"
        assert sum(line.startswith("HEAD") for line in faults.seen[-3:]) == 3  # three attempts


def test_an_unreachable_endpoint_is_blob_store_unavailable(s3: S3Server, tmp_path: Path) -> None:
    with faulty_proxy(s3.endpoint) as (closed, _):
        pass  # its port is free again: nothing listens there
    blobs = S3BlobStore(S3Location.parse(f"s3://bucket?endpoint={closed}"), "a", "b", max_attempts=2)
    with pytest.raises(BatonError) as unreachable:
        blobs.exists("sha256:" + "2" * 64)
    assert code_of(unreachable) == "blob_store_unavailable" and closed in unreachable.value.message


def test_the_credentials_never_reach_an_agent(s3: S3Server, tmp_path: Path) -> None:
    parent = {"PATH": "/usr/bin", **s3.environ, "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}
    parent["AWS_SESSION_TOKEN"] = parent["BATON_S3_SESSION_TOKEN"] = "t"
    passthrough = Settings().agent_env_passthrough
    environments = [
        allowed_environment(parent, passthrough),
        claude_environment(
            run_id="r1", agent_home=tmp_path, base_url=None, api_key="k", passthrough=passthrough, parent=parent
        ),
    ]
    for environment in environments:
        assert not [name for name in environment if name.startswith(("AWS_", "BATON_S3_"))]
        assert s3.secret_key not in environment.values()


def test_moto_is_a_test_dependency_not_a_reason_to_skip() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    test_extra = pyproject.split("test = [", 1)[1].split("]\n", 1)[0]
    assert '"moto[server]==' in test_extra
