"""Gates: the policy half of the Gatekeeper (modes, rules, sources) and its decisions.

See docs/policy.md for modes, tool groups, rule syntax and precedence.
"""

from baton.gates.gatekeeper import Decision, Gatekeeper, ToolCall
from baton.gates.modes import MODES, PermissionMode, ToolGroup, parse_mode, tool_group
from baton.gates.paths import PROTECTED_DIRS
from baton.gates.policy import Policy
from baton.gates.rules import Rule, parse_rule

__all__ = [
    "MODES",
    "PROTECTED_DIRS",
    "Decision",
    "Gatekeeper",
    "PermissionMode",
    "Policy",
    "Rule",
    "ToolCall",
    "ToolGroup",
    "parse_mode",
    "parse_rule",
    "tool_group",
]
