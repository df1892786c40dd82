"""Playing a cassette back: what the scripted model server answers with ``ScriptedModelServer.replaying``.

Each ``POST`` is matched against the cassette (baton.cassettes.matching) and answered with the
recorded status, content type and body, the recorded run's workspace and agent home rewritten
to the replaying run's. ``timing="real"`` sends each piece when it came in the recording (its
``at`` after the request); ``"fast"`` sends the whole body at once.

A request that matches nothing is answered 400 in the provider's error shape, with header
``X-Baton-Error: replay_mismatch`` and the diff as the message, and is kept in ``mismatches``
(the run fails with ``replay_mismatch``). Side requests (no tools offered, and
``count_tokens``) that match nothing get the scripted server's own answer instead: an agent
may send a different number of them, and they carry nothing the run's result depends on.

A run replayed in several executions (a resume) plays the cassette on: each answer's position
is appended to the run's ``journal`` (JSON lines ``{"cassette": PATH, "position": N}``), and
the next execution's player skips what :func:`answered_in` finds there.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from baton.cassettes import Cassette, CassetteExchange, CassettePaths, Matcher, Mismatch, load_cassette
from baton.cassettes.matching import offers_tools
from baton.errors import UsageError

__all__ = ["CassettePlayer", "ReplayTiming", "answered_in"]

ReplayTiming = Literal["real", "fast"]
TIMINGS: tuple[ReplayTiming, ...] = ("real", "fast")


@dataclass
class CassettePlayer:
    """A cassette with its matcher, and what replaying it met."""

    cassette: Cassette
    timing: ReplayTiming = "fast"
    matcher: Matcher = field(init=False)
    mismatches: list[Mismatch] = field(default_factory=list)
    answered: list[CassetteExchange] = field(default_factory=list)
    journal: Path | None = None  # where each answer's position is appended (the run's, for a resume)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.timing not in TIMINGS:
            raise UsageError("invalid_argument", f"--replay-timing is real or fast, not {self.timing!r}")
        self.matcher = Matcher(self.cassette)

    @classmethod
    def load(cls, path: Path | str, *, timing: ReplayTiming = "fast") -> CassettePlayer:
        return cls(load_cassette(path), timing)

    def bind(self, *, workspace: Path | str | None, agent_home: Path | str | None) -> None:
        """The replaying run's workspace and agent home (for matching and for the answers)."""
        self.matcher.bind(CassettePaths(_str(workspace), _str(agent_home)))

    def match(self, method: str, path: str, body: object) -> CassetteExchange | Mismatch:
        found = self.matcher.match(method, path, body)
        with self._lock:
            if isinstance(found, Mismatch):
                if not _lenient(found):
                    self.mismatches.append(found)
            else:
                self.answered.append(found)
                if self.journal is not None:
                    self._note(found.position)
        return found

    def skip(self, positions: set[int]) -> None:
        """Exchanges an earlier execution of the run was answered with: never answered again."""
        self.matcher.skip(positions)

    def remaining(self) -> list[CassetteExchange]:
        """The unanswered exchanges that answer the task (those offering tools): what a resume can replay."""
        return [e for e in self.matcher.unanswered if offers_tools(e.body)]

    def _note(self, position: int) -> None:
        assert self.journal is not None
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"cassette": str(self.cassette.path), "position": position}) + "\n")

    def is_lenient(self, mismatch: Mismatch) -> bool:
        return _lenient(mismatch)


def _lenient(mismatch: Mismatch) -> bool:
    return mismatch.side or mismatch.path.split("?", 1)[0].endswith("/count_tokens")


def _str(path: Path | str | None) -> str | None:
    return None if path is None else str(path)


def answered_in(journal: Path, cassette: Path | str) -> set[int]:
    """The positions of ``cassette`` a run's journal says were answered (nothing for no journal)."""
    try:
        lines = journal.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return set()
    positions: set[int] = set()
    for line in lines:
        try:
            note = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if isinstance(note, dict) and note.get("cassette") == str(cassette) and isinstance(note.get("position"), int):
            positions.add(int(note["position"]))
    return positions
