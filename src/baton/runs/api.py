"""``Baton``: the Python API the CLI (and later the server) are thin layers on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from baton.acp.extensions import ResumeParams
from baton.acp.host import AskHuman
from baton.acp.replay import AgentRestore
from baton.agents.base import AgentProcess
from baton.agents.claude.agent import ClaudeLaunch, InProcessClaude
from baton.agents.claude.environment import bundled_claude_binary, claude_environment
from baton.agents.command import COMMAND_AGENT, CREDENTIAL_VARIABLES, parse_agent_command
from baton.agents.launch import PreparedAgent, SubprocessLaunch, credentials_missing, prepare_subprocess_agent
from baton.agents.registry import AGENTS, AgentEntry, command_entry
from baton.config import Settings
from baton.errors import RefusedError, UsageError
from baton.events.entry import LogEntry
from baton.events.project import Projector, RunnerEvent
from baton.gates import Gatekeeper, Policy
from baton.gates.budget import (
    Budget,
    Spend,
    claude_budget_left,
    claude_turns_left,
    require_supported,
    spend_from_log,
)
from baton.gates.handles import Gate, local_user
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.budgeting import continue_budget
from baton.runs.cancelling import cancel_run, end_parked
from baton.runs.executor import RebuiltFallback, RunExecution
from baton.runs.executors import this_executor_id
from baton.runs.handoff import ExportResult, ImportResult, restore_latest_snapshot
from baton.runs.inbox import post_command
from baton.runs.model_source import ModelEndpoint, RunModel, ScriptedModels, start_run_model
from baton.runs.parking import pending_gates, wait_for_decisions, wake_local
from baton.runs.queries import Runs
from baton.runs.resume import (
    ResumePlan,
    check_resumable,
    plan_resume,
    rebuilt_prompt,
    resume_spec,
    run_keeping_conversation,
)
from baton.runs.sandboxing import check_run_sandbox, run_sandbox
from baton.runs.spec import RunOutcome, RunSpec, require_repo, run_request, spec_of_request
from baton.runs.workspaces import check_workspace_free, holds_workspace
from baton.sandbox.plan import SandboxPlan
from baton.snapshots import recorder_for
from baton.store import Redactor, RunRecord, SessionLog, Store

if TYPE_CHECKING:
    from baton.runs.workflows import DurableRuntime

__all__ = ["Baton", "RunHandle"]


def agent_entry(spec: RunSpec) -> AgentEntry:
    """The registry entry of the run's agent, or the one built for ``--agent-cmd``."""
    if spec.agent_command:
        if spec.agent != COMMAND_AGENT:
            raise UsageError("invalid_argument", "--agent-cmd and --agent are exclusive")
        return command_entry(parse_agent_command(spec.agent_command), trusted=spec.trust_agent_permissions)
    entry = AGENTS.get(spec.agent)
    if entry is None:
        raise UsageError("invalid_argument", f"unknown agent {spec.agent!r}; known: {', '.join(AGENTS)}")
    return entry


async def _outcome_of(done: asyncio.Future[RunOutcome]) -> RunOutcome:
    return await done


class RunHandle:
    """A run executing in this process."""

    resume_plan: ResumePlan | None = None  # set when the run was resumed (docs/resume.md)

    def __init__(self, execution: RunExecution, task: asyncio.Task[RunOutcome], baton: Baton | None = None) -> None:
        self._execution = execution
        self._task = task
        self._baton = baton
        self._stop_waiting = asyncio.Event()

    @property
    def run_id(self) -> str:
        return self._execution.run_id

    def cancel(self) -> None:
        """Ask the agent to stop its turn; the run ends as ``cancelled``."""
        self._execution.request_cancel()
        self._stop_waiting.set()

    async def send(self, text: str) -> int:
        """The next prompt of an interactive run, through its inbox; the inbox id."""
        return await post_command(self._execution.store, self.run_id, "user_message", {"content": text})

    async def close(self) -> int:
        """End an interactive run (``finished``) once the turns asked before are done."""
        return await post_command(self._execution.store, self.run_id, "close", {})

    async def wait(self, *, through_parks: bool = True) -> RunOutcome:
        """The run's outcome. A run that parks on a gate is waited through: once every gate is
        decided (from any process) it resumes here (``Baton.resume``) and this waits for that;
        ``through_parks=False`` returns the ``paused`` outcome at once (``--no-wait``)."""
        outcome = await asyncio.shield(self._task)
        while outcome.status == "paused" and through_parks:
            ended = await self.continue_parked(outcome)
            outcome = ended if ended is not None else await asyncio.shield(self._task)
        return outcome

    async def continue_parked(self, parked: RunOutcome) -> RunOutcome | None:
        """For a parked run: wait for its gates' decisions, then resume it in this process (this
        handle follows the new execution: ``wait`` again) and return None; or the run's outcome
        when it ended while parked (cancelled)."""
        if self._baton is None:
            return parked
        baton = self._baton
        if not await wait_for_decisions(baton.store, self.run_id, stop=self._stop_waiting):
            await baton.cancel_parked(self.run_id)  # cancelled here while parked
        record = await baton.store.get_run(self.run_id)
        if record.status != "paused":
            return _ended(record, parked)
        try:
            handle = await baton.resume(self.run_id)
        except RefusedError as exc:
            if exc.code != "run_ended":  # cancelled from another process just now
                raise
            return _ended(await baton.store.get_run(self.run_id), parked)
        self._execution, self._task, self.resume_plan = handle._execution, handle._task, handle.resume_plan
        return None


class Baton:
    """Opens the store and the session log; starts runs and reads them back."""

    def __init__(self, settings: Settings | None = None, *, concurrency: int | None = None) -> None:
        self.settings = settings or Settings.load()
        # How many runs execute in this process at once; more wait ``queued`` (docs/runs.md).
        self.concurrency = concurrency or self.settings.concurrency
        self._durable: DurableRuntime | None = None  # DBOS, launched when this Baton first executes a run
        self._store: Store | None = None
        self._log: SessionLog | None = None
        self._queries: Runs | None = None
        self.redactor = Redactor()
        self._runs: dict[str, RunHandle] = {}
        self._scripted = ScriptedModels()  # the scripted model servers of runs on a scenario
        self._closed = False

    async def __aenter__(self) -> Baton:
        if self._closed or self._store is not None:
            raise RuntimeError("a Baton cannot be reopened")
        self.settings.home.mkdir(parents=True, exist_ok=True)
        self._store = Store.open(self.settings.resolved_database_url)
        self._log = SessionLog(self._store, self.redactor)
        await self._log.__aenter__()
        self._queries = Runs.over(self._store, self._log, self.settings)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._durable is not None:  # runs still queued never start; executing ones end cancelled
            await self._durable.cancel_queued(frozenset(self._runs))
            self._durable.abort(frozenset(self._runs))
        for handle in self._runs.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await handle._task
        if self._durable is not None:
            from baton.runs import workflows

            await workflows.release(self._durable)
        if self._log is not None:
            await self._log.aclose()
        if self._store is not None:
            await self._store.aclose()
        await asyncio.to_thread(self._scripted.close)

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._store

    @property
    def log(self) -> SessionLog:
        if self._log is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._log

    @property
    def queries(self) -> Runs:
        """Runs, logs, snapshots, gates and commands as every face reads them (:mod:`baton.runs.queries`)."""
        if self._queries is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._queries

    async def start(self, spec: RunSpec, *, ask_human: AskHuman | None = None) -> RunHandle:
        """Check the request, record the run, and start executing it in this process.

        ``ask_human`` answers the permissions the policy says to ask about (``baton acp``).
        Refused with ``workspace_busy`` while another live run holds the repository — atomically
        with recording the run, so of two processes starting at once exactly one records its run.
        """
        entry, gatekeeper = await self._admit(spec)
        model = await self._run_model(entry, spec)
        try:
            return await self._start_recorded(spec, entry, gatekeeper, model, ask_human)
        except BaseException:
            await model.aclose()
            raise

    async def _start_recorded(
        self, spec: RunSpec, entry: AgentEntry, gatekeeper: Gatekeeper, model: RunModel, ask_human: AskHuman | None
    ) -> RunHandle:
        launcher = self._launcher(spec, entry, gatekeeper, model.endpoint)
        repo = str(Path(spec.repo).resolve())
        record = await self.store.create_run(
            agent=spec.agent,
            model=spec.model,
            permission_mode=spec.permission_mode,
            run_mode=spec.run_mode,
            repo=repo,
            cwd=repo,
            task_id=spec.task_id,
            budget_usd=spec.budget_usd,
            budget_turns=spec.budget_turns,
            budget_seconds=spec.budget_seconds,
            owner=spec.owner,
            run_id=spec.run_id,
            request=run_request(spec, model.source),
            executor_id=this_executor_id(),
            exclusive=holds_workspace,
        )
        model.bind(workspace=Path(repo), agent_home=self.settings.run_dir(record.id) / "agent-home")
        agent, gatekeeper, subprocess_entry = launcher(record.id)
        execution = self._execution(
            record.id, spec, gatekeeper, agent, subprocess_entry, ask_human=ask_human, model_source=model.source
        )
        execution.run_model = model
        return await self._execute(execution)

    async def _admit(self, spec: RunSpec, *, except_run: str | None = None) -> tuple[AgentEntry, Gatekeeper]:
        """Everything that refuses a start before anything is recorded: the repository, the agent,
        the budget, a busy workspace (early; the store's claim decides a race)."""
        repo = require_repo(spec.repo)
        entry = agent_entry(spec)
        await check_workspace_free(self.store, repo.resolve(), except_run=except_run)
        budget = Budget.from_json({"usd": spec.budget_usd, "turns": spec.budget_turns, "seconds": spec.budget_seconds})
        require_supported(budget, agent=entry.name, reports_cost=entry.reports_cost)
        policy = Policy.build(spec.permission_mode, allow=spec.allow, deny=spec.deny, ask=spec.ask, repo=repo.resolve())
        check_run_sandbox(self.settings, spec)
        return entry, Gatekeeper(policy, repo.resolve())

    async def _run_model(self, entry: AgentEntry, spec: RunSpec) -> RunModel:
        """The model of a run starting here: as ``_model``, or recording or replaying a cassette."""
        return await start_run_model(
            self._scripted,
            entry,
            self.settings,
            scenario=spec.scenario,
            record=spec.record,
            replay=spec.replay,
            replay_timing=spec.replay_timing,
            redactor=self.redactor,
        )

    def _model(self, entry: AgentEntry, scenario: str | None) -> ModelEndpoint:
        """Where the run's agent gets its model: the scenario's scripted server (started here), or
        the configured endpoint (baton.runs.model_source)."""
        model = self._scripted.endpoint(entry, self.settings, scenario)
        if scenario is not None:
            self.redactor.add(self._scripted.key)
        return model

    def _launcher(
        self, spec: RunSpec, entry: AgentEntry, gatekeeper: Gatekeeper, model: ModelEndpoint
    ) -> Callable[[str], tuple[AgentProcess, Gatekeeper, AgentEntry | None]]:
        """What starts the run's agent once the run has its id; refuses first (missing model
        credentials, an ACP agent that cannot be made to ask for what the policy gates)."""
        repo = Path(spec.repo).resolve()
        settings = model.settings
        if entry.package is not None:
            prepared = prepare_subprocess_agent(
                entry, gatekeeper, settings, parent=model.parent, budget_usd=spec.budget_usd
            )

            def subprocess_agent(run_id: str) -> tuple[AgentProcess, Gatekeeper, AgentEntry | None]:
                self._redact_credentials(prepared)
                home = self.settings.run_dir(run_id) / "agent-home"
                launch = SubprocessLaunch(run_id, repo, home, spec.model, run_sandbox(self.settings, spec, run_id))
                return prepared.start(launch), gatekeeper, entry

            return subprocess_agent
        api_key = settings.anthropic_api_key
        if not api_key:
            raise credentials_missing("anthropic")
        binary = settings.claude_binary or bundled_claude_binary()

        def claude(run_id: str) -> tuple[AgentProcess, Gatekeeper, AgentEntry | None]:
            self.redactor.add(api_key)
            run_dir = self.settings.run_dir(run_id)
            env = claude_environment(
                run_id=run_id,
                agent_home=run_dir / "agent-home",
                base_url=settings.anthropic_base_url,
                api_key=api_key,
                passthrough=settings.agent_env_passthrough,
                parent=model.parent,
            )
            launch = ClaudeLaunch(
                run_id=run_id,
                binary=binary,
                env=env,
                launch_dir=run_dir / "launch",
                model=spec.model,
                max_budget_usd=spec.budget_usd,
                max_turns=spec.budget_turns,
                permission_mode=spec.permission_mode,
                hook_timeout_seconds=self.settings.gate_grace_seconds + 60,
                sandbox=self._claude_sandbox(spec, run_id, binary),
            )
            planned = gatekeeper.with_plan_dir(run_dir / "agent-home" / ".claude" / "plans")
            return InProcessClaude(launch), planned, None

        return claude

    async def _prepare_restart(
        self, record: RunRecord, ask_human: AskHuman | None, scenario: str | None = None
    ) -> RunExecution:
        """A queued run whose process died before it started: take it over and start it from its
        beginning (its spec from ``runs.request``), as ``start`` would have."""
        spec = spec_of_request(record)
        if spec is None:
            raise RefusedError(
                "run_not_resumable",
                f"run {record.id} was queued by a process that died before it started, and its request "
                "was not recorded; start the task again",
            )
        if scenario is not None:
            spec = replace(spec, scenario=scenario)
        entry, gatekeeper = await self._admit(spec, except_run=record.id)
        model = await self._run_model(entry, replace(spec, record=None))  # a restart never overwrites a cassette
        try:
            launcher = self._launcher(spec, entry, gatekeeper, model.endpoint)
            if not await self.store.claim_run(
                record.id,
                expected_executor=record.executor_id,
                executor_id=this_executor_id(),
                exclusive=holds_workspace,
            ):
                raise RefusedError("run_active", f"run {record.id} was taken over by another process")
            model.bind(workspace=Path(spec.repo).resolve(), agent_home=self.settings.run_dir(record.id) / "agent-home")
            agent, gatekeeper, subprocess_entry = launcher(record.id)
        except BaseException:
            await model.aclose()
            raise
        execution = self._execution(
            record.id, spec, gatekeeper, agent, subprocess_entry, ask_human=ask_human, model_source=model.source
        )
        execution.run_model = model
        return execution

    def _claude_sandbox(self, spec: RunSpec, run_id: str, binary: Path) -> SandboxPlan:
        """The run's sandbox for Claude Code: its launch files and its binary read-only too."""
        launch_dir = self.settings.run_dir(run_id) / "launch"
        launch_dir.mkdir(parents=True, exist_ok=True)
        return run_sandbox(self.settings, spec, run_id, agent_paths=[launch_dir, binary])

    def _redact_credentials(self, prepared: PreparedAgent) -> None:
        """The subprocess agent's model key, and every key an ``--agent-cmd`` agent is given."""
        keys = [prepared.parent.get(name, "") for name in CREDENTIAL_VARIABLES if name.endswith("_KEY")]
        for secret in (prepared.api_key, *keys):
            if len(secret) >= 8:
                self.redactor.add(secret)

    async def runtime(self) -> DurableRuntime:
        """DBOS in this process, launched on first use (only processes that execute runs launch it)."""
        if self._durable is None:
            from baton.runs import workflows

            self._durable = await workflows.acquire(self.settings, self.concurrency)
        return self._durable

    async def _execute(self, execution: RunExecution) -> RunHandle:
        """Submit a built execution to this process's DBOS runtime; the handle of the run."""
        run_id = execution.run_id
        runtime = await self.runtime()

        def execute() -> Awaitable[RunOutcome]:
            return run_keeping_conversation(execution.run(), self.store, self.log, run_id)

        done = await runtime.submit(run_id, execute, store=self.store, adopt=self._adopt)
        handle = RunHandle(execution, asyncio.create_task(_outcome_of(done), name=f"baton-run-{run_id}"), self)
        self._runs[run_id] = handle
        return handle

    def _execution(
        self,
        run_id: str,
        spec: RunSpec,
        gatekeeper: Gatekeeper,
        agent: AgentProcess,
        entry: AgentEntry | None,
        *,
        resume: ResumeParams | None = None,
        resumed_from: str | None = None,
        ask_human: AskHuman | None = None,
        restore: AgentRestore | None = None,
        model_source: dict[str, Any] | None = None,
    ) -> RunExecution:
        self.log.open_run(run_id)
        execution = RunExecution(
            run_id=run_id,
            spec=spec,
            store=self.store,
            log=self.log,
            gatekeeper=gatekeeper,
            agent=agent,
            start_timeout=self.settings.agent_start_timeout_seconds,
            entry=entry,
            resume=resume,
            resumed_from=resumed_from,
            restore=restore,
            ask_human=ask_human,
            model_source=model_source,
            inbox_poll_seconds=self.settings.inbox_poll_seconds,
            idle_seconds=self.settings.interactive_idle_seconds,
            gate_grace_seconds=self.settings.gate_grace_seconds,
            gate_expiry_seconds=self.settings.gate_expiry_seconds,
            snapshots=recorder_for(
                run_id=run_id,
                run_dir=self.settings.run_dir(run_id),
                repo=Path(spec.repo).resolve(),
                home=self.settings.home,
                log=self.log,
                store=self.store,
            ),
        )
        return execution

    async def run(self, spec: RunSpec) -> RunOutcome:
        """Start a run and wait for its end."""
        return await (await self.start(spec)).wait()

    async def resume(
        self,
        run_id: str,
        prompt: str | None = None,
        *,
        repo: Path | None = None,
        ask_human: AskHuman | None = None,
        scenario: str | None = None,
    ) -> RunHandle:
        """Continue a run whose executor is gone, in this process (docs/resume.md).

        Without ``prompt`` the agent gets the continuation prompt naming the interrupted calls;
        an ended run needs ``prompt`` and continues its conversation in a new run
        (``resumed_from``). Refused with ``run_active`` while another process executes it. The
        run's model comes from where it came from (a run on a scenario gets a scripted server
        here); ``scenario`` continues it on that scenario instead, from now on.
        """
        executing = {known for known, handle in self._runs.items() if not handle._task.done()}
        plan, execution = await self._prepare_resume(run_id, prompt, repo, ask_human, executing, scenario)
        runtime = await self.runtime()
        target = execution.run_id
        attempt = 1 if plan is not None and plan.resumed_from else await runtime.next_attempt(target)

        def execute() -> Awaitable[RunOutcome]:
            return run_keeping_conversation(execution.run(), self.store, self.log, target)

        done = await runtime.submit(target, execute, store=self.store, adopt=self._adopt, attempt=attempt)
        handle = RunHandle(execution, asyncio.create_task(_outcome_of(done), name=f"baton-run-{target}"), self)
        self._runs[target] = handle
        handle.resume_plan = plan
        return handle

    async def _adopt(self, run_id: str) -> Callable[[], Awaitable[RunOutcome]]:
        """An execution of ``run_id`` that continues it in place (a step DBOS runs again)."""
        _, execution = await self._prepare_resume(run_id, None, None, None, set())
        return lambda: run_keeping_conversation(execution.run(), self.store, self.log, execution.run_id)

    async def _prepare_resume(
        self,
        run_id: str,
        prompt: str | None,
        repo: Path | None,
        ask_human: AskHuman | None,
        executing: set[str],
        scenario: str | None = None,
    ) -> tuple[ResumePlan | None, RunExecution]:
        """Check, take the run over (docs/resume.md), and build its execution; nothing runs yet.

        A run still ``queued`` never started (its process died first): it starts from its
        beginning, with no plan (``prompt`` and ``repo`` do not apply to it).
        """
        record = await self.store.get_run(run_id)
        check_resumable(record, prompt, executing)
        if record.status == "queued":
            return None, await self._prepare_restart(record, ask_human, scenario)
        if not record.is_terminal and (pending := await pending_gates(self.store, run_id)):
            raise RefusedError(
                "run_paused",
                f"run {run_id} waits for a decision on {', '.join(gate.id for gate in pending)}; decide it first",
                details={"gates": [gate.id for gate in pending]},
            )
        # Everything that can refuse is checked before the run is taken over.
        spec = await resume_spec(self.log, record, repo)
        if scenario is not None:
            spec = replace(spec, scenario=scenario)
        if record.agent not in AGENTS and not spec.agent_command:
            raise RefusedError("run_not_resumable", f"baton does not know the agent {record.agent!r}")
        entry = agent_entry(spec)  # an --agent-cmd run starts its recorded command again
        if repo is not None:  # perhaps on another machine sharing the store: the tree of the latest snapshot
            await restore_latest_snapshot(self.store, self.settings, record.id, Path(spec.repo))
        policy = Policy.build(spec.permission_mode, allow=spec.allow, deny=spec.deny, ask=spec.ask, repo=spec.repo)
        gatekeeper = Gatekeeper(policy, Path(spec.repo))
        model = self._model(entry, spec.scenario)
        prepared = None
        if entry.package is not None:
            prepared = prepare_subprocess_agent(
                entry, gatekeeper, model.settings, parent=model.parent, budget_usd=spec.budget_usd
            )
            api_key = prepared.api_key
        elif not (api_key := model.settings.anthropic_api_key or ""):
            raise credentials_missing("anthropic")
        binary = (model.settings.claude_binary or bundled_claude_binary()) if prepared is None else None
        await continue_budget(self.store, run_id)  # a continued resource_limit gate: the raised budget
        await check_workspace_free(self.store, Path(spec.repo), except_run=run_id)  # last: it reads other runs
        plan = await plan_resume(self.store, self.log, self.settings, run_id, prompt, repo=repo, executing=executing)
        plan = replace(
            plan, spec=replace(plan.spec, scenario=spec.scenario), params={**plan.params, "model_source": model.source}
        )
        await self._record_model_source(plan.run_id, model.source)
        if prepared is not None:
            self._redact_credentials(prepared)
        else:
            self.redactor.add(api_key)
        agent_home = self.settings.run_dir(plan.run_id) / "agent-home"
        agent: AgentProcess
        if prepared is not None:
            sandbox = run_sandbox(self.settings, plan.spec, plan.run_id)
            launch = SubprocessLaunch(plan.run_id, Path(plan.spec.repo), agent_home, plan.spec.model, sandbox)
            agent = prepared.start(launch)
        else:
            assert binary is not None
            gatekeeper = gatekeeper.with_plan_dir(agent_home / ".claude" / "plans")
            spent = spend_from_log(await self.log.read(plan.run_id))
            agent = InProcessClaude(self._resumed_claude(plan, model, api_key, binary, spent))
        execution = self._execution(
            plan.run_id,
            plan.spec,
            gatekeeper,
            agent,
            entry if prepared is not None else None,
            resume=plan.params,
            resumed_from=plan.resumed_from,
            ask_human=ask_human,
            restore=plan.restore if prepared is not None else None,
            model_source=model.source,
        )
        if prepared is None and plan.resume_session_id is not None:
            execution.rebuilt_fallback = self._rebuilt_fallback(plan, model, api_key, binary)
        return plan, execution

    async def _record_model_source(self, run_id: str, source: dict[str, Any]) -> None:
        """The run's ``runs.request`` names the model source it continues on (``resume --scenario``
        changes it; a run continuing an ended one records it here first)."""
        record = await self.store.get_run(run_id)
        request = record.request if isinstance(record.request, dict) else {}
        recorded = request.get("model_source")
        if recorded == source or (isinstance(recorded, dict) and recorded.get("kind") == source["kind"] == "endpoint"):
            return  # an endpoint run keeps the endpoint it started on as its record
        await self.store.update_run(run_id, request={**request, "model_source": source})

    def _rebuilt_fallback(
        self, plan: ResumePlan, model: ModelEndpoint, api_key: str, binary: Path | None
    ) -> RebuiltFallback:
        """For a native Claude resume: the rebuilt path, should Claude Code fail to load its session."""

        async def rebuilt() -> tuple[AgentProcess, ResumeParams, str]:
            assert binary is not None
            params: ResumeParams = {**plan.params, "path": "rebuilt"}
            prompt = rebuilt_prompt(plan.conversation, params["prompt"])
            spent = spend_from_log(await self.log.read(plan.run_id))
            fresh = replace(plan, resume_session_id=None, continues_deferred=False)
            return InProcessClaude(self._resumed_claude(fresh, model, api_key, binary, spent)), params, prompt

        return rebuilt

    def _resumed_claude(
        self, plan: ResumePlan, model: ModelEndpoint, api_key: str, binary: Path, spent: Spend
    ) -> ClaudeLaunch:
        run_dir = self.settings.run_dir(plan.run_id)
        env = claude_environment(
            run_id=plan.run_id,
            agent_home=run_dir / "agent-home",
            base_url=model.settings.anthropic_base_url,
            api_key=api_key,
            passthrough=model.settings.agent_env_passthrough,
            parent=model.parent,
        )
        return ClaudeLaunch(
            run_id=plan.run_id,
            binary=binary,
            env=env,
            launch_dir=run_dir / "launch",
            model=plan.spec.model,
            # a resumed Claude counts only its own spend against max_budget_usd: what is left
            max_budget_usd=claude_budget_left(plan.spec.budget_usd, spent.usd),
            max_turns=claude_turns_left(plan.spec.budget_turns, spent.turns),
            permission_mode=plan.spec.permission_mode,
            hook_timeout_seconds=self.settings.gate_grace_seconds + 60,
            resume_session_id=plan.resume_session_id,
            continues_deferred=plan.continues_deferred,
            sandbox=self._claude_sandbox(plan.spec, plan.run_id, binary),
        )

    async def runs(self, status: str | None = None) -> list[RunRecord]:
        """Runs oldest first; a ``running`` run whose executor is dead is ``interrupted``."""
        return await self.queries.list_runs(status)

    # Gates (docs/gates.md): the same decisions as the CLI and the HTTP API, from any process.

    async def gates(self, *, run_id: str | None = None, status: str | None = None) -> list[Gate]:
        """Gates (of ``run_id``, with ``status``) oldest first, as handles that decide them
        (``approve``, ``deny``, ``answer``, ``review_plan``, ``continue_run``)."""
        ledger = GateLedger(self.store)
        return [self._gate_handle(ledger, record) for record in await ledger.list(run_id=run_id, status=status)]

    async def gate(self, gate_id: str) -> Gate:
        """One gate (``gate_not_found``)."""
        ledger = GateLedger(self.store)
        return self._gate_handle(ledger, await ledger.get(gate_id))

    def _gate_handle(self, ledger: GateLedger, record: GateRecord) -> Gate:
        return Gate(ledger, record, decided_by=local_user(), on_decided=wake_local)  # a run here wakes at once

    # Hand-off to another BATON_HOME (baton.runs.handoff, docs/handoff.md).

    async def export_run(self, run_id: str, path: Path) -> ExportResult:
        """Write the run (log, events, snapshots and their archives, agent home) to one file;
        refused with ``run_active`` while it executes."""
        executing = {known for known, handle in self._runs.items() if not handle._task.done()}
        return await self.queries.export_run(run_id, Path(path), executing=executing)

    async def import_run(
        self, path: Path, *, repo: Path | None = None, base_repo: Path | None = None, force: bool = False
    ) -> ImportResult:
        """Recreate an exported run here (same id; ``run_exists`` if this home has it), its latest
        snapshot restored into ``repo`` (default: the run's recorded repository; the base commit's
        files from its own repository, else from ``base_repo``), ready to resume."""
        return await self.queries.import_run(Path(path), repo=repo, base_repo=base_repo, force=force)

    # Commands through the run's inbox, from any process (baton.runs.inbox).

    async def cancel(self, run_id: str, reason: str | None = None) -> int:
        """Cancel the run wherever it executes; the inbox id. A parked run (no executor) ends
        ``cancelled`` at once, its pending gates denied (``interrupt``, reason ``cancelled``)."""
        handle = self._runs.get(run_id)
        if handle is not None and not handle._task.done():
            inbox_id = await post_command(self.store, run_id, "cancel", {"reason": reason} if reason else {})
            handle.cancel()  # executing here: at once
            return inbox_id
        return (await cancel_run(self.store, run_id, reason)).inbox_id

    async def cancel_parked(self, run_id: str) -> bool:
        """End a parked run (``paused``, no live executor) as ``cancelled``; False when it is not parked."""
        return await end_parked(self.store, run_id)

    async def send(self, run_id: str, text: str) -> int:
        """A message for an interactive run (its next prompt); the inbox id."""
        return await post_command(self.store, run_id, "user_message", {"content": text})

    async def close(self, run_id: str) -> int:
        """End an interactive run after the turns asked before; the inbox id."""
        return await post_command(self.store, run_id, "close", {})

    async def set_permission_mode(self, run_id: str, permission_mode: str) -> int:
        """Switch the run's permission mode for its later decisions; the inbox id."""
        return await post_command(self.store, run_id, "set_permission_mode", {"permission_mode": permission_mode})

    def entries(self, run_id: str, after: int = 0) -> AsyncIterator[LogEntry]:
        """The run's committed log entries, then live ones until the run's log closes."""
        return self.log.subscribe(run_id, after=after)

    async def events(self, run_id: str, after: int = 0) -> AsyncIterator[RunnerEvent]:
        """Runner events, projected from the log; ``seq`` is the same on every read."""
        projector = Projector(run_id)
        async for entry in self.log.subscribe(run_id):
            for event in projector.feed(entry):
                if event["seq"] > after:
                    yield event


def _ended(record: RunRecord, parked: RunOutcome) -> RunOutcome:
    """The outcome of a parked run that ended without resuming (cancelled while parked)."""
    status = record.status if record.status in ("finished", "failed", "cancelled") else "cancelled"
    return RunOutcome(
        record.id,
        status,  # type: ignore[arg-type]
        stop_reason=record.status_reason or status,
        code=record.error_code,
        message=record.error_message,
        total_cost_usd=record.total_cost_usd,
        gate_id=parked.gate_id,
    )
