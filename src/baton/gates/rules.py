"""Permission rules ``Tool`` and ``Tool(specifier)``: parsing and matching.

    Bash                     every Bash call
    Bash(npm test)           exactly that command
    Bash(npm test:*)         ``npm test`` and anything after it, on a word boundary
    Read(src/**)             a gitignore-style glob on the workspace-relative path
    Edit(//etc/hosts)        ``//`` starts an absolute path; ``~/`` the home directory
    WebFetch(domain:x.org)   that host; ``domain:*.x.org`` its subdomains
    Task(Explore)            that subagent type (``Task`` and ``Agent`` are one tool)
    mcp__server              every tool of an MCP server (also ``mcp__server__*``)
    mcp__server__tool        one MCP tool
    mcp__git*__create_*      MCP tools by glob (``*`` any run of characters, ``?`` one)

``Read`` names the whole read family (Read, NotebookRead, LS, Glob, Grep); ``Edit`` and
``Write`` the whole write family (Write, Edit, MultiEdit, NotebookEdit). Other names match
their own tool only. How a call is matched (its command parts, its path) is worked out once per
call by the Gatekeeper and handed over as a :class:`CallTarget`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from baton.gates.commands import CommandPart, ShellCommand
from baton.gates.modes import tool_group
from baton.gates.paths import ResolvedPath

__all__ = ["CallTarget", "Rule", "RuleSyntaxError", "parse_rule"]

RuleKind = Literal["any", "command", "path", "domain", "subagent", "mcp"]

_RULE = re.compile(r"(?P<tool>[A-Za-z][A-Za-z0-9_*?-]*)(?:\((?P<spec>.*)\))?", re.DOTALL)
_READ_FAMILY = frozenset({"Read", "NotebookRead", "LS", "Glob", "Grep"})
_WRITE_FAMILY = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
_PATH_TOOLS = _READ_FAMILY | _WRITE_FAMILY
_PATH_GROUPS = frozenset({"read", "search", "write"})
_AGENT_TOOLS = frozenset({"Task", "Agent"})
# The tools that take a specifier, by their lower-case name (a suggestion for `bash(ls)`).
_SPECIFIED_TOOLS = {tool.lower(): tool for tool in ("Bash", "WebFetch", *_PATH_TOOLS, *_AGENT_TOOLS)}
_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*\s+")
_WRAPPERS = ("env ", "command ", "builtin ", "exec ", "nohup ", "time ")


class RuleSyntaxError(ValueError):
    """A rule that does not parse; the message says why (the caller adds which rule)."""


@dataclass(frozen=True)
class CallTarget:
    """What rules look at in one call, computed once by the Gatekeeper."""

    tool_name: str
    command: ShellCommand | None = None
    path: ResolvedPath | None = None
    host: str | None = None
    subagent_type: str | None = None


@dataclass(frozen=True)
class Rule:
    """One parsed rule; ``text`` is the rule as written (it is what decisions report)."""

    text: str
    tool: str
    kind: RuleKind
    specifier: str | None = None
    source: str = "run"
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)
    _absolute: bool = field(default=False, repr=False, compare=False)

    def covers_tool(self, tool_name: str) -> bool:
        """Whether this rule speaks about ``tool_name`` at all (specifier aside)."""
        if self.kind == "mcp":
            if self._pattern is not None:  # a glob: over the whole name
                return self._pattern.fullmatch(tool_name) is not None
            return tool_name == self.tool or tool_name.startswith(self.tool + "__")
        if self.tool == "Read":
            return tool_group(tool_name) in ("read", "search")
        if self.tool in ("Edit", "Write"):
            return tool_group(tool_name) == "write"
        if self.tool in _AGENT_TOOLS:
            return tool_name in _AGENT_TOOLS
        return tool_name == self.tool

    def matches(self, target: CallTarget, *, restrictive: bool) -> bool:
        """Whether the rule matches the call.

        ``restrictive`` (deny and ask rules) matches generously: any part of a compound
        command, the path as written as well as resolved. Allow rules match strictly; for
        commands, allowing is decided part by part with :meth:`matches_part`.
        """
        if not self.covers_tool(target.tool_name):
            return False
        if self.kind == "any" and not restrictive and tool_group(target.tool_name) in _PATH_GROUPS:
            # Allowing a file tool never reaches outside the workspace without an absolute rule.
            return target.path is not None and target.path.inside
        if self.kind in ("any", "mcp"):
            return True
        if self.kind == "command":
            if target.command is None:
                return False
            if restrictive:
                return any(self._matches_text(t) for p in target.command.parts for t in _variants(p.text))
            return target.command.parsed and all(self.matches_part(p) for p in target.command.parts)
        if self.kind == "path":
            return target.path is not None and self._matches_path(target.path, restrictive)
        if self.kind == "domain":
            return target.host is not None and self._matches_host(target.host)
        return target.subagent_type == self.specifier

    def matches_part(self, part: CommandPart) -> bool:
        """Whether this command rule allows one simple command of a compound one."""
        if self.kind == "any":
            return True
        return self.kind == "command" and not part.writes_file and self._matches_text(part.text)

    def _matches_text(self, command: str) -> bool:
        assert self.specifier is not None
        if self.specifier.endswith(":*"):
            prefix = self.specifier[:-2]
            return command == prefix or (command.startswith(prefix) and command[len(prefix)] in " \t")
        return command == self.specifier

    def _matches_path(self, path: ResolvedPath, restrictive: bool) -> bool:
        assert self._pattern is not None
        candidates: list[str | None]
        if self._absolute:
            candidates = [path.absolute, path.lexical] if restrictive else [path.absolute]
        else:
            candidates = [path.relative] + ([path.lexical_relative] if restrictive else [])
        return any(c is not None and self._pattern.fullmatch(c) for c in candidates)

    def _matches_host(self, host: str) -> bool:
        assert self.specifier is not None
        domain = self.specifier.removeprefix("domain:")
        if domain.startswith("*."):
            return host.endswith(domain[1:])
        return host == domain


def parse_rule(text: str, *, source: str = "run") -> Rule:
    """Parse one rule (raises :class:`RuleSyntaxError`)."""
    written = text.strip()
    found = _RULE.fullmatch(written)
    if found is None:
        raise RuleSyntaxError("expected Tool or Tool(specifier)")
    tool, spec = found["tool"], found["spec"]
    if tool.startswith("mcp__"):
        return _mcp_rule(written, tool, spec, source)
    if "*" in tool or "?" in tool:
        raise RuleSyntaxError("'*' is not allowed in a tool name (only in an MCP tool's: mcp__server__*)")
    if spec is None:
        return Rule(written, tool, "any", source=source)
    if not spec.strip():
        raise RuleSyntaxError(f"empty specifier; write a bare {tool} to match every call")
    if tool == "Bash":
        return Rule(written, tool, "command", _command_spec(spec), source)
    if tool in _PATH_TOOLS:
        pattern, absolute = _compile_glob(spec)
        return Rule(written, tool, "path", spec, source, pattern, absolute)
    if tool == "WebFetch":
        return Rule(written, tool, "domain", _domain_spec(spec), source)
    if tool in _AGENT_TOOLS:
        return Rule(written, tool, "subagent", spec.strip(), source)
    known = _SPECIFIED_TOOLS.get(tool.lower())
    if known is not None:  # `bash(ls)`: tool names are case-sensitive
        raise RuleSyntaxError(f"tool names are case-sensitive: did you mean {known}({spec})?")
    raise RuleSyntaxError(f"{tool} takes no specifier; write a bare {tool}")


def _mcp_rule(written: str, tool: str, spec: str | None, source: str) -> Rule:
    if spec is not None:
        raise RuleSyntaxError("MCP rules take no specifier: mcp__server or mcp__server__tool")
    rest = tool.removeprefix("mcp__").removesuffix("__*")
    if not rest.partition("__")[0] or not rest[0].isalnum():
        raise RuleSyntaxError("expected mcp__server, mcp__server__* or mcp__server__tool (globs: * and ?)")
    if "*" in rest or "?" in rest:  # `*` any run of characters (`__` too), `?` one
        glob = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in tool)
        return Rule(written, tool, "mcp", source=source, _pattern=re.compile(glob, re.DOTALL))
    return Rule(written, "mcp__" + rest, "mcp", source=source)


def _command_spec(spec: str) -> str:
    spec = spec.strip()
    if spec.endswith(":*"):
        prefix = spec[:-2].strip()
        if not prefix:
            raise RuleSyntaxError("':*' needs a command before it, e.g. Bash(npm test:*)")
        if ":*" in prefix:
            raise RuleSyntaxError("':*' may only end the pattern")
        return prefix + ":*"
    if ":*" in spec:
        raise RuleSyntaxError("':*' may only end the pattern")
    return spec


def _domain_spec(spec: str) -> str:
    if not spec.startswith("domain:"):
        raise RuleSyntaxError("expected WebFetch(domain:HOST)")
    host = spec.removeprefix("domain:").strip().lower()
    if not _HOST.fullmatch(host):
        raise RuleSyntaxError(f"{host!r} is not a host name")
    return "domain:" + host


def _compile_glob(spec: str) -> tuple[re.Pattern[str], bool]:
    """A gitignore-style glob as a regex; True when it names absolute paths."""
    pattern = spec.strip()
    absolute = False
    if pattern.startswith("//"):
        pattern, absolute = pattern[1:], True
    elif pattern.startswith("~/"):
        pattern, absolute = str(Path.home()) + pattern[1:], True
    else:
        pattern = pattern.removeprefix("./")
        anchored = "/" in pattern.rstrip("/")
        pattern = pattern.lstrip("/")
        if not anchored:
            pattern = "**/" + pattern
    if pattern.endswith("/"):
        pattern += "**"
    segments = pattern.split("/")
    if ".." in segments:
        raise RuleSyntaxError("'..' is not allowed in a path pattern; use //absolute/path")
    if not pattern.strip("/"):
        raise RuleSyntaxError("empty path pattern")
    # A pattern that names a directory covers everything inside it, as in gitignore.
    return re.compile(_glob_regex(segments) + "(?:/.*)?", re.DOTALL), absolute


def _glob_regex(segments: list[str]) -> str:
    out = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:.*/)?"
            continue
        out += _segment_regex(segment) + ("" if last else "/")
    return out


def _segment_regex(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "\\" and i + 1 < len(segment):
            i += 1
            out += re.escape(segment[i])
        elif c == "[" and (close := segment.find("]", i + 2)) > 0:
            body = segment[i + 1 : close]
            negate = body[:1] in ("!", "^")
            chars = "".join(ch if ch == "-" else re.escape(ch) for ch in body[negate:])
            out += "[" + ("^" if negate else "") + chars + "]"
            i = close
        else:
            out += re.escape(c)
        i += 1
    return out


def _variants(command: str) -> list[str]:
    """The command as written and as run, for deny/ask rules (``X=1 env /bin/rm`` → ``rm``)."""
    found = [command]
    current = command
    while True:
        stripped = _ASSIGNMENT.sub("", current, count=1) if _ASSIGNMENT.match(current) else current
        for wrapper in _WRAPPERS:
            if stripped.startswith(wrapper):
                stripped = stripped[len(wrapper) :].lstrip()
        if stripped == current:
            break
        current = stripped
        found.append(current)
    first, _, rest = current.partition(" ")
    if "/" in first:
        found.append((first.rsplit("/", 1)[1] + " " + rest).rstrip())
    return found
