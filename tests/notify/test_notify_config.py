"""The ``[notify]`` table of baton.toml, and the signature a receiver checks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.config import WEBHOOK_EVENTS, Settings, Webhook
from baton.errors import UsageError
from baton.notify import sign, verify

SECRET = "whsec-0123456789abcdef"


@pytest.fixture(autouse=True)
def no_leftover_agent_processes() -> Iterator[None]:
    yield


def load(tmp_path: Path, toml: str) -> Settings:
    (tmp_path / "baton.toml").write_text(toml)
    return Settings.load({"BATON_HOME": str(tmp_path)})


def test_webhooks_are_read_from_the_notify_table(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        f"""
[notify]
retry_seconds = 2
[[notify.webhooks]]
url = "https://hooks.example.com/baton"
secret = "{SECRET}"
[[notify.webhooks]]
url = "http://127.0.0.1:9000/only-failures"
secret = "{SECRET}-2"
events = ["run.failed", "run.failed"]
""",
    )
    assert settings.notify_webhooks == (
        Webhook("https://hooks.example.com/baton", SECRET, WEBHOOK_EVENTS),
        Webhook("http://127.0.0.1:9000/only-failures", SECRET + "-2", ("run.failed",)),
    )
    assert settings.notify_retry_seconds == 2.0 and settings.notify_give_up_seconds == 3600.0
    assert SECRET not in repr(settings)  # a secret is not printed with the settings
    assert load(tmp_path, "").notify_webhooks == ()


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ('url = "ftp://example.com/x"\nsecret = "' + SECRET + '"', "webhook_url_invalid"),
        ('url = "https:///no-host"\nsecret = "' + SECRET + '"', "webhook_url_invalid"),
        ('url = "https://user:pw@example.com/"\nsecret = "' + SECRET + '"', "webhook_url_invalid"),
        ('secret = "' + SECRET + '"', "webhook_url_invalid"),
        ('url = "https://example.com/"', "webhook_secret_invalid"),
        ('url = "https://example.com/"\nsecret = "short"', "webhook_secret_invalid"),
        ('url = "https://example.com/"\nsecret = "' + SECRET + '"\nevents = ["run.started"]', "webhook_event_unknown"),
        ('url = "https://example.com/"\nsecret = "' + SECRET + '"\nevents = []', "webhook_event_unknown"),
        ('url = "https://example.com/"\nsecret = "' + SECRET + '"\nheaders = {}', "config_invalid"),
    ],
)
def test_a_bad_webhook_is_refused_with_its_code(tmp_path: Path, entry: str, code: str) -> None:
    with pytest.raises(UsageError) as raised:
        load(tmp_path, f"[[notify.webhooks]]\n{entry}\n")
    assert raised.value.code == code
    assert SECRET not in raised.value.message


@pytest.mark.parametrize(
    ("toml", "code"),
    [
        ('notify = "yes"', "config_invalid"),
        ("[notify]\nwebhooks = 3", "config_invalid"),
        ("[notify]\nretry_seconds = -1", "config_invalid"),
        ("[notify]\nurl = 'https://example.com/'", "config_invalid"),
        (
            "\n".join(f'[[notify.webhooks]]\nurl = "https://example.com/"\nsecret = "{SECRET}"' for _ in range(2)),
            "webhook_url_invalid",
        ),
    ],
)
def test_a_bad_notify_table_is_refused(tmp_path: Path, toml: str, code: str) -> None:
    with pytest.raises(UsageError) as raised:
        load(tmp_path, toml)
    assert raised.value.code == code


def test_a_signature_checks_the_body_the_secret_and_the_time() -> None:
    now = int(time.time())
    body = json.dumps({"id": "run.finished:run_1", "event": "run.finished", "timestamp": now}).encode()
    signature = sign(SECRET, body)
    assert signature.startswith("sha256=") and len(signature) == 7 + 64
    assert verify(SECRET, body, signature, str(now))
    assert not verify("another-secret-0123456789", body, signature, str(now))  # the wrong secret
    assert not verify(SECRET, body + b" ", signature, str(now))  # a changed body
    assert not verify(SECRET, body, signature, str(now + 1))  # a header that is not the body's time
    assert not verify(SECRET, body, None, str(now)) and not verify(SECRET, body, signature, None)
    assert not verify(SECRET, body, signature, str(now), now=now + 301)  # a replay, 5 minutes later
    assert verify(SECRET, body, signature, str(now), now=now + 299)
