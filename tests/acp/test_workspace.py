"""fs/* confinement: every way out of the workspace is refused with ``path_outside_workspace``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from baton.acp.workspace import Workspace, workspace_error
from baton.errors import WorkspaceError


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "work"
    outside = tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "a.txt").write_text("one\ntwo\nthree\n")
    (outside / "secret.txt").write_text("secret\n")
    (root / "out").symlink_to(outside)
    (root / "secret-link.txt").symlink_to(outside / "secret.txt")
    (root / "inner-link").symlink_to(root / "src")
    return root, outside


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "{root}/../outside/secret.txt",
        "{root}/out/secret.txt",
        "secret-link.txt",
        "{root}/out",
        "",
        "a\0b",
    ],
)
def test_paths_that_leave_the_workspace_are_refused(tree: tuple[Path, Path], path: str) -> None:
    root, _ = tree
    with pytest.raises(WorkspaceError) as refused:
        Workspace(root).resolve(path.replace("{root}", str(root)))
    assert refused.value.code == "path_outside_workspace"


def test_paths_inside_resolve_to_their_real_place(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    workspace = Workspace(root)
    assert workspace.resolve(f"{root}/src/a.txt") == root / "src" / "a.txt"
    assert workspace.resolve("src/../src/a.txt") == root / "src" / "a.txt"
    assert workspace.resolve(f"{root}/inner-link/a.txt") == root / "src" / "a.txt"
    assert workspace.resolve(f"{root}/new/file.txt") == root / "new" / "file.txt"


async def test_read_honours_line_and_limit_and_write_waits_for_the_log(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    committed = asyncio.Event()
    order: list[str] = []

    async def wait_logged() -> None:
        order.append("waited")
        await committed.wait()

    workspace = Workspace(root, wait_logged)
    assert await workspace.read_text_file(f"{root}/src/a.txt", line=2, limit=1) == "two\n"
    assert await workspace.read_text_file("src/a.txt") == "one\ntwo\nthree\n"
    writing = asyncio.ensure_future(workspace.write_text_file(f"{root}/made/new.txt", "new\n"))
    await asyncio.sleep(0.05)
    assert order == ["waited"] and not (root / "made" / "new.txt").exists()
    committed.set()
    await writing
    assert (root / "made" / "new.txt").read_text() == "new\n"
    with pytest.raises(WorkspaceError):
        await workspace.write_text_file(f"{root}/out/planted.txt", "x")
    assert not (outside / "planted.txt").exists()


def test_the_refusal_the_agent_gets_carries_the_code(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with pytest.raises(WorkspaceError) as refused:
        Workspace(root).resolve("../../etc/passwd")
    error = workspace_error(refused.value).to_error_obj()
    assert error["data"]["code"] == "path_outside_workspace"
    assert error["data"]["path"] == "../../etc/passwd"
    assert error["data"]["resolved"] == str(root.parent.parent / "etc" / "passwd")
