"""The agents baton knows: how to install and start each one, and what it asks before acting.

Each :class:`AgentEntry` records the npm package and pinned version (installed by
``make setup`` into ``agents/node_modules``), the command, the tool-name mapping onto baton's
tools (so policy rules mean the same for every agent), the ``bound_input`` extractor (what a
human must see of a call; its RFC 8785 hash binds a decision to it), and the **mode matrix**:
the agent's native permission settings, each with the calls that reach baton's Gatekeeper and
the calls the agent makes *without asking* (as probe calls in baton's names).

A policy (mode + rules) is enforceable on an agent when, for one of its native settings, the
Gatekeeper allows every call the agent would make unasked under it; baton runs the agent with
the first such setting (fewest round trips first) and refuses the run otherwise with
``mode_not_enforceable`` and the calls that would escape. See docs/agents.md for the evidence.

``applies_edits`` says whether the agent runs the input a human edited when approving a call
(``updated_input``); :func:`applies_edits` answers it for a run's agent as stored, and an edited
approval for any other agent is refused (``edit_not_supported``, baton.gates.ledger).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import rfc8785

from baton.agents import AGENTS_DIR
from baton.agents.claude_acp import ClaudeAcpSetting, claude_acp_command
from baton.agents.codex import CodexSetting, codex_command
from baton.agents.command import COMMAND_AGENT, acp_bound_input, acp_tool_calls, command_launch
from baton.agents.gemini import GeminiSetting, gemini_command
from baton.agents.kilo import kilo_binary, kilo_command
from baton.agents.opencode import OpenCodeSetting, opencode_annotation, opencode_binary, opencode_command
from baton.agents.qwen import QWEN_TOOLS, QwenSetting, qwen_command, qwen_tool_name
from baton.agents.recipe import npm_arch
from baton.agents.subprocess import AgentCommand, LaunchContext
from baton.errors import RefusedError
from baton.events.commands import command_string
from baton.gates import MODES, Decision, Gatekeeper, Policy, ToolCall, parse_rule

__all__ = [
    "AGENTS",
    "AGENTS_DIR",
    "CLAUDE_ACP",
    "GEMINI",
    "GEMINI_SAFE_COMMANDS",
    "KILO",
    "OPENCODE",
    "QWEN",
    "AgentEntry",
    "NativeSetting",
    "Probe",
    "applies_edits",
    "bound_input_hash",
    "choose_setting",
    "claude_acp_bound_input",
    "claude_acp_tool_calls",
    "codex_bound_input",
    "codex_tool_calls",
    "command_entry",
    "gemini_bound_input",
    "gemini_tool_calls",
    "get_agent",
    "qwen_annotation",
    "qwen_mcp_call",
    "qwen_tool_calls",
]


WORKSPACE = "{workspace}"  # placeholder in probe paths, replaced by the run's workspace


@dataclass(frozen=True)
class Probe:
    """One kind of call an agent makes without asking, as a call baton can decide."""

    description: str
    tool_name: str
    input: Mapping[str, str]

    def call(self, workspace: Path) -> ToolCall:
        filled = {key: value.replace(WORKSPACE, str(workspace)) for key, value in self.input.items()}
        return ToolCall(self.tool_name, filled, "probe")


@dataclass(frozen=True)
class NativeSetting:
    """One native permission setting of an agent and what it makes the agent ask."""

    name: str
    native: str  # the agent's own words for it
    reaches_gatekeeper: str
    unasked: tuple[Probe, ...]
    evidence: str  # the test that proves the row against the real agent
    config: Any = None  # the agent-specific configuration (CodexSetting for codex)


@dataclass(frozen=True)
class AgentEntry:
    name: str
    package: str | None  # npm package, None for an agent bundled with baton
    version: str
    command: tuple[str, ...]  # relative to AGENTS_DIR for npm agents
    env_recipe: str
    config_recipe: str
    tool_names: Mapping[str, str]  # the agent's tool → baton's tool
    bound_input: Callable[[dict[str, Any]], dict[str, Any]]
    settings: tuple[NativeSetting, ...]  # preference order: fewest permission round trips first
    tool_calls: Callable[[str, str | None, dict[str, Any]], list[ToolCall]] | None = None
    launch: Callable[[LaunchContext, Path], AgentCommand] | None = None
    reports_cost: bool = False
    provider: str = "openai"  # whose model API it calls: openai | anthropic | gemini (credentials, --scenario)
    client_fs: bool = True  # offer the host's fs/* (confined to the workspace) to the agent
    # extra ``_meta.baton`` fields for a tool call or update, before it is logged (baton.acp.host.annotate)
    annotation: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Runs the input a human edited on approval (updated_input) instead of the one it proposed.
    # An ACP agent has no such field in its permission answer (only options), so it cannot.
    applies_edits: bool = False
    # The repository's instruction files the agent is given, in order (docs/agents.md "Repository
    # instructions"): read from the run's base commit, for a trusted repository only, and handed
    # over through the agent's system-prompt channel (its launch recipe, LaunchContext.instructions).
    # Empty: the agent has no such channel here, and is given none.
    instruction_files: tuple[str, ...] = ()
    # (tool call as described, the run's MCP server names) → (server, tool) when the permission
    # request is the agent's own for a tool of a server baton handed it (docs/agents.md "MCP
    # servers"): that call reaches baton's proxy, which decides it, so the host answers it allow
    # (reason mcp_proxy) instead of deciding it twice. None: the agent's requests are decided as
    # they come.
    mcp_call: Callable[[dict[str, Any], frozenset[str]], tuple[str, str] | None] | None = None

    def executable(self) -> Path | None:
        """The installed command, or None when the package is not installed."""
        if self.package is None:
            return None
        path = Path(self.command[0]) if Path(self.command[0]).is_absolute() else AGENTS_DIR / self.command[0]
        return path if path.is_file() else None

    def installed_version(self) -> str | None:
        if self.package is None:
            return self.version
        manifest = AGENTS_DIR / "node_modules" / self.package / "package.json"
        if not manifest.is_file():
            return None
        version = json.loads(manifest.read_text()).get("version")
        return str(version) if version else None

    def mode_map(self) -> dict[str, str | None]:
        """baton mode (no rules) → the native setting it runs under; None: not enforceable."""
        chosen: dict[str, str | None] = {}
        for mode in MODES:
            policy = Policy.build(mode, agent_runs_unprivileged=True)
            try:
                chosen[mode] = choose_setting(self, Gatekeeper(policy, AGENTS_DIR)).name
            except RefusedError:
                chosen[mode] = None
        return chosen

    def describe(self) -> dict[str, Any]:
        """The ``baton agents --json`` object."""
        installed = self.package is None or self.executable() is not None
        return {
            "name": self.name,
            "installed": installed,
            "version": self.installed_version() if self.package else self.version,
            "package": f"{self.package}@{self.version}" if self.package else None,
            "command": [str(AGENTS_DIR / self.command[0]), *self.command[1:]] if self.package else list(self.command),
            "modes": self.mode_map(),
            "native_settings": [
                {
                    "native": setting.name,
                    "setting": setting.native,
                    "reaches_gatekeeper": setting.reaches_gatekeeper,
                    "unasked": [probe.description for probe in setting.unasked],
                    "evidence": setting.evidence,
                }
                for setting in self.settings
            ],
            "tools": dict(self.tool_names),
            "applies_edits": self.applies_edits,
            "instruction_files": list(self.instruction_files),
        }


def bound_input_hash(bound: Mapping[str, Any]) -> str:
    """sha256 of the RFC 8785 (JCS) canonical JSON of a ``bound_input``."""
    return hashlib.sha256(rfc8785.dumps(dict(bound))).hexdigest()


def choose_setting(entry: AgentEntry, gatekeeper: Gatekeeper) -> NativeSetting:
    """The first native setting under which everything the agent does unasked is allowed; else
    ``mode_not_enforceable`` in one line, with the mode or rule that would be enforceable."""
    reasons: list[str] = []
    escapes: list[tuple[Probe, Decision]] = []
    for setting in entry.settings:
        escaping = _escaping(setting, gatekeeper)
        if not escaping:
            return setting
        said = [f"{probe.description} ({decision.behavior}, {decision.reason})" for probe, decision in escaping]
        reasons.append(
            f"under {setting.name} ({setting.native}) {entry.name} would, without asking: " + "; ".join(said)
        )
        if not escapes or len(escaping) < len(escapes):
            escapes = escaping
    mode = gatekeeper.policy.mode
    shown = "; ".join(
        f"{probe.description} ({decision.behavior}, {decision.reason})" for probe, decision in escapes[:1]
    )
    more = f" and {len(escapes) - 1} more call{'s' if len(escapes) > 2 else ''}" if len(escapes) > 1 else ""
    hint = _enforceable_hint(entry, gatekeeper)
    if entry.name != COMMAND_AGENT:
        hint += f" (`baton agents {entry.name}` lists what it does unasked)"
    raise RefusedError(
        "mode_not_enforceable",
        f"{entry.name} cannot be made to ask for everything mode {mode} gates: it would, without asking, "
        f"{shown}{more}; {hint}",
        details={"agent": entry.name, "mode": mode, "reasons": reasons, "hint": hint},
    )


def _escaping(setting: NativeSetting, gatekeeper: Gatekeeper) -> list[tuple[Probe, Decision]]:
    """The calls the agent makes unasked under ``setting`` that the policy would not allow."""
    decided = ((probe, gatekeeper.decide(probe.call(gatekeeper.workspace))) for probe in setting.unasked)
    return [(probe, decision) for probe, decision in decided if decision.behavior != "allow"]


def _enforceable(entry: AgentEntry, gatekeeper: Gatekeeper) -> bool:
    return any(not _escaping(setting, gatekeeper) for setting in entry.settings)


def _enforceable_hint(entry: AgentEntry, gatekeeper: Gatekeeper) -> str:
    """What would make ``entry`` enforceable: another mode with the same rules, or the bare tools of
    what it does unasked allowed (never for an ``--agent-cmd`` agent: that is trusting it)."""
    if entry.name == COMMAND_AGENT:
        return "only --trust-agent-permissions runs it (baton then gates what it asks)"
    policy, workspace = gatekeeper.policy, gatekeeper.workspace
    tools = sorted({probe.tool_name for setting in entry.settings for probe, _ in _escaping(setting, gatekeeper)})
    rules = tuple(parse_rule(tool) for tool in tools)
    allowing = " ".join(f"--allow {tool}" for tool in tools)
    options: list[str] = []
    # The same rules under another mode; the bare tools allowed in this mode, then in another.
    for mode, extra, words in (
        *((mode, (), f"--mode {mode}") for mode in MODES if mode != policy.mode),
        (policy.mode, rules, allowing),
        *((mode, rules, f"--mode {mode} {allowing}") for mode in MODES if mode != policy.mode),
    ):
        if options and extra:
            break  # a mode alone is the smaller change
        try:
            other = replace(policy.with_mode(mode), allow=policy.allow + extra)
        except RefusedError:
            continue  # bypassPermissions as root
        if (extra or mode != policy.mode) and _enforceable(entry, Gatekeeper(other, workspace)):
            options.append(words)
            if extra:
                break
    if not options:
        return "no other mode or bare rule would be enforceable"
    return " or ".join(options) + " would be enforceable"


# -- Claude -----------------------------------------------------------------------------------


def claude_bound_input(tool_call: dict[str, Any]) -> dict[str, Any]:
    """Claude: the tool name and its input."""
    meta = (tool_call.get("_meta") or {}).get("baton") or {}
    return {"tool_name": meta.get("tool_name") or tool_call.get("title"), "input": tool_call.get("rawInput") or {}}


# -- Codex ------------------------------------------------------------------------------------

_CODEX_VOLATILE = frozenset({"call_id", "turn_id", "started_at_ms", "process_id", "auto_approved", "source"})


def codex_bound_input(tool_call: dict[str, Any]) -> dict[str, Any]:
    """Codex: the kind and the command (argv, cwd) or the patch, without per-proposal ids."""
    raw = tool_call.get("rawInput") or {}
    bound: dict[str, Any] = {"kind": tool_call.get("kind")}
    if "command" in raw:
        bound["command"] = raw.get("command")
        bound["cwd"] = raw.get("cwd")
    elif "changes" in raw:
        bound["changes"] = raw.get("changes")
    else:
        bound["input"] = {key: value for key, value in raw.items() if key not in _CODEX_VOLATILE}
    return bound


def codex_tool_calls(tool_call_id: str, kind: str | None, raw: dict[str, Any]) -> list[ToolCall]:
    """A Codex permission request as baton's calls: a command is Bash, a patch one call per file."""
    command = raw.get("command")
    if isinstance(command, (list, str)) and command:
        return [ToolCall("Bash", {"command": command_string(command)}, tool_call_id, kind)]
    changes = raw.get("changes")
    if isinstance(changes, dict) and changes:
        calls = []
        for path, change in changes.items():
            change = change if isinstance(change, dict) else {}
            if change.get("type") == "add":
                calls.append(ToolCall("Write", {"file_path": path, "content": change.get("content", "")}, tool_call_id))
            else:
                calls.append(ToolCall("Edit", {"file_path": path}, tool_call_id, kind))
            if isinstance(change.get("move_path"), str):
                calls.append(ToolCall("Write", {"file_path": change["move_path"]}, tool_call_id, kind))
        return calls
    return [ToolCall(f"codex:{kind or 'unknown'}", dict(raw), tool_call_id, kind)]


_CODEX_MCP_TOOL = re.compile(r'^Allow the (?P<server>.+) MCP server to run tool "(?P<tool>[^"]+)"\?$')


def codex_mcp_call(tool_call: dict[str, Any], servers: frozenset[str]) -> tuple[str, str] | None:
    """Codex's approval of an MCP tool call: ``rawInput`` ``{server_name, request: {message, _meta:
    {codex_approval_kind: "mcp_tool_call"}}}``, the tool named only in the message."""
    raw = tool_call.get("rawInput")
    request = raw.get("request") if isinstance(raw, dict) else None
    meta = request.get("_meta") if isinstance(request, dict) else None
    if not isinstance(meta, dict) or meta.get("codex_approval_kind") != "mcp_tool_call":
        return None
    assert isinstance(raw, dict) and isinstance(request, dict)
    found = _CODEX_MCP_TOOL.match(str(request.get("message") or ""))
    server = raw.get("server_name")
    if found is None or server not in servers or found.group("server") != server:
        return None
    return str(server), found.group("tool")


def _codex_binary() -> str:
    # The npm .bin entry is a node wrapper around this native binary; start the binary itself.
    return f"node_modules/@zed-industries/codex-acp-linux-{npm_arch()}/bin/codex-acp"


_ASK_ALL = NativeSetting(
    name="ask-all",
    native="approval_policy=untrusted, sandbox_mode=workspace-write, execpolicy prompt rules for Codex's safe commands",
    reaches_gatekeeper="every exec_command (the rules cover the commands Codex calls safe) and every apply_patch",
    unasked=(),
    evidence="tests/agents/codex/test_codex_modes.py::test_ask_all_sends_every_command_and_patch_to_the_gatekeeper",
    config=CodexSetting("untrusted", "workspace-write", ask_for_safe_commands=True),
)
_AUTO = NativeSetting(
    name="auto",
    native="approval_policy=on-request, sandbox_mode=workspace-write (codex-acp's Default preset)",
    reaches_gatekeeper="commands the model escalates out of the sandbox, patches outside the workspace",
    unasked=(
        Probe("run any command in its sandbox, e.g. `touch made.txt`", "Bash", {"command": "touch made.txt"}),
        Probe("patch files in the workspace", "Edit", {"file_path": f"{WORKSPACE}/src/app.js"}),
        Probe(
            "patch files under .claude/ and .baton/ in the workspace",
            "Write",
            {"file_path": f"{WORKSPACE}/.claude/settings.json"},
        ),
    ),
    evidence="tests/agents/codex/test_codex_modes.py::test_auto_runs_commands_and_patches_without_asking",
    config=CodexSetting("on-request", "workspace-write", ask_for_safe_commands=False),
)

CODEX = AgentEntry(
    name="codex",
    package="@zed-industries/codex-acp",
    version="0.16.0",
    command=(_codex_binary(),),
    env_recipe=(
        "PATH, LANG, LC_*, TZ, TERM and the configured passthrough; HOME and CODEX_HOME in the run's agent home; "
        "TMPDIR inside it (Codex refuses its sandbox helpers under /tmp); OPENAI_API_KEY; BATON_RUN_ID"
    ),
    config_recipe=(
        "CODEX_HOME/config.toml: provider `baton` from OPENAI_BASE_URL (wire_api responses, env_key OPENAI_API_KEY, "
        "retries 0), model, approval_policy and sandbox_mode of the chosen native setting, analytics, feedback, "
        "update checks and plugins off; developer_instructions = the repository's instructions, "
        "project_doc_max_bytes = 0 (no AGENTS.md of the working tree); CODEX_HOME/rules/baton.rules for ask-all"
    ),
    tool_names={"exec_command": "Bash", "apply_patch": "Edit", "write_stdin": "Bash", "view_image": "Read"},
    bound_input=codex_bound_input,
    settings=(_AUTO, _ASK_ALL),
    tool_calls=codex_tool_calls,
    mcp_call=codex_mcp_call,
    launch=codex_command,
    instruction_files=("AGENTS.md",),
)

CLAUDE = AgentEntry(
    name="claude",
    package=None,
    version="claude-agent-sdk (bundled Claude Code)",
    command=("in-process",),
    env_recipe="see baton.agents.claude.environment",
    config_recipe=(
        "setting_sources=[], strict_mcp_config, a PreToolUse hook on every tool, "
        "the repository's instructions appended to the claude_code system prompt"
    ),
    tool_names={},
    bound_input=claude_bound_input,
    reports_cost=True,
    applies_edits=True,  # the adapter hands updated_input to Claude Code (the hook's updatedInput)
    settings=(
        NativeSetting(
            name="hook",
            native="a PreToolUse hook on every tool (Claude Code stays in its default mode)",
            reaches_gatekeeper="every tool call",
            unasked=(),
            evidence="tests/runs/test_claude_host.py",
        ),
    ),
    instruction_files=("CLAUDE.md", "AGENTS.md"),
)

# -- Claude through claude-agent-acp ------------------------------------------------------------


def claude_acp_bound_input(tool_call: dict[str, Any]) -> dict[str, Any]:
    """claude-agent-acp: the kind and Claude's tool input (its permission requests name no tool)."""
    return {"kind": tool_call.get("kind"), "input": tool_call.get("rawInput") or {}}


_GREP_KEYS = frozenset({"output_mode", "glob", "type", "-i", "-n", "-A", "-B", "-C", "multiline", "head_limit"})


def claude_acp_tool_name(kind: str | None, raw: Mapping[str, Any]) -> str | None:
    """Claude's tool from a claude-agent-acp request, which carries only the kind and the input."""
    if "command" in raw:
        return "Bash"
    if "notebook_path" in raw:
        return "NotebookEdit"
    if "file_path" in raw:
        if "old_string" in raw or "edits" in raw:
            return "Edit"
        return "Write" if "content" in raw else "Read"
    if "pattern" in raw:
        return "Grep" if kind == "search" and _GREP_KEYS & raw.keys() else "Glob"
    for key, name in (("url", "WebFetch"), ("query", "WebSearch"), ("todos", "TodoWrite"), ("plan", "ExitPlanMode")):
        if key in raw:
            return name
    if "subagent_type" in raw or ("prompt" in raw and "description" in raw):
        return "Task"
    return None


def claude_acp_tool_calls(tool_call_id: str, kind: str | None, raw: dict[str, Any]) -> list[ToolCall]:
    """A claude-agent-acp permission request as one call of Claude's tool (an unknown one: its kind)."""
    name = claude_acp_tool_name(kind, raw) or f"claude-acp:{kind or 'unknown'}"
    return [ToolCall(name, dict(raw), tool_call_id, kind)]


def _claude_acp_script() -> str:
    # The package's bin entry; baton runs it with node (its Claude Code is CLAUDE_CODE_EXECUTABLE).
    return "node_modules/@zed-industries/claude-agent-acp/dist/index.js"


_CLAUDE_ACP_ASK_ALL = NativeSetting(
    name="ask-all",
    native=(
        "session mode default, settingSources [user] (the run's own settings only), "
        "a PreToolUse hook on every tool answering ask"
    ),
    reaches_gatekeeper="every tool call (the hook sends each to canUseTool, i.e. session/request_permission)",
    unasked=(),
    evidence="tests/agents/claude_acp/test_claude_acp_modes.py::test_ask_all_sends_every_call_to_the_gatekeeper",
    config=ClaudeAcpSetting("default", ask_every_tool=True),
)

CLAUDE_ACP = AgentEntry(
    name="claude-acp",
    package="@zed-industries/claude-agent-acp",
    version="0.23.1",
    command=(_claude_acp_script(),),
    env_recipe=(
        "as claude (PATH, LANG, LC_*, TZ, TERM, passthrough; HOME and CLAUDE_CONFIG_DIR in the run's agent home; "
        "ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; telemetry, updates and error reports off), "
        "CLAUDE_CODE_EXECUTABLE = claude-agent-sdk's bundled Claude Code, BATON_RUN_ID"
    ),
    config_recipe=(
        "CLAUDE_CONFIG_DIR/settings.json: a PreToolUse hook on every tool answering ask; session/new with "
        "_meta.claudeCode.options.settingSources = [user], _meta.systemPrompt.append = the repository's "
        "instructions; session/set_mode default after session/new"
    ),
    tool_names={},
    bound_input=claude_acp_bound_input,
    settings=(_CLAUDE_ACP_ASK_ALL,),
    tool_calls=claude_acp_tool_calls,
    mcp_call=lambda tool_call, servers: named_mcp_call(str(tool_call.get("title") or ""), servers),
    launch=claude_acp_command,
    provider="anthropic",
    instruction_files=("CLAUDE.md", "AGENTS.md"),
)


def named_mcp_call(name: str, servers: frozenset[str]) -> tuple[str, str] | None:
    """``mcp__SERVER__TOOL`` (Claude Code's name of an MCP tool, the title of claude-agent-acp's
    request) → (server, tool) for a server of the run."""
    server, sep, tool = name.removeprefix("mcp__").partition("__")
    return (server, tool) if name.startswith("mcp__") and sep and tool and server in servers else None


# -- Gemini CLI --------------------------------------------------------------------------------

_GEMINI_MCP_TITLE = re.compile(r"^(?P<tool>\S+) \((?P<server>\S+) MCP Server\)$")


def gemini_mcp_call(tool_call: dict[str, Any], servers: frozenset[str]) -> tuple[str, str] | None:
    """Gemini CLI's request for an MCP tool: kind ``other``, title ``TOOL (SERVER MCP Server)``,
    its id starting ``mcp_SERVER_TOOL``."""
    found = _GEMINI_MCP_TITLE.match(str(tool_call.get("title") or ""))
    if found is None or tool_call.get("kind") != "other" or found.group("server") not in servers:
        return None
    server, tool = found.group("server"), found.group("tool")
    return (server, tool) if str(tool_call.get("toolCallId") or "").startswith(f"mcp_{server}_{tool}") else None


def gemini_bound_input(tool_call: dict[str, Any]) -> dict[str, Any]:
    """Gemini: its requests carry no rawInput and no tool name; kind, title, content and locations."""
    return {key: tool_call.get(key) for key in ("kind", "title", "content", "locations")}


_GEMINI_KIND_TOOLS = {"edit": "Edit", "delete": "Edit", "move": "Edit", "read": "Read", "search": "Grep"}


def gemini_tool_calls(tool_call_id: str, kind: str | None, raw: dict[str, Any]) -> list[ToolCall]:
    """A Gemini request (no rawInput: the host passes its title, locations and content) as baton's
    calls: ``execute`` is Bash with the title as the command; a file kind is one call per diff
    path or location (a diff with no old text is a Write); ``fetch`` WebFetch; else ``gemini:<kind>``."""
    if "command" in raw or "file_path" in raw:
        return acp_tool_calls(tool_call_id, kind, raw)
    title = str(raw.get("title") or "")
    if kind == "execute":
        return [ToolCall("Bash", {"command": title}, tool_call_id, kind)]
    if kind == "fetch":
        return [ToolCall("WebFetch", {"url": title}, tool_call_id, kind)]
    tool = _GEMINI_KIND_TOOLS.get(kind or "")
    if tool is not None:
        calls = []
        for item in raw.get("content") or ():
            if isinstance(item, dict) and item.get("type") == "diff" and isinstance(item.get("path"), str):
                added = tool == "Edit" and not item.get("oldText")
                calls.append(ToolCall("Write" if added else tool, {"file_path": item["path"]}, tool_call_id, kind))
        if not calls:
            for location in raw.get("locations") or ():
                if isinstance(location, dict) and isinstance(location.get("path"), str):
                    calls.append(ToolCall(tool, {"file_path": location["path"]}, tool_call_id, kind))
        if calls:
            return calls
        if tool in ("Read", "Grep"):  # a search names no file: it reads the workspace
            return [ToolCall(tool, {"pattern": title}, tool_call_id, kind)]
    return [ToolCall(f"gemini:{kind or 'other'}", dict(raw), tool_call_id, kind)]


# Commands Gemini CLI runs without asking whatever its policy says ("known safe", inside the
# workspace): its shell heuristics turn ask_user into allow for them (0.61, isKnownSafeCommand).
GEMINI_SAFE_COMMANDS = (
    "cat README.md",
    "cd src",
    "cut -f1 README.md",
    "echo hi",
    "expr 1 + 1",
    "grep x README.md",
    "head README.md",
    "id",
    "ls",
    "nl README.md",
    "paste README.md",
    "pwd",
    "rev README.md",
    "seq 3",
    "stat README.md",
    "tail README.md",
    "tac README.md",
    "tr a b",
    "uname",
    "uniq README.md",
    "wc README.md",
    "which git",
    "whoami",
    "numfmt 1",
    "git status",
    "git log",
    "git diff",
)


def _gemini_script() -> str:
    return "node_modules/@google/gemini-cli/bundle/gemini.js"


_GEMINI_ASK_ALL = NativeSetting(
    name="ask-all",
    native="session mode default, a user policy (.gemini/policies/baton.toml) answering ask_user for every tool",
    reaches_gatekeeper="every tool call except the commands Gemini CLI calls safe",
    unasked=tuple(
        Probe(f"run `{command}` (a command Gemini CLI calls safe, in the workspace)", "Bash", {"command": command})
        for command in GEMINI_SAFE_COMMANDS
    ),
    evidence="tests/agents/gemini/test_gemini_modes.py::test_ask_all_sends_every_call_but_safe_commands_to_the_gatekeeper",
    config=GeminiSetting("default", ask_every_tool=True),
)

GEMINI = AgentEntry(
    name="gemini",
    package="@google/gemini-cli",
    version="0.61.0",
    command=(_gemini_script(),),
    env_recipe=(
        "PATH, LANG, LC_*, TZ, TERM and the passthrough; HOME = the run's agent home; GEMINI_API_KEY, "
        "GOOGLE_GEMINI_BASE_URL, GEMINI_CLI_TRUST_WORKSPACE=true, NO_COLOR, BATON_RUN_ID"
    ),
    config_recipe=(
        "HOME/.gemini/settings.json: gemini-api-key auth, statistics, telemetry, updates and checkpointing off, "
        "the model; HOME/.gemini/GEMINI.md = the repository's instructions (its global memory); "
        "HOME/.gemini/policies/baton.toml for ask-all; `--acp -m MODEL`; session/set_mode after session/new"
    ),
    tool_names={},
    bound_input=gemini_bound_input,
    settings=(_GEMINI_ASK_ALL,),
    tool_calls=gemini_tool_calls,
    mcp_call=gemini_mcp_call,
    launch=gemini_command,
    provider="gemini",
    # Through a client's fs, write_file of a new file fails: Gemini CLI reads it first and does not
    # recognise the JSON-RPC "Resource not found" error as ENOENT (0.61).
    client_fs=False,
    instruction_files=("GEMINI.md", "AGENTS.md"),
)

# -- OpenCode ----------------------------------------------------------------------------------

_OPENCODE_ASK_ALL = NativeSetting(
    name="ask-all",
    native='permission {"*": "ask"} in OPENCODE_CONFIG_CONTENT',
    reaches_gatekeeper="every tool call (bash, read, write, edit …)",
    unasked=(),
    evidence="tests/agents/opencode/test_opencode.py::test_ask_all_sends_every_call_to_the_gatekeeper",
    config=OpenCodeSetting({"*": "ask"}),
)


def opencode_mcp_call(tool_call: dict[str, Any], servers: frozenset[str]) -> tuple[str, str] | None:
    """OpenCode's request for an MCP tool: kind ``other``, title ``SERVER_TOOL`` (its name for the
    tool), the longest server name of the run that prefixes it. OpenCode's own tools (bash, read,
    edit, webfetch, todowrite …) have no ``_`` in their names."""
    title = str(tool_call.get("title") or "")
    if tool_call.get("kind") != "other":
        return None
    for server in sorted(servers, key=len, reverse=True):
        if title.startswith(server + "_") and len(title) > len(server) + 1:
            return server, title[len(server) + 1 :]
    return None


OPENCODE = AgentEntry(
    name="opencode",
    package="opencode-ai",
    version="1.18.33",
    command=(opencode_binary(),),
    env_recipe=(
        "PATH, LANG, LC_*, TZ, TERM and the passthrough; HOME and XDG_* in the run's agent home; ANTHROPIC_API_KEY; "
        "OPENCODE_CONFIG_CONTENT; OPENCODE_DISABLE_{AUTOUPDATE,MODELS_FETCH,LSP_DOWNLOAD,DEFAULT_PLUGINS,"
        "PROJECT_CONFIG,CLAUDE_CODE_PROMPT}=1; "
        "BATON_RUN_ID"
    ),
    config_recipe=(
        "OPENCODE_CONFIG_CONTENT: provider anthropic at ANTHROPIC_BASE_URL/v1, the model (anthropic/…), autoupdate "
        'and share off, permission {"*": "ask"}, instructions = the repository\'s (files in the agent home); '
        "OPENCODE_DISABLE_PROJECT_CONFIG=1 (no AGENTS.md/CLAUDE.md or opencode.json of the working tree); "
        "`opencode acp --pure`"
    ),
    tool_names={},
    bound_input=acp_bound_input,
    settings=(_OPENCODE_ASK_ALL,),
    tool_calls=acp_tool_calls,
    mcp_call=opencode_mcp_call,
    launch=opencode_command,
    provider="anthropic",
    annotation=opencode_annotation,
    instruction_files=("AGENTS.md",),
)

# -- Qwen Code ---------------------------------------------------------------------------------


def qwen_tool_calls(tool_call_id: str, kind: str | None, raw: dict[str, Any]) -> list[ToolCall]:
    """A Qwen Code request (its rawInput takes Claude's argument names: ``command``, ``file_path``,
    ``content``, ``old_string`` …) as one call of Claude's tool; a path-only call (``list_directory``)
    by its kind; anything else ``qwen:<kind>``."""
    name = claude_acp_tool_name(kind, raw)
    if name is not None:
        return [ToolCall(name, dict(raw), tool_call_id, kind)]
    calls = acp_tool_calls(tool_call_id, kind, raw)
    if calls and not calls[0].tool_name.startswith("acp:"):
        return calls
    return [ToolCall(f"qwen:{kind or 'other'}", dict(raw), tool_call_id, kind)]


def qwen_mcp_call(tool_call: dict[str, Any], servers: frozenset[str]) -> tuple[str, str] | None:
    """Qwen Code's request for an MCP tool: kind ``other``, ``_meta.toolName`` ``mcp__SERVER__TOOL``
    (the title is the call's arguments as JSON)."""
    meta = tool_call.get("_meta")
    if tool_call.get("kind") != "other" or not isinstance(meta, dict):
        return None
    return named_mcp_call(str(meta.get("toolName") or ""), servers)


def qwen_annotation(tool_call: dict[str, Any]) -> dict[str, Any]:
    """``_meta.baton`` fields for a Qwen Code tool call or update: ``tool_name`` from its own
    ``_meta.toolName`` (its tool → baton's); for a finished write or edit ``change`` (``add`` where
    the file's ``originalContent`` was empty, else ``modify``); for a finished command (``rawOutput`` of type
    ``shell_result``) ``output`` and ``exit_code`` from it (its ``content`` is a report with the
    command line, directory and status around the output)."""
    extra: dict[str, Any] = {}
    name = qwen_tool_name(tool_call)
    if name is not None:
        extra["tool_name"] = name
    output = tool_call.get("rawOutput")
    if isinstance(output, dict) and isinstance(output.get("filePath"), str) and "originalContent" in output:
        # Its diff has oldText "" for a new file and an empty one alike; an empty original is taken as new.
        extra["change"] = "add" if not output["originalContent"] else "modify"
    if isinstance(output, dict) and output.get("type") == "shell_result":
        if isinstance(output.get("output"), str):
            extra["output"] = output["output"]
        code = output.get("exitCode")
        if isinstance(code, int) and not isinstance(code, bool):
            extra["exit_code"] = code
    return extra


def _qwen_script() -> str:
    return "node_modules/@qwen-code/qwen-code/cli.js"


_QWEN_ASK_ALL = NativeSetting(
    name="ask-all",
    native="approval mode default, permissions.ask rules for every tool category (Bash, Read, Edit, WebFetch …)",
    reaches_gatekeeper="every tool call",
    unasked=(),
    evidence="tests/agents/qwen/test_qwen.py::test_ask_all_sends_every_call_to_the_gatekeeper",
    config=QwenSetting("default", ask_every_tool=True),
)

QWEN = AgentEntry(
    name="qwen",
    package="@qwen-code/qwen-code",
    version="0.24.4",
    command=(_qwen_script(),),
    env_recipe=(
        "PATH, LANG, LC_*, TZ, TERM and the passthrough; HOME = the run's agent home, TMPDIR inside it; "
        "OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL; QWEN_CODE_SYSTEM_SETTINGS_PATH; NO_COLOR; BATON_RUN_ID"
    ),
    config_recipe=(
        "HOME/.qwen/settings.json: openai auth (Chat Completions), the model, statistics, telemetry, updates and "
        "checkpointing off, tools.approvalMode, permissions.ask for ask-all, context.fileName = the run's own "
        "(no QWEN.md/AGENTS.md of the working tree), also as the system settings (QWEN_CODE_SYSTEM_SETTINGS_PATH); "
        "HOME/.qwen/<that name> = the repository's instructions; `--acp --auth-type openai`; "
        "session/set_mode after session/new"
    ),
    tool_names=QWEN_TOOLS,
    bound_input=claude_acp_bound_input,
    settings=(_QWEN_ASK_ALL,),
    tool_calls=qwen_tool_calls,
    mcp_call=qwen_mcp_call,
    launch=qwen_command,
    annotation=qwen_annotation,
    instruction_files=("QWEN.md", "AGENTS.md"),
)

# -- Kilo Code CLI (an OpenCode fork) ---------------------------------------------------------

_KILO_ASK_ALL = NativeSetting(
    name="ask-all",
    native='permission {"*": "ask"} in KILO_CONFIG_CONTENT',
    reaches_gatekeeper="every tool call (bash, read, write, edit …)",
    unasked=(),
    evidence="tests/agents/kilo/test_kilo.py::test_ask_all_sends_every_call_to_the_gatekeeper",
    config=OpenCodeSetting({"*": "ask"}),
)

KILO = AgentEntry(
    name="kilo",
    package="@kilocode/cli",
    version="7.7.7",
    command=(kilo_binary(),),
    env_recipe=(
        "PATH, LANG, LC_*, TZ, TERM and the passthrough; HOME and XDG_* in the run's agent home; ANTHROPIC_API_KEY; "
        "KILO_CONFIG_CONTENT; KILO_DISABLE_{AUTOUPDATE,MODELS_FETCH,LSP_DOWNLOAD,DEFAULT_PLUGINS,SHARE,"
        "SESSION_INGEST,EXTERNAL_SKILLS,PROJECT_CONFIG,CLAUDE_CODE,CLAUDE_CODE_PROMPT,CLAUDE_CODE_SKILLS}=1; "
        "BATON_RUN_ID"
    ),
    config_recipe=(
        "KILO_CONFIG_CONTENT: provider anthropic at ANTHROPIC_BASE_URL/v1, the model (anthropic/…), autoupdate "
        'and share off, permission {"*": "ask"}, instructions = the repository\'s (files in the agent home); '
        "KILO_DISABLE_PROJECT_CONFIG=1 (no AGENTS.md/CLAUDE.md or kilo.json of the working tree); "
        "`kilo acp --pure`"
    ),
    tool_names={},
    bound_input=acp_bound_input,
    settings=(_KILO_ASK_ALL,),
    tool_calls=acp_tool_calls,
    mcp_call=opencode_mcp_call,  # OpenCode's shape: kind ``other``, title ``SERVER_TOOL``, rawInput empty
    launch=kilo_command,
    provider="anthropic",
    annotation=opencode_annotation,
    instruction_files=("AGENTS.md",),
)

AGENTS: dict[str, AgentEntry] = {
    entry.name: entry for entry in (CLAUDE, CODEX, CLAUDE_ACP, GEMINI, OPENCODE, QWEN, KILO)
}


# -- any other ACP agent: --agent-cmd ----------------------------------------------------------

_UNKNOWN = NativeSetting(
    name="unknown",
    native="the agent's own behaviour, which baton does not know",
    reaches_gatekeeper="whatever the agent chooses to ask",
    unasked=(
        Probe("anything it decides to do without asking, e.g. run `rm -rf .`", "Bash", {"command": "rm -rf ."}),
        Probe(
            "anything it decides to write without asking, e.g. .baton/policy.toml",
            "Write",
            {"file_path": f"{WORKSPACE}/.baton/policy.toml"},
        ),
    ),
    evidence="tests/agents/test_agent_command.py::test_an_agent_command_without_trust_is_not_enforceable",
)
_TRUSTED = NativeSetting(
    name="trusted",
    native="--trust-agent-permissions: the user vouches that the agent asks for what matters",
    reaches_gatekeeper="only what the agent asks",
    unasked=(),
    evidence="tests/agents/test_agent_command.py::test_a_trusted_agent_command_is_gated_on_what_it_asks",
)


def command_entry(argv: tuple[str, ...], *, trusted: bool) -> AgentEntry:
    """The entry for ``--agent-cmd``: refused in every mode unless ``trusted``."""
    return AgentEntry(
        name=COMMAND_AGENT,
        package="(command)",
        version="unknown",
        command=argv,
        env_recipe="PATH, LANG, LC_*, TZ, TERM, HOME, the passthrough, the model credentials baton knows, BATON_RUN_ID",
        config_recipe="none: the agent's own configuration",
        tool_names={},
        bound_input=acp_bound_input,
        settings=(_TRUSTED,) if trusted else (_UNKNOWN,),
        tool_calls=acp_tool_calls,
        launch=command_launch(argv),
        provider="none",
    )


def applies_edits(agent: str) -> bool:
    """Whether a run of ``agent`` (its name as stored) runs an approval's edited input; an agent
    the registry does not know (``--agent-cmd``, a name from another version) does not."""
    entry = AGENTS.get(agent)
    return entry is not None and entry.applies_edits


def get_agent(name: str) -> AgentEntry:
    from baton.errors import UsageError

    entry = AGENTS.get(name)
    if entry is None:
        raise UsageError("invalid_argument", f"unknown agent {name!r}; known: {', '.join(AGENTS)}")
    return entry
