"""``baton worker [--concurrency N] [--labels k=v,…]``: execute runs adopted from dead executors
(docs/runs.md "Workers") and, on Postgres, runs queued for the fleet (docs/fleet.md)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError

if TYPE_CHECKING:
    from baton.runs import Baton

__all__ = ["worker_command"]


def _labels_option(value: str | None) -> str | None:
    """``--labels`` checked as click parses it (a usage error names the stable code)."""
    if value is None:
        return None
    from baton.runs.fleet import parse_labels

    try:
        parse_labels(value)
    except BatonError as exc:
        raise typer.BadParameter(f"{exc.code}: {exc.message}") from None
    return value


@app.command("worker")
def worker_command(
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="Runs executing at once (default BATON_CONCURRENCY, 2)."),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", min=0.05, help="Seconds between two scans for adoptable runs.")
    ] = 1.0,
    fleet: Annotated[
        bool | None,
        typer.Option(
            "--fleet/--no-fleet",
            help="Take runs queued for the fleet (default: on Postgres; --fleet on SQLite: fleet_requires_postgres).",
        ),
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            help="What this worker offers, NAME=VALUE,… (e.g. gpu=yes): it takes the fleet runs asking for "
            "these labels or fewer (docs/fleet.md).",
            callback=_labels_option,
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", min=0, max=65535, help="Serve GET /metrics (Prometheus) on 127.0.0.1:PORT (0: any)."
        ),
    ] = None,
) -> None:
    """Adopt and execute runs whose process died and which have work (an inbox message, a decided gate);
    on Postgres, take runs queued for the fleet (baton serve --no-execute, baton run --queue) and
    continue those of dead workers.

    SIGTERM or SIGINT stops adopting and waits for the runs executing here; a second one cancels them.
    """
    try:
        from baton.runs.fleet import parse_labels

        given = parse_labels(labels)
        code = asyncio.run(_work(Settings.load(), concurrency, interval, metrics_port, fleet, given))
    except BatonError as exc:
        code = report_error(exc, False)
    raise typer.Exit(code)


async def _refresh_reasons(baton: Baton, stop: asyncio.Event, every: float) -> None:
    """Keep queued fleet runs' ``status_reason`` true as workers come and go."""
    while not stop.is_set():
        try:
            await baton.refresh_queue_reasons()
        except Exception as exc:  # tried again next time: the task never dies silently
            sys.stderr.write(f"baton worker: cannot refresh queued runs' reasons: {exc}\n")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def _work(
    settings: Settings,
    concurrency: int | None,
    interval: float,
    metrics_port: int | None,
    fleet: bool | None,
    labels: dict[str, str],
) -> int:
    from baton.notify import Notifier
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import
    from baton.runs.adoption import Adopter
    from baton.runs.fleet import Takeover, is_postgres, require_postgres
    from baton.runs.lock_watch import LockWatch

    if fleet:
        require_postgres(settings, "baton worker --fleet")
    in_fleet = is_postgres(settings.resolved_database_url) if fleet is None else fleet
    if labels and not in_fleet:
        raise UsageError("invalid_argument", "--labels are for a worker of the fleet (Postgres, not --no-fleet)")

    stop = asyncio.Event()
    notified = asyncio.Event()  # set once the runs executing here have ended: their events are read first
    loop = asyncio.get_running_loop()
    async with Baton(
        settings, concurrency=concurrency, metrics=metrics_port is not None, fleet=in_fleet, labels=labels
    ) as baton:
        runtime = await baton.runtime()  # an executing process: DBOS launches now
        taking: asyncio.Task[None] | None = None
        watching: asyncio.Task[None] | None = None
        reasons: asyncio.Task[None] | None = None
        if in_fleet:  # its lock first, then the queue; and the runs of workers that died
            await baton.join_fleet(concurrency)
            metrics = baton.telemetry.metrics if baton.telemetry is not None else None
            depth = metrics.queue_depth if metrics is not None else None
            takeover = Takeover(baton.store, baton.enqueue_again, depth=depth)
            taking = asyncio.create_task(takeover.run(stop), name="baton-takeover")
            assert runtime.lock is not None
            watch = LockWatch(runtime.lock, runtime, baton.store, baton.log, report=_say)
            watching = asyncio.create_task(watch.run(stop), name="baton-lock-watch")
            reasons = asyncio.create_task(_refresh_reasons(baton, stop, interval), name="baton-queue-reasons")
        if metrics_port is not None and baton.telemetry is not None:  # None: OTEL_SDK_DISABLED
            bound = baton.telemetry.serve_metrics(metrics_port)
            sys.stderr.write(f"baton worker: metrics on http://127.0.0.1:{bound}/metrics\n")

        def on_signal() -> None:
            if stop.is_set():  # the second signal: cancel what still executes
                runtime.abort(runtime.executing)
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal)
        for webhook in settings.notify_webhooks:  # a webhook's secret never reaches a log
            baton.redactor.add(webhook.secret)
        # Webhooks (docs/web.md "Webhooks"): this worker delivers the store's events too.
        notifying = asyncio.create_task(Notifier(baton.store, settings).run(notified), name="baton-notify")
        offered = ",".join(f"{key}={value}" for key, value in labels.items())
        fleet_line = (", taking fleet runs" + (f" (labels {offered})" if offered else "")) if in_fleet else ""
        sys.stderr.write(
            f"baton worker: executor {runtime.executor_id}, concurrency {baton.concurrency}{fleet_line}, "
            f"scanning every {interval:g} s\n"
        )
        sys.stderr.flush()
        try:
            await Adopter(baton, interval=interval).run(stop)
            if runtime.executing:  # drain: the runs adopted here end here
                sys.stderr.write(f"baton worker: stopping; waiting for {len(runtime.executing)} run(s)\n")
                sys.stderr.flush()
                await runtime.wait_idle()
        finally:
            notified.set()
            await notifying
            if taking is not None:
                await taking
            if watching is not None:
                await watching
            if reasons is not None:
                await reasons
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
    sys.stderr.write("baton worker: stopped\n")
    return 0


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
