"""Rule sources: the run, the configuration, and the repository's policy as committed at HEAD."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from baton.errors import UsageError
from baton.gates import Gatekeeper, Policy, Rule, ToolCall

GIT = ["-c", "user.name=baton tests", "-c", "user.email=tests@baton.invalid", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *GIT, *args], check=True, capture_output=True)


def commit(repo: Path, files: dict[str, str], message: str = "change") -> None:
    for name, text in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


POLICY = """\
[permissions]
allow = ["Bash(npm test:*)"]
deny = ["Bash(curl:*)"]
ask = ["WebFetch"]
"""


def texts(rules: tuple[Rule, ...]) -> list[str]:
    return [rule.text for rule in rules]


def test_no_commit_means_no_rules(repo: Path) -> None:
    (repo / ".baton").mkdir()
    (repo / ".baton" / "policy.toml").write_text(POLICY)
    policy = Policy.build("default", repo=repo)
    assert (policy.allow, policy.deny, policy.ask, policy.ignored) == ((), (), (), ())


def test_no_file_means_no_rules(repo: Path) -> None:
    commit(repo, {"README.md": "hi\n"})
    assert Policy.build("default", repo=repo).deny == ()


def test_untrusted_repository_adds_only_deny_and_ask(repo: Path, caplog: pytest.LogCaptureFixture) -> None:
    commit(repo, {".baton/policy.toml": POLICY})
    with caplog.at_level(logging.WARNING, logger="baton.gates.policy"):
        policy = Policy.build("default", deny=["Bash(rm:*)"], repo=repo)
    assert texts(policy.deny) == ["Bash(rm:*)", "Bash(curl:*)"]
    assert [rule.source for rule in policy.deny] == ["run", "repo"]
    assert texts(policy.ask) == ["WebFetch"]
    assert policy.allow == ()
    assert texts(policy.ignored) == ["Bash(npm test:*)"]
    assert "Bash(npm test:*)" in caplog.text
    gate = Gatekeeper(policy, repo)
    assert gate.decide(ToolCall("Bash", {"command": "npm test"})).reason == "mode:default"
    assert gate.decide(ToolCall("Bash", {"command": "curl x"})).reason == "rule:Bash(curl:*)"


def test_trusted_repository_allow_rules_count(repo: Path) -> None:
    commit(repo, {".baton/policy.toml": POLICY})
    policy = Policy.build("default", repo=repo, trusted_repo=True)
    assert texts(policy.allow) == ["Bash(npm test:*)"]
    assert policy.ignored == ()
    decision = Gatekeeper(policy, repo).decide(ToolCall("Bash", {"command": "npm test"}))
    assert (decision.behavior, decision.reason) == ("allow", "rule:Bash(npm test:*)")


def test_working_tree_changes_are_ignored(repo: Path) -> None:
    commit(repo, {".baton/policy.toml": POLICY})
    (repo / ".baton" / "policy.toml").write_text('[permissions]\ndeny = []\nallow = ["Bash"]\n')
    git(repo, "add", ".baton/policy.toml")  # staged is not committed either
    policy = Policy.build("default", repo=repo, trusted_repo=True)
    assert texts(policy.deny) == ["Bash(curl:*)"]
    assert texts(policy.allow) == ["Bash(npm test:*)"]


def test_uncommitted_file_is_ignored_and_malformed_working_tree_is_harmless(repo: Path) -> None:
    commit(repo, {"README.md": "hi\n"})
    (repo / ".baton").mkdir()
    (repo / ".baton" / "policy.toml").write_text("not [toml")
    assert Policy.build("default", repo=repo).deny == ()


def test_later_commit_is_read(repo: Path) -> None:
    commit(repo, {".baton/policy.toml": POLICY})
    commit(repo, {".baton/policy.toml": '[permissions]\ndeny = ["Bash(git push:*)"]\n'})
    assert texts(Policy.build("default", repo=repo).deny) == ["Bash(git push:*)"]


@pytest.mark.parametrize(
    "text",
    [
        "not [toml",
        "permissions = 3\n",
        "[permissions]\ndeny = 'Bash'\n",
        "[permissions]\ndeny = [1]\n",
        "[permissions]\ndenied = ['Bash']\n",
        "[permissions]\ndeny = ['Bash(:*)']\n",
    ],
)
def test_malformed_committed_file(repo: Path, text: str) -> None:
    commit(repo, {".baton/policy.toml": text})
    with pytest.raises(UsageError) as caught:
        Policy.build("default", repo=repo)
    assert caught.value.code == "config_invalid"
    assert ".baton/policy.toml" in caught.value.message


def test_invalid_utf8(repo: Path) -> None:
    (repo / ".baton").mkdir()
    (repo / ".baton" / "policy.toml").write_bytes(b"[permissions]\ndeny = ['\xff']\n")
    commit(repo, {})
    with pytest.raises(UsageError) as caught:
        Policy.build("default", repo=repo)
    assert caught.value.code == "config_invalid"


def test_other_tables_are_allowed(repo: Path) -> None:
    commit(repo, {".baton/policy.toml": '[future]\nx = 1\n[permissions]\nask = ["Bash"]\n'})
    assert texts(Policy.build("default", repo=repo).ask) == ["Bash"]


def test_not_a_git_repository(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        Policy.build("default", repo=tmp_path)
    assert caught.value.code == "invalid_argument"


def test_configuration_rules(repo: Path) -> None:
    commit(repo, {".baton/policy.toml": POLICY})
    policy = Policy.build(
        "acceptEdits",
        allow=["Read"],
        config_rules={"allow": ["WebSearch"], "deny": ["Write(secrets/**)"]},
        repo=repo,
    )
    assert texts(policy.allow) == ["Read", "WebSearch"]
    assert texts(policy.deny) == ["Write(secrets/**)", "Bash(curl:*)"]
    assert policy.mode == "acceptEdits"


@pytest.mark.parametrize(
    "config",
    [{"allow": ["Bash(:*)"]}, {"allow": "Bash"}, {"permit": ["Bash"]}, {"deny": [3]}],
)
def test_invalid_configuration_rules(config: dict[str, object]) -> None:
    with pytest.raises(UsageError) as caught:
        Policy.build("default", config_rules=config)  # type: ignore[arg-type]
    assert caught.value.code == "config_invalid"


def test_with_mode_keeps_the_rules() -> None:
    policy = Policy.build("default", deny=["Bash"])
    planned = policy.with_mode("plan")
    assert (planned.mode, planned.deny, policy.mode) == ("plan", policy.deny, "default")
