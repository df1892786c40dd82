"""Split a shell command into the simple commands a ``Bash(...)`` rule is matched against.

``npm test && rm -rf /`` is two commands; ``echo $(rm -rf /)`` is two as well (the
substitution runs). The splitter understands quotes (``'…'``, ``"…"``, ``$'…'``), backslash
escapes, the separators ``&& || ; | & ( )`` and newlines, command substitution (``$(…)``,
backticks, ``<(…)``, ``>(…)``) and redirections. It errs on the side of more parts: anything it
does not understand (an unterminated quote, an unbalanced parenthesis, a ``case`` statement)
makes the command *unparsed*, which no command rule can allow.

A part that redirects output to a file (``> out``, ``>> log``, ``&> f``; not ``2>&1`` or
``/dev/null``) is flagged ``writes_file``: the file it writes is not named by the rule, so only
a bare ``Bash`` allows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CommandPart", "ShellCommand", "split_command"]

_SEPARATORS = frozenset(";&|()\n")
_WORD_END = frozenset(" \t;&|()<>\n")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_NAIVE_SPLIT = re.compile(r"&&|\|\||[;&|()\n`]|\$\(")


@dataclass(frozen=True)
class CommandPart:
    """One simple command as written (``text``), and whether it redirects into a file."""

    text: str
    writes_file: bool = False


@dataclass(frozen=True)
class ShellCommand:
    """The parts of a command line; ``parsed`` is False when the splitter gave up."""

    text: str
    parts: tuple[CommandPart, ...]
    parsed: bool


class _Unparseable(Exception):
    pass


def split_command(command: str) -> ShellCommand:
    """Every simple command ``command`` runs, substitutions included."""
    try:
        parts, end = _Parser(command).parse(0, closing=None)
    except _Unparseable:
        # Still give deny/ask rules something to look at: a quote-blind split.
        naive = tuple(CommandPart(p.strip()) for p in _NAIVE_SPLIT.split(command) if p.strip())
        return ShellCommand(command, naive or (CommandPart(command.strip()),), parsed=False)
    assert end == len(command)
    return ShellCommand(command, tuple(parts), parsed=True)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.found: list[CommandPart] = []

    def parse(self, i: int, closing: str | None) -> tuple[list[CommandPart], int]:
        """Parts from ``i`` up to ``closing`` (``)`` or a backtick; None: end of text)."""
        text = self.text
        parts: list[CommandPart] = []
        start: int | None = None
        end = i
        writes = False
        depth = 0

        def finish() -> None:
            nonlocal start, writes
            if start is not None:
                parts.append(CommandPart(text[start:end], writes))
            start, writes = None, False

        while i < len(text):
            c = text[i]
            if c in " \t":
                i += 1
            elif (c == "`" and closing == "`") or (c == ")" and closing == ")" and depth == 0):
                finish()
                return parts, i + 1
            elif c in "<>" and text.startswith("(", i + 1):
                if start is None:
                    start = i
                inner, i = self.parse(i + 2, closing=")")
                parts.extend(inner)
                end = i
            elif c in "<>" or (c == "&" and text.startswith(">", i + 1)):
                if start is None:
                    start = i
                op_end = _redirect_end(text, i)
                op = text[i:op_end]
                i = op_end
                while i < len(text) and text[i] in " \t":
                    i += 1
                target_start = i
                i = self._word(i, closing, parts)
                end = i
                target = text[target_start:i]
                if ">" in op and not _harmless_target(op, target):
                    writes = True
            elif c in _SEPARATORS:
                finish()
                if c == "(":
                    depth += 1
                elif c == ")":
                    if depth == 0:
                        raise _Unparseable
                    depth -= 1
                i += 1
            else:
                if start is None:
                    start = i
                i = self._word(i, closing, parts)
                end = i
        if closing is not None or depth:
            raise _Unparseable
        finish()
        return parts, i

    def _word(self, i: int, closing: str | None, parts: list[CommandPart]) -> int:
        """Index after the word at ``i``; substitutions inside it are added to ``parts``."""
        text = self.text
        while i < len(text) and text[i] not in _WORD_END:
            c = text[i]
            if c == "\\":
                i += 2
            elif c == "'":
                i = _closing_quote(text, i + 1)
            elif c == "$" and text.startswith("'", i + 1):
                i = _ansi_quote_end(text, i + 2)
            elif c == '"':
                i = self._double_quoted(i + 1, parts)
            elif c == "$" and text.startswith("(", i + 1):
                inner, i = self.parse(i + 2, closing=")")
                parts.extend(inner)
            elif c == "`":
                if closing == "`":
                    return i
                inner, i = self.parse(i + 1, closing="`")
                parts.extend(inner)
            else:
                i += 1
        if i > len(text):
            raise _Unparseable
        return i

    def _double_quoted(self, i: int, parts: list[CommandPart]) -> int:
        text = self.text
        while i < len(text):
            c = text[i]
            if c == '"':
                return i + 1
            if c == "\\":
                i += 2
            elif c == "$" and text.startswith("(", i + 1):
                inner, i = self.parse(i + 2, closing=")")
                parts.extend(inner)
            elif c == "`":
                inner, i = self.parse(i + 1, closing="`")
                parts.extend(inner)
            else:
                i += 1
        raise _Unparseable


def _closing_quote(text: str, i: int) -> int:
    close = text.find("'", i)
    if close < 0:
        raise _Unparseable
    return close + 1


def _ansi_quote_end(text: str, i: int) -> int:
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "'":
            return i + 1
        else:
            i += 1
    raise _Unparseable


def _redirect_end(text: str, i: int) -> int:
    for op in ("&>>", "<<<", "<<-", ">>", ">|", ">&", "<<", "<>", "<&", "&>", ">", "<"):
        if text.startswith(op, i):
            return i + len(op)
    raise AssertionError("not a redirection")  # pragma: no cover


def _harmless_target(op: str, target: str) -> bool:
    if op in (">&", "<&") and (target.isdigit() or target in ("-", "")):
        return True
    return target.strip("'\"") in _HARMLESS_TARGETS
