"""The layering of docs/architecture.md, executable: every module of src/baton against the drawing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "baton"
_NO_ALL = ("store/migrations/",)  # Alembic's scripts: loaded by Alembic, imported by nothing


def _drawing() -> tuple[dict[str, int], set[int]]:
    """Unit (a package, or a module like ``acp.transport``) → its layer (0 = the bottom), and the peer layers."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```layers block"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    layer_of: dict[str, int] = {}
    peers: set[int] = set()
    for depth, line in enumerate(reversed(lines)):
        _name, units = line.split(":", 1)
        if "(peers)" in units:
            peers.add(depth)
        for unit in units.replace("(peers)", "").split():
            layer_of[unit] = depth
    return layer_of, peers


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str, layer_of: dict[str, int]) -> str | None:
    """The drawing's unit of ``baton.x.y…``: the longest listed prefix (``acp.transport`` before ``acp``)."""
    parts = module.split(".")[1:]
    if not parts:
        return "baton"
    for length in range(len(parts), 0, -1):
        candidate = ".".join(parts[:length])
        if candidate in layer_of:
            return candidate
    return None


def _imports(tree: ast.AST) -> list[tuple[str, list[str], int]]:
    """(module, names, line) of every ``baton`` import, wherever it is."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "baton"
        ):
            if node.module == "baton":  # ``from baton import x``: a submodule or a name of the root
                for alias in node.names:
                    is_module = (SOURCE / alias.name).is_dir() or (SOURCE / f"{alias.name}.py").is_file()
                    found.append((f"baton.{alias.name}" if is_module else "baton", [alias.name], node.lineno))
            else:
                found.append((node.module, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names if alias.name.split(".")[0] == "baton")
    return found


def _modules() -> list[Path]:
    return sorted(SOURCE.rglob("*.py"))


def test_the_drawing_names_every_package() -> None:
    layer_of, _peers = _drawing()
    packages = {path.name for path in SOURCE.iterdir() if (path / "__init__.py").is_file()}
    packages |= {path.stem for path in SOURCE.glob("*.py") if path.stem != "__init__"}
    assert packages - set(layer_of) == set(), "a package the drawing does not place"


def test_every_import_is_one_the_drawing_allows() -> None:
    layer_of, peers = _drawing()
    wrong = []
    for path in _modules():
        module = _module_name(path)
        unit = _unit(module, layer_of)
        assert unit is not None, module
        for target, _names, line in _imports(ast.parse(path.read_text())):
            other = _unit(target, layer_of)
            assert other is not None, f"{module}:{line} imports {target}, which the drawing does not place"
            if other == unit or (other.split(".")[0] == unit.split(".")[0] and layer_of[other] <= layer_of[unit]):
                continue  # its own package (a protocol module of it sits lower: allowed)
            mine, theirs = layer_of[unit], layer_of[other]
            if theirs < mine or (theirs == mine and mine in peers):
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {unit} (layer {mine}) imports {target} (layer {theirs})")
    assert wrong == []


def test_no_module_imports_another_packages_private_module_or_name() -> None:
    private = []
    for path in _modules():
        module = _module_name(path)
        package = module.split(".")[1] if "." in module else ""
        for target, names, line in _imports(ast.parse(path.read_text())):
            parts = target.split(".")
            if len(parts) > 1 and parts[1] == package:
                continue  # its own package's privates are its own business
            if any(part.startswith("_") for part in parts[1:]):
                private.append(f"{path.relative_to(ROOT)}:{line}: {target}")
            private += [
                f"{path.relative_to(ROOT)}:{line}: {target}.{name}"
                for name in names
                if name.startswith("_") and name != "__version__"
            ]
    assert private == []


def test_every_module_declares_all() -> None:
    missing = [
        str(path.relative_to(SOURCE))
        for path in _modules()
        if not any(str(path.relative_to(SOURCE)).startswith(prefix) for prefix in _NO_ALL)
        and not any(
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in getattr(node, "targets", [getattr(node, "target", None)])
            )
            for node in ast.parse(path.read_text()).body
        )
    ]
    assert missing == []


def test_webhooks_sit_between_the_store_and_the_faces_that_run_them() -> None:
    """``baton.notify`` reads the store and is run by ``baton serve`` and ``baton worker``: it
    knows nothing of runs' execution (no ``baton.runs``), so a webhook never blocks a run."""
    layer_of, _peers = _drawing()
    assert layer_of["store"] < layer_of["notify"] < layer_of["runs"] < layer_of["server"]
    imported = {
        target
        for path in (SOURCE / "notify").rglob("*.py")
        for target, _names, _line in _imports(ast.parse(path.read_text()))
    }
    assert not any(target.startswith(("baton.runs", "baton.agents", "baton.acp")) for target in imported)
    assert "baton.store.deliveries" in imported


def test_the_mcp_proxy_sits_between_the_gates_and_the_core_and_alone_imports_the_sdk() -> None:
    """``baton.mcp`` decides every ``tools/call`` with the gates and is started by the core (the
    host and the agents are only handed its endpoints); only it imports the ``mcp`` SDK."""
    layer_of, _peers = _drawing()
    assert layer_of["gates"] < layer_of["mcp"] < layer_of["acp"] < layer_of["runs"]
    outside = []
    for path in _modules():
        if path.is_relative_to(SOURCE / "mcp"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            outside += [
                f"{path.relative_to(ROOT)}: {name}" for name in names if name.split(".")[0] in ("mcp", "mcp_types")
            ]
    assert outside == []
