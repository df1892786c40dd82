"""A throwaway S3-compatible server on loopback (moto's), for tests and benchmarks.

``with TemporaryS3() as s3:`` starts ``moto.server`` (``moto[server]`` is in the ``test`` extra)
on ``127.0.0.1`` at a free port with authentication on: its first three requests create an IAM
user, its policy and an access key, and from then on every request's SigV4 signature is checked
against that key, as S3 would. ``s3.environ`` holds the key as baton reads it
(``BATON_S3_ACCESS_KEY_ID``/``BATON_S3_SECRET_ACCESS_KEY``) and ``s3.blob_url(bucket)`` a
``BATON_BLOB_URL``; buckets are made by ``S3BlobStore.create_bucket``.

The server dies with its owner, even one killed with SIGKILL: it is started behind a small
wrapper that exits when its standard input, a pipe the owner holds, closes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["S3Server", "TemporaryS3"]

_START_SECONDS: Final = 30.0
# moto's server, stopped when the pipe on its standard input closes (the owner exited or died).
_WRAPPER: Final = (
    "import os, sys, threading\n"
    "threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()\n"
    "from moto.server import main\n"
    "main(sys.argv[1:])\n"
)
_POLICY: Final = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str

    @property
    def environ(self) -> dict[str, str]:
        return {"BATON_S3_ACCESS_KEY_ID": self.access_key, "BATON_S3_SECRET_ACCESS_KEY": self.secret_key}

    def blob_url(self, bucket: str, prefix: str = "blobs", *, region: str = "eu-west-1") -> str:
        return f"s3://{bucket}/{prefix}?endpoint={self.endpoint}&region={region}"


class TemporaryS3:
    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> S3Server:
        self._folder = tempfile.TemporaryDirectory(prefix="baton-s3-")
        log = Path(self._folder.name) / "server.log"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BATON_", "MOTO_"))}
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"  # the user, its policy, its key; then signatures count
        with log.open("wb") as output:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _WRAPPER, "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        endpoint = f"http://127.0.0.1:{port}"
        try:
            self._wait_until_up(endpoint, log)
            return S3Server(endpoint, *_access_key(endpoint))
        except BaseException:
            self._stop()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop()

    def _wait_until_up(self, endpoint: str, log: Path) -> None:
        assert self._process is not None
        deadline = time.monotonic() + _START_SECONDS
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline or self._process.poll() is not None:
                    output = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(
                        f"moto's S3 server did not start (moto[server] is in the test extra: make setup):\n{output}"
                    ) from None
                time.sleep(0.1)

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


def _access_key(endpoint: str) -> tuple[str, str]:
    import boto3

    iam = boto3.session.Session(
        aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap", region_name="us-east-1"
    ).client("iam", endpoint_url=endpoint)
    iam.create_user(UserName="baton")
    iam.put_user_policy(UserName="baton", PolicyName="s3", PolicyDocument=json.dumps(_POLICY))
    key = iam.create_access_key(UserName="baton")["AccessKey"]
    return str(key["AccessKeyId"]), str(key["SecretAccessKey"])
