"""The effective policy of a run: a permission mode plus allow, deny and ask rules.

Sources, all merged (order only decides which matching rule a decision names):

1. the run's own rules (``--allow``/``--deny``, the API request): parse errors are
   ``invalid_argument``;
2. the user/server configuration (``config_rules``): parse errors are ``config_invalid``;
3. the repository's ``.baton/policy.toml`` as committed at HEAD: it may only add deny and ask
   rules; its allow rules count only with ``trusted_repo`` and are otherwise kept in
   :attr:`Policy.ignored` (and logged) so the run can report them.

Precedence between lists is fixed (deny > ask > allow), whatever the source.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from baton.errors import RefusedError, UsageError
from baton.gates.modes import PermissionMode, parse_mode
from baton.gates.repo_policy import POLICY_PATH, read_repo_policy, rule_lists
from baton.gates.rules import Rule, RuleSyntaxError, parse_rule

__all__ = ["Policy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Policy:
    """An immutable policy; build it with :meth:`build`, change its mode with :meth:`with_mode`."""

    mode: PermissionMode
    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    ignored: tuple[Rule, ...] = ()
    """Repository allow rules that were ignored because the repository is not trusted."""
    agent_runs_unprivileged: bool = False

    @classmethod
    def build(
        cls,
        mode: str,
        *,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        ask: Sequence[str] = (),
        config_rules: Mapping[str, Sequence[str]] | None = None,
        repo: Path | None = None,
        trusted_repo: bool = False,
        agent_runs_unprivileged: bool = False,
    ) -> Policy:
        """Validate and merge every source (see the module docstring).

        Raises ``UsageError`` (``invalid_argument``, ``config_invalid``) and, for
        ``bypassPermissions`` as root, ``RefusedError("bypass_refused_as_root")``.
        """
        checked = _check_mode(parse_mode(mode), agent_runs_unprivileged)
        run = {"allow": allow, "deny": deny, "ask": ask}
        for name, items in run.items():
            if isinstance(items, str):
                raise UsageError("invalid_argument", f"{name} must be a list of rules, not a string")
        lists: dict[str, list[Rule]] = {name: _parse(items, "run") for name, items in run.items()}
        if config_rules is not None:
            config = rule_lists(config_rules, where="the permission configuration")
            for name, items in config.items():
                lists[name] += _parse(items, "config")
        ignored: list[Rule] = []
        if repo is not None:
            for name, items in read_repo_policy(repo).items():
                rules = _parse(items, "repo")
                if name == "allow" and not trusted_repo:
                    ignored += rules
                else:
                    lists[name] += rules
        if ignored:
            log.warning(
                "ignored %d allow rule(s) from %s of an untrusted repository: %s",
                len(ignored),
                POLICY_PATH,
                ", ".join(rule.text for rule in ignored),
            )
        return cls(
            mode=checked,
            allow=tuple(lists["allow"]),
            deny=tuple(lists["deny"]),
            ask=tuple(lists["ask"]),
            ignored=tuple(ignored),
            agent_runs_unprivileged=agent_runs_unprivileged,
        )

    def with_mode(self, mode: str) -> Policy:
        """The same rules under another mode (validated like :meth:`build`)."""
        return replace(self, mode=_check_mode(parse_mode(mode), self.agent_runs_unprivileged))


def _check_mode(mode: PermissionMode, agent_runs_unprivileged: bool) -> PermissionMode:
    if mode == "bypassPermissions" and not agent_runs_unprivileged and os.geteuid() == 0:
        raise RefusedError(
            "bypass_refused_as_root",
            "bypassPermissions is refused when the agent runs as root; run it as an unprivileged "
            "user or choose another permission mode",
            details={"mode": mode},
        )
    return mode


def _parse(items: Iterable[str], source: str) -> list[Rule]:
    code = "invalid_argument" if source == "run" else "config_invalid"
    where = {"run": "", "config": " in the configuration", "repo": f" in {POLICY_PATH}"}[source]
    rules = []
    for text in items:
        if not isinstance(text, str):
            raise UsageError(code, f"rules must be strings, got {text!r}{where}")
        try:
            rules.append(parse_rule(text, source=source))
        except RuleSyntaxError as exc:
            raise UsageError(
                code, f"invalid rule {text!r}{where}: {exc}", details={"rule": text, "source": source}
            ) from exc
    return rules
