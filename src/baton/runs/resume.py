"""Resuming a run: what to tell the agent, and how to bring its conversation back.

docs/design.md "Runs across processes" → Resume, and docs/resume.md:

- **Native path**: the agent restores its own session (Claude: ``resume=`` the run's agent
  session in the run's agent home, forked to a new pinned session id).
- **Rebuilt path**, when the agent home or the session file is gone: a new session whose first
  prompt carries the conversation rebuilt from the log (:mod:`baton.runs.conversation`),
  verbatim, within a token budget — oldest items dropped first, long tool results truncated,
  and the prompt says what was left out.
- Without a prompt from the user, the agent gets a fixed continuation prompt that names the
  interrupted calls; it starts with :data:`RESUME_MARKER` and has one
  ``[baton:interrupted <Tool>]`` line per call, which scripted scenarios key on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, TypeVar

from baton.acp.extensions import ResumeParams
from baton.acp.replay import AgentRestore
from baton.acp.wire import decode_json
from baton.agents.processes import kill_run_processes, run_process_ids
from baton.config import Settings
from baton.errors import RefusedError, UsageError
from baton.events.entry import LogEntry
from baton.runs.conversation import Conversation, Item, ToolCall
from baton.runs.executors import executor_alive, this_executor_id
from baton.runs.lifecycle import take_over
from baton.runs.parking import DecidedCall, decided_calls
from baton.runs.spec import RunSpec, spec_of_record
from baton.runs.workspaces import holds_workspace
from baton.store import SessionLog, Store
from baton.store.records import RunRecord

__all__ = [
    "CHECKPOINT_ENTRIES",
    "DEFAULT_CONTEXT_TOKENS",
    "RESULT_CHARS",
    "RESUME_MARKER",
    "STATE_CHARS",
    "ResumePlan",
    "check_resumable",
    "claude_session_file",
    "continuation_prompt",
    "estimate_tokens",
    "keep_conversation",
    "load_conversation",
    "plan_resume",
    "rebuilt_prompt",
    "resume_spec",
    "run_keeping_conversation",
]

RESUME_MARKER: Final = "[baton:resume]"
DEFAULT_CONTEXT_TOKENS: Final = 50_000
RESULT_CHARS: Final = 4_000  # a longer tool result (or input) keeps its first and last halves
_SUMMARY_CHARS: Final = 200
_PAGE: Final = 5_000  # entries read at once (peak of a 200k-entry rebuild: 42 MB; 10,000 took 53 MB)
CHECKPOINT_ENTRIES: Final = 1_000
# What a stored conversation keeps: twice what a default rebuilt context can hold.
STATE_CHARS: Final = 8 * DEFAULT_CONTEXT_TOKENS
T = TypeVar("T")
_LIVE_STATUSES: Final = frozenset({"queued", "running", "paused", "interrupted"})


@dataclass(frozen=True)
class ResumePlan:
    """What :meth:`baton.runs.Baton.resume` executes."""

    run_id: str  # the run that continues: the same one, or a new one continuing an ended run
    resumed_from: str | None  # the ended run a new run continues
    spec: RunSpec  # ``prompt`` is what the agent is sent first
    params: ResumeParams  # logged as ``_baton/resume``
    resume_session_id: str | None  # native path: the agent session to resume
    conversation: Conversation
    restore: AgentRestore | None = None  # an ACP agent's session to resume or load, else the rebuilt path
    # Claude parked on a deferred call: it re-evaluates the call and continues the turn by itself
    continues_deferred: bool = False


async def load_conversation(store: Store, log: SessionLog, run_id: str) -> Conversation:
    """The run's conversation: the stored state brought up to date with the entries since.

    A run that continues an ended one (``resumed_from``) starts from that run's conversation.
    The state is saved again when new entries were folded.
    """
    conversation: Conversation | None = None
    stored = await store.load_conversation_state(run_id)
    if stored is not None:
        try:
            conversation = Conversation.from_dict(stored[1])
        except (ValueError, KeyError, TypeError):
            conversation = None  # another version: fold again from the log
    if conversation is None:
        record = await store.get_run(run_id)
        if record.resumed_from:
            conversation = await load_conversation(store, log, record.resumed_from)
            conversation.upto_seq = 0  # the parent's seqs are not this run's
        else:
            conversation = Conversation()
    start = conversation.upto_seq
    while page := await log.read_lazily(
        run_id, after=conversation.upto_seq, until=conversation.upto_seq + _PAGE, chunks_as_text=True
    ):
        # Decoded and folded off the event loop: a page of a long run is ~50 ms of CPU.
        await asyncio.to_thread(conversation.apply, page)
    if conversation.upto_seq > start or stored is None:
        await _save(store, run_id, conversation)
    return conversation


async def _save(store: Store, run_id: str, conversation: Conversation) -> None:
    conversation.trim(STATE_CHARS)
    await store.save_conversation_state(run_id, conversation.upto_seq, conversation.to_dict())


async def keep_conversation(store: Store, log: SessionLog, run_id: str, *, every: int = CHECKPOINT_ENTRIES) -> None:
    """Fold the run's entries as they commit and store the state every ``every`` entries, at
    each turn's end and when the run's log closes — so a resume folds at most ``every`` entries."""
    conversation = await load_conversation(store, log, run_id)
    saved = conversation.upto_seq
    async for entry in log.subscribe(run_id, after=saved):
        conversation.apply((entry,))
        if entry["seq"] - saved >= every or entry["method"] == "_baton/turn_complete":
            await _save(store, run_id, conversation)
            saved = conversation.upto_seq
    if conversation.upto_seq > saved:
        await _save(store, run_id, conversation)


async def run_keeping_conversation(execution: Awaitable[T], store: Store, log: SessionLog, run_id: str) -> T:
    """Await a run's execution while :func:`keep_conversation` follows its log.

    The conversation state is an optimization: a failure to keep it never fails the run.
    """
    keeper = asyncio.create_task(keep_conversation(store, log, run_id), name=f"baton-conversation-{run_id}")
    try:
        return await execution
    finally:
        # The execution closed the run's log, so the keeper is saving its last state.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(keeper, 10)


async def plan_resume(
    store: Store,
    log: SessionLog,
    settings: Settings,
    run_id: str,
    prompt: str | None,
    *,
    repo: Path | None = None,
    executing: Collection[str] = (),
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
) -> ResumePlan:
    """Check that ``run_id`` may be resumed, take it over, and decide the path and the prompt.

    Refused with ``run_active`` while a live executor runs it (``executing``: runs of this
    process), with ``run_ended`` for an ended run without a prompt. A run that ended continues
    in a new run (``resumed_from``); any other run continues in place, after its leftover
    processes are killed.
    """
    record = await store.get_run(run_id)
    check_resumable(record, prompt, executing)
    ended = record.is_terminal
    spec = await resume_spec(log, record, repo)
    cwd = Path(spec.repo)
    conversation = await load_conversation(store, log, run_id)
    if ended:
        target = await store.create_run(
            agent=record.agent,
            model=record.model,
            permission_mode=record.permission_mode,
            run_mode=record.run_mode,
            task_id=record.task_id,
            repo=str(cwd),
            cwd=str(cwd),
            budget_usd=record.budget_usd,
            budget_turns=record.budget_turns,
            budget_seconds=record.budget_seconds,
            resumed_from=run_id,
            executor_id=this_executor_id(),
            exclusive=holds_workspace,
            # It continues in the same workspace (docs/workspaces.md): kept until neither run needs it.
            request=_workspace_request(record, cwd),
        )
        await asyncio.to_thread(_copy_agent_config, settings, run_id, target.id)
        interrupted: list[ToolCall] = []
        decided: list[DecidedCall] = []
        rerun: set[str] = set()
        deferred = False
    else:
        target = record
        parked = await _parked(log, run_id, conversation.upto_seq)
        await _claim(store, record)
        interrupted = conversation.interrupted_calls
        decided = await decided_calls(store, run_id, record.status_reason if record.status == "paused" else None)
        decided_ids = {call.tool_call_id for call in decided}
        # A call decided while the run was parked is named as decided, not as interrupted;
        # Claude re-runs a deferred call itself, any other call must be proposed again.
        deferred = parked and record.agent == "claude"
        rerun = {call.gate_id for call in decided if not deferred}
        interrupted = [call for call in interrupted if call["id"] not in decided_ids]
    agent_home = settings.run_dir(target.id) / "agent-home"
    # Claude restores its own session; other agents get the rebuilt context for now. The newest
    # session with a transcript: a resume killed before Claude Code wrote one left an older one.
    session_id = None
    # The record's cwd first: an imported run (baton import) has its new place there, not in its log.
    if record.agent == "claude" and str(cwd) == (record.cwd or conversation.cwd):
        candidates = [*reversed(conversation.session_ids), record.agent_session_id]
        session_id = next((sid for sid in candidates if sid and claude_session_file(agent_home, sid)), None)
    native = session_id is not None
    user_prompt = prompt if prompt is not None else continuation_prompt(interrupted, decided, rerun=rerun)
    agent_prompt = user_prompt if native else rebuilt_prompt(conversation, user_prompt, budget_tokens=context_tokens)
    params: ResumeParams = {
        "path": "native" if native else "rebuilt",
        "interrupted_calls": [call["id"] for call in interrupted],
        "prompt": user_prompt,
    }
    if decided:
        params["decided_gates"] = [call.gate_id for call in decided]
    restore = None
    if record.agent != "claude" and str(cwd) == (record.cwd or conversation.cwd):
        # An ACP agent resumes (or loads) its own session (baton.acp.replay): the rebuilt
        # conversation is sent only if it cannot.
        candidates = [*reversed(conversation.session_ids), record.agent_session_id]
        agent_session = next((sid for sid in candidates if sid), None)
        if agent_session is not None:
            restore = AgentRestore(agent_session, agent_prompt, params)
            params, agent_prompt = {**params, "path": "native"}, user_prompt
    return ResumePlan(
        run_id=target.id,
        resumed_from=run_id if ended else None,
        spec=replace(spec, prompt=agent_prompt),
        params=params,
        resume_session_id=session_id if native else None,
        conversation=conversation,
        restore=restore,
        continues_deferred=bool(deferred and native and decided),
    )


def _workspace_request(record: RunRecord, cwd: Path) -> dict[str, Any] | None:
    request = record.request if isinstance(record.request, dict) else {}
    workspace = request.get("workspace")
    if not isinstance(workspace, dict):
        return None
    kept = {key: value for key, value in workspace.items() if key not in ("branch", "head_commit", "pull_request_url")}
    return {"workspace": {**kept, "path": str(cwd)}}


async def resume_spec(log: SessionLog, record: RunRecord, repo: Path | None = None) -> RunSpec:
    """What the run was asked to do, from its record and its ``_baton/run_started`` (the prompt
    left empty); ``repo`` overrides the working tree it ran in."""
    opening = await _run_started(log, record.id)
    if not opening:
        raise RefusedError(
            "run_not_resumable", f"nothing of run {record.id} was recorded (not even its start); start the task again"
        )
    cwd = Path(repo) if repo is not None else Path(str(record.cwd or opening.get("cwd") or record.repo or "."))
    if not cwd.is_dir():
        raise UsageError("invalid_argument", f"--repo {cwd} is not a directory")
    return spec_of_record(record, opening, prompt="", repo=cwd.resolve())


def check_resumable(record: RunRecord, prompt: str | None, executing: Collection[str] = ()) -> None:
    """``run_active`` while a live executor runs it; ``run_ended`` for an ended run without a prompt."""
    if record.id in executing or (
        record.status in _LIVE_STATUSES and executor_alive(record.executor_id, record.heartbeat_at)
    ):
        raise RefusedError("run_active", f"run {record.id} is being executed by {record.executor_id or 'this process'}")
    if record.is_terminal and prompt is None:
        raise RefusedError(
            "run_ended", f"run {record.id} is {record.status}; give a PROMPT to continue its conversation in a new run"
        )


async def _parked(log: SessionLog, run_id: str, upto_seq: int) -> bool:
    """Whether the run's log ends with its park (``_baton/status paused``): nothing was cut short."""
    last: LogEntry | None = None
    while page := await log.read(run_id, after=max(upto_seq - 1, 0) if last is None else last["seq"]):
        last = page[-1]
    if last is None or last["method"] != "_baton/status":
        return False
    params = last["payload"].get("params")
    return isinstance(params, dict) and params.get("status") == "paused"


async def _run_started(log: SessionLog, run_id: str) -> dict[str, Any]:
    for entry in await log.read(run_id, after=0, until=10):
        if entry["method"] == "_baton/run_started":
            params = entry["payload"].get("params")
            return params if isinstance(params, dict) else {}
    return {}


async def _claim(store: Store, record: RunRecord) -> None:
    """Become the run's executor (at most one process wins, and only while no other run holds
    its workspace), then end what the dead one left."""
    me = this_executor_id()
    if not await store.claim_run(
        record.id, expected_executor=record.executor_id, executor_id=me, exclusive=holds_workspace
    ):
        raise RefusedError("run_active", f"run {record.id} was taken over by another process")
    await take_over(store, record.id, record.status)
    if run_process_ids(record.id):
        await asyncio.to_thread(kill_run_processes, record.id)


def _copy_agent_config(settings: Settings, source_run: str, target_run: str) -> None:
    """The agent's own state (its session files: Claude's ``.claude``, Codex's ``codex`` …) for a
    new run that continues an ended one; not its scratch ``tmp``."""
    source = settings.run_dir(source_run) / "agent-home"

    def scratch(directory: str, names: list[str]) -> list[str]:
        return ["tmp"] if Path(directory) == source and "tmp" in names else []  # Gemini's .gemini/tmp is kept

    if source.is_dir():
        with contextlib.suppress(shutil.Error):  # a socket or a vanished file: the rest is copied
            target = settings.run_dir(target_run) / "agent-home"
            shutil.copytree(source, target, symlinks=True, ignore=scratch, dirs_exist_ok=True)


def estimate_tokens(text: str) -> int:
    """A conservative estimate (about four characters a token for English and code)."""
    return len(text) // 4 + 1


def continuation_prompt(
    interrupted: Sequence[ToolCall], decided: Sequence[DecidedCall] = (), *, rerun: Collection[str] = ()
) -> str:
    """The fixed prompt a resume without a user prompt sends.

    ``decided``: calls whose gate was decided while the run was parked (or its process gone),
    one ``[baton:approved <Tool>]`` (the agent runs it as it resumes), ``[baton:approved-rerun
    <Tool>]`` (it never ran: propose it again, exactly; gates named in ``rerun``) or
    ``[baton:denied <Tool>]`` line each.
    """
    if decided and not interrupted:
        lines = [f"{RESUME_MARKER} This run waited for a human's decision and baton resumed it once it was made."]
    else:
        lines = [f"{RESUME_MARKER} This run was interrupted (the process executing it stopped) and baton resumed it."]
    for gated in decided:
        tool = gated.tool_name or "tool"
        summary = f"{_one_line(gated.summary)} (call {gated.tool_call_id})"
        if gated.decision in ("deny", "reject") or gated.status in ("denied", "expired"):
            why = f": {gated.reason}" if gated.reason else ""
            lines.append(f"[baton:denied {tool}] {summary} was denied{why}. Do not run it.")
        elif gated.gate_id in rerun:
            lines.append(
                f"[baton:approved-rerun {tool}] {summary} was approved but did not run: "
                "propose it again exactly as before."
            )
        else:
            lines.append(f"[baton:approved {tool}] {summary} was approved and runs now.")
    if interrupted:
        lines.append("These tool calls were cut short before they returned a result:")
        for call in interrupted:
            lines.append(f"[baton:interrupted {call['tool'] or 'tool'}] {_call_summary(call)} (call {call['id']})")
        lines.append(
            "Check whether each one took effect, run it again if it did not, then continue the task "
            "from where it stopped."
        )
    elif decided:
        lines.append("Continue the task from where it stopped.")
    else:
        lines.append("No tool call was in flight. Continue the task from where it stopped.")
    return "\n".join(lines)


def rebuilt_prompt(
    conversation: Conversation,
    prompt: str,
    *,
    budget_tokens: int = DEFAULT_CONTEXT_TOKENS,
    result_chars: int = RESULT_CHARS,
) -> str:
    """The first prompt of a new session: the conversation so far, then ``prompt``.

    The first user turn (the task) is always kept; older items go first when the transcript
    does not fit ``budget_tokens``. The header says how much was dropped or truncated.
    """
    items = conversation.view()
    task = conversation.task
    if (
        task
        and not conversation.compactions
        and not any(item["type"] == "user" and item.get("text") == task for item in items)
    ):
        # The task never reached the agent as a turn (the run, or a resume before this one, was
        # killed first; a rebuilt resume's turn is its continuation prompt): it leads anyway.
        keep_first = 0
        head = [(f"[user]\n{task}", 0)]
    else:
        keep_first = 1 if items and items[0]["type"] == "user" else 0
        head = [_render(item, conversation, result_chars) for item in items[:keep_first]]
    remaining = budget_tokens - estimate_tokens(prompt) - 200 - sum(estimate_tokens(text) for text, _cut in head)
    tail: list[tuple[str, int]] = []
    for item in reversed(items[keep_first:]):  # newest first, until the budget is spent
        text, cut = _render(item, conversation, result_chars)
        cost = estimate_tokens(text)
        if cost > remaining:
            break
        remaining -= cost
        tail.append((text, cut))
    tail.reverse()
    dropped = len(items) - keep_first - len(tail) + conversation.dropped_items
    truncated = sum(cut for _text, cut in head + tail)
    kept = [text for text, _cut in head + tail]
    if dropped:
        kept.insert(len(head), f"[… {dropped} earlier items of the conversation omitted to fit the context budget …]")
    notes = []
    if dropped:
        notes.append(f"{dropped} earlier items were dropped (oldest first) to fit the context budget")
    if truncated:
        notes.append(f"{truncated} long tool inputs or results were truncated (their middle is omitted)")
    header = (
        f"{RESUME_MARKER} This run was interrupted and its agent session could not be restored, so baton "
        "rebuilt the conversation from the run's log. The transcript below is that conversation, verbatim"
        + ("; " + "; ".join(notes) if notes else "")
        + ". Treat it as your own history: the tool calls in it really ran (or were cut short where it says so)."
    )
    transcript = "\n\n".join(kept)
    return f"{header}\n\n<baton-transcript>\n{transcript}\n</baton-transcript>\n\n{prompt}"


def _render(item: Item, conversation: Conversation, result_chars: int) -> tuple[str, int]:
    kind = item["type"]
    if kind == "user":
        return f"[user]\n{item.get('text', '')}", 0
    if kind == "agent":
        return f"[assistant]\n{item.get('text', '')}", 0
    if kind == "summary":
        return f"[summary of the conversation before it was compacted]\n{item.get('text', '')}", 0
    if kind == "plan":
        lines = ["[plan]"]
        for entry in item.get("entries") or []:
            if isinstance(entry, dict):
                lines.append(f"- [{entry.get('status', '?')}] {entry.get('content', '')}")
        return "\n".join(lines), 0
    call = conversation.calls.get(item.get("call_id", ""))
    if call is None:
        return "[tool call]", 0
    status = call["status"]
    if status in ("pending", "in_progress", "interrupted"):
        status = "interrupted: no result was recorded"
    raw_input, cut_input = _clip(_as_text(call["input"]), result_chars)
    lines = [f"[tool call {call['tool'] or 'tool'} {call['id']} — {status}]", f"input: {raw_input}"]
    cut = cut_input
    result = call["text"] if call["text"] is not None else _as_text(call["output"]) if call["output"] else None
    if result is not None:
        shown, cut_result = _clip(result, result_chars)
        lines.append(f"result:\n{shown}")
        cut += cut_result
    return "\n".join(lines), cut


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _clip(text: str, limit: int) -> tuple[str, int]:
    if len(text) <= limit:
        return text, 0
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n… [{omitted} characters omitted] …\n{text[-half:]}", 1


def _call_summary(call: ToolCall) -> str:
    raw = call["input"]
    if isinstance(raw, dict):
        for key in ("command", "file_path", "path", "pattern", "url"):
            value = raw.get(key)
            if isinstance(value, str):
                return _one_line(value)
    return _one_line(call["title"] or _as_text(raw))


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _SUMMARY_CHARS else line[: _SUMMARY_CHARS - 1] + "…"


def claude_session_file(agent_home: Path, session_id: str) -> Path | None:
    """Claude Code's transcript of ``session_id`` under the agent home, if it is there."""
    projects = agent_home / ".claude" / "projects"
    if not projects.is_dir():
        return None
    for candidate in projects.glob(f"*/{session_id}.jsonl"):
        if candidate.is_file() and _holds_a_conversation(candidate):
            return candidate
    return None


def _holds_a_conversation(transcript: Path) -> bool:
    """Whether Claude Code can resume from it: a resume killed while Claude Code was forking
    leaves a file with only bookkeeping lines, and Claude then finds "no conversation"."""
    with transcript.open("rb") as lines:
        for line in lines:
            try:
                record = decode_json(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("type") in ("user", "assistant"):
                return True
    return False
