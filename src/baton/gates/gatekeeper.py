"""The Gatekeeper: one decision per tool call, by policy, with its reason.

Order of evaluation (the first step that decides wins):

1. a deny rule matches → deny (``rule:<rule>``);
2. plan mode: a write to the agent's plan file (a ``.md`` directly in ``plan_dir``, Claude's
   ``<agent home>/.claude/plans``) → allow (``plan_file``); any other write or bash call → deny
   (``mode:plan``), whatever the allow rules say;
3. a write to a protected path (``.baton``, ``.claude``, ``.git`` anywhere in the workspace)
   → ask (``protected_path:<rel>``), in every other mode, bypassPermissions included;
4. an ask rule matches → ask (``rule:<rule>``);
5. allow rules allow the call → allow (``rule:<rule>``); a compound command needs every part
   allowed, possibly by different rules (``rule:<r1> & <r2>``);
6. the mode decides (``mode:<mode>``), or ``outside_workspace:<path>`` when a path outside
   the workspace is why it asks.

When the allow rules allow some parts of a compound command and not the others (``npm test |
tail -5`` with only ``Bash(npm test:*)``), the message of a decision that does not allow names
the parts no rule allows and the ``Bash(program:*)`` rules that would, once it has checked that
those rules, added, would allow the whole command. It is a hint in the message only: the
decision and its reason are the same as without it.

The Gatekeeper returns ``ask``; what ``ask`` becomes (a gate, or a denial while there are no
human gates) is the host's business. ``decide`` does no I/O besides resolving the path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

from baton.gates.commands import split_command
from baton.gates.modes import Behavior, ToolGroup, default_behavior, tool_group
from baton.gates.paths import PROTECTED_DIRS, ResolvedPath, resolve_path
from baton.gates.policy import Policy
from baton.gates.rules import CallTarget, Rule, parse_rule

__all__ = ["Decision", "Gatekeeper", "ToolCall"]

_PATH_KEYS = ("file_path", "notebook_path", "path")
# Tools whose path is optional and defaults to the workspace root.
_ROOTED_TOOLS = frozenset({"Glob", "Grep", "LS"})
# A program a hint may name in Bash(program:*); not one that runs the command it is given.
_HINT_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_RUNS_ANY_COMMAND = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "fish", "env", "sudo", "doas", "su", "xargs", "eval", "exec", "command"}
    | {"builtin", "nohup", "time", "timeout", "nice", "watch", "parallel", "ssh", "script"}
)


@dataclass(frozen=True)
class ToolCall:
    """A call as baton names it: Claude's own tool names and input (other agents are mapped)."""

    tool_name: str
    input: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str = ""
    kind: str | None = None
    """The ACP kind, for the record only: decisions never trust it."""


@dataclass(frozen=True)
class Decision:
    """``behavior`` with a machine-readable ``reason`` and a ``message`` for the agent."""

    behavior: Literal["allow", "deny", "ask"]
    reason: str
    message: str


class Gatekeeper:
    """Decides tool calls by a :class:`Policy` for one workspace.

    ``set_mode`` changes the mode in place for the rest of the run (``session/set_mode``): the
    host keeps one Gatekeeper per run. The policy itself is immutable, so a decision always
    sees one consistent policy.
    """

    def __init__(self, policy: Policy, workspace: Path, *, plan_dir: Path | None = None) -> None:
        self._policy = policy
        self._root = Path(os.path.realpath(workspace))
        # Where the agent keeps its plan (Claude: <agent home>/.claude/plans): writable while planning.
        self._plan_dir = Path(os.path.realpath(plan_dir)) if plan_dir is not None else None

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def workspace(self) -> Path:
        return self._root

    def with_plan_dir(self, plan_dir: Path) -> Gatekeeper:
        """The same policy and workspace, with the agent's plan directory writable while planning."""
        return Gatekeeper(self._policy, self._root, plan_dir=plan_dir)

    def set_mode(self, mode: str) -> None:
        """Switch the permission mode (validated: ``invalid_argument``, ``bypass_refused_as_root``)."""
        self._policy = self._policy.with_mode(mode)

    def decide(self, call: ToolCall) -> Decision:
        policy = self._policy
        name = call.tool_name
        group = tool_group(name)
        target = self._target(call, group)
        path = target.path

        if rule := _first(policy.deny, target):
            return Decision("deny", f"rule:{rule.text}", f"{name} is denied by the rule {rule.text}.")
        if policy.mode == "plan" and group == "write" and self._is_plan_file(path):
            return Decision("allow", "plan_file", f"{name} writes the plan file, which planning may do.")
        if policy.mode == "plan" and group in ("write", "bash"):
            return Decision(
                "deny",
                "mode:plan",
                f"Plan mode is read-only: {name} is not allowed while planning. "
                "Finish the plan and ask for it to be approved.",
            )
        if group == "write" and path is not None and (protected := path.protected):
            top = next(p for p in PurePosixPath(protected).parts if p.casefold() in PROTECTED_DIRS)
            return Decision(
                "ask",
                f"protected_path:{protected}",
                f"{name} on {protected} needs a human's approval: {top} is protected.",
            )
        if rule := _first(policy.ask, target):
            return Decision("ask", f"rule:{rule.text}", f"{name} needs a human's approval (rule {rule.text}).")
        if allowed_by := _allowed_by(policy.allow, target):
            texts = " & ".join(dict.fromkeys(rule.text for rule in allowed_by))
            return Decision("allow", f"rule:{texts}", f"{name} is allowed by the rule {texts}.")
        decision = self._by_mode(name, group, path)
        if decision.behavior != "allow" and (hint := self._rule_hint(target)):
            decision = replace(decision, message=f"{decision.message} {hint}")
        return decision

    def _is_plan_file(self, path: ResolvedPath | None) -> bool:
        """A Markdown file directly in the plan directory, symlinks followed (one pointing elsewhere is not)."""
        if self._plan_dir is None or path is None:
            return False
        resolved = Path(path.absolute)
        return resolved.parent == self._plan_dir and resolved.suffix == ".md"

    def _by_mode(self, name: str, group: ToolGroup, path: ResolvedPath | None) -> Decision:
        mode = self._policy.mode
        has_path = group in ("read", "search", "write")
        inside = path.inside if path is not None else not has_path
        behavior: Behavior = default_behavior(mode, group, inside_workspace=inside)
        if has_path and not inside and behavior != "allow":
            shown = path.absolute if path is not None else "?"
            reason = f"outside_workspace:{shown}" if path is not None else "unresolvable_path"
            message = f"{name} on {shown} is outside the workspace and needs a human's approval."
            if behavior == "deny":
                message = f"{name} on {shown} is outside the workspace and not allowed in {mode} mode."
            return Decision(behavior, reason, message)
        if group == "unknown":
            return Decision(
                behavior,
                f"unknown_tool:{name}",
                f"{name} is not a tool baton knows; it needs a human's approval.",
            )
        messages = {
            "allow": f"{name} is allowed in {mode} mode.",
            "ask": f"{name} needs a human's approval in {mode} mode.",
            "deny": f"{name} is not allowed in {mode} mode.",
        }
        return Decision(behavior, f"mode:{mode}", messages[behavior])

    def _rule_hint(self, target: CallTarget) -> str | None:
        """For a compound command the allow rules allow in part: the rules that would allow the rest.

        None unless some part is allowed, every other part is matched by a ``Bash(program:*)``
        rule for its own program (not one that runs other commands, nor a part writing a file),
        and the allow rules with those added allow the whole command.
        """
        command = target.command
        if target.tool_name != "Bash" or command is None or not command.parsed or len(command.parts) < 2:
            return None
        rules = [rule for rule in self._policy.allow if rule.covers_tool("Bash")]
        missing: dict[str, Rule] = {}
        unallowed: list[str] = []
        for part in command.parts:
            if any(rule.matches_part(part) for rule in rules):
                continue
            program = part.text.split(maxsplit=1)[0] if part.text.strip() else ""
            if not _HINT_PROGRAM.fullmatch(program) or program in _RUNS_ANY_COMMAND:
                return None
            rule = parse_rule(f"Bash({program}:*)")
            if not rule.matches_part(part):  # e.g. it writes a file: only a bare Bash allows that
                return None
            missing.setdefault(rule.text, rule)
            unallowed.append(f"`{part.text}`")
        if not missing or len(unallowed) == len(command.parts):
            return None
        if not _allowed_by((*self._policy.allow, *missing.values()), target):
            return None
        parts = list(dict.fromkeys(unallowed))
        rules_named = ("the rule " if len(missing) == 1 else "the rules ") + " and ".join(missing)
        them = "it" if len(parts) == 1 else "them"
        return (
            f"Part of this command is allowed by rules, but not {', '.join(parts)}: {rules_named} would allow {them}."
        )

    def _target(self, call: ToolCall, group: ToolGroup) -> CallTarget:
        data = call.input if isinstance(call.input, dict) else {}
        name = call.tool_name
        command = data.get("command")
        url = data.get("url")
        subagent = data.get("subagent_type")
        return CallTarget(
            tool_name=name,
            command=split_command(command) if name == "Bash" and isinstance(command, str) else None,
            path=self._path(name, data) if group in ("read", "search", "write") else None,
            host=_host(url) if isinstance(url, str) else None,
            subagent_type=subagent if isinstance(subagent, str) else None,
        )

    def _path(self, name: str, data: dict[str, Any]) -> ResolvedPath | None:
        raw = next((data[k] for k in _PATH_KEYS if isinstance(data.get(k), str) and data[k]), None)
        if raw is None:
            if name not in _ROOTED_TOOLS:
                return None
            raw = "."
        if name == "Glob" and isinstance(pattern := data.get("pattern"), str):
            # Glob(pattern="../../etc/*") searches wherever the pattern's literal prefix points.
            raw = str(Path(raw) / _literal_prefix(pattern))
        return resolve_path(raw, self._root)


def _allowed_by(allow: tuple[Rule, ...], target: CallTarget) -> list[Rule]:
    """The allow rules that together allow the call (empty: not allowed by rules)."""
    rules = [rule for rule in allow if rule.covers_tool(target.tool_name)]
    if target.tool_name != "Bash" or target.command is None:
        return [rule for rule in rules if rule.matches(target, restrictive=False)][:1]
    if bare := [rule for rule in rules if rule.kind == "any"]:
        return bare[:1]
    command = target.command
    if not command.parsed or not command.parts:
        return []
    used: list[Rule] = []
    for part in command.parts:
        rule = next((r for r in rules if r.matches_part(part)), None)
        if rule is None:
            return []
        used.append(rule)
    return used


def _first(rules: tuple[Rule, ...], target: CallTarget) -> Rule | None:
    return next((rule for rule in rules if rule.matches(target, restrictive=True)), None)


def _host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _literal_prefix(pattern: str) -> str:
    segments = []
    for segment in pattern.split("/"):
        if any(c in segment for c in "*?[{"):
            break
        segments.append(segment)
    return "/".join(segments) or ("/" if pattern.startswith("/") else ".")
