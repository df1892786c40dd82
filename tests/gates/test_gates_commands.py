"""Splitting shell commands into the simple commands rules are matched against."""

from __future__ import annotations

import pytest

from baton.gates.commands import split_command


def texts(command: str) -> list[str]:
    return sorted(part.text for part in split_command(command).parts)


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        ("npm test", ["npm test"]),
        ("npm test && rm -rf /", ["npm test", "rm -rf /"]),
        ("a || b", ["a", "b"]),
        ("a; b;c", ["a", "b", "c"]),
        ("a | b |& c", ["a", "b", "c"]),
        ("a & b", ["a", "b"]),
        ("a\nb", ["a", "b"]),
        ("(cd x && make)", ["cd x", "make"]),
        ("echo $(rm -rf /)", ["echo $(rm -rf /)", "rm -rf /"]),
        ("echo `whoami`", ["echo `whoami`", "whoami"]),
        ('echo "$(id)"', ['echo "$(id)"', "id"]),
        ("diff <(ls a) >(ls b)", ["diff <(ls a) >(ls b)", "ls a", "ls b"]),
        ("echo $(a $(b))", ["a $(b)", "b", "echo $(a $(b))"]),
        ("echo 'a && b; c'", ["echo 'a && b; c'"]),
        ('echo "a | b"', ['echo "a | b"']),
        ("echo '$(not run)'", ["echo '$(not run)'"]),
        ('echo "\\$(not run)"', ['echo "\\$(not run)"']),
        ("echo a\\;b", ["echo a\\;b"]),
        ("find . -exec rm {} \\;", ["find . -exec rm {} \\;"]),
        ("echo $'it\\'s' ; ls", ["echo $'it\\'s'", "ls"]),
        ("  ", []),
    ],
)
def test_parts(command: str, parts: list[str]) -> None:
    found = split_command(command)
    assert found.parsed
    assert texts(command) == sorted(parts)


@pytest.mark.parametrize("command", ["echo 'open", 'echo "open', "echo $(open", "a )", "(a", "echo `x"])
def test_unparseable(command: str) -> None:
    assert not split_command(command).parsed


def test_unparseable_still_splits_for_deny_rules() -> None:
    found = split_command("echo 'x; rm -rf /")
    assert "rm -rf /" in [part.text for part in found.parts]


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("npm test > out.txt", True),
        ("npm test >> log", True),
        ("npm test &> all", True),
        ("npm test >| f", True),
        ("npm test 2>&1", False),
        ("npm test >/dev/null 2>&1", False),
        ("npm test 2> /dev/null", False),
        ("sort < input", False),
        ("cat <<EOF", False),
        ("echo '>' x", False),
    ],
)
def test_redirections(command: str, writes: bool) -> None:
    (part,) = split_command(command).parts
    assert part.writes_file is writes
    assert part.text == command
