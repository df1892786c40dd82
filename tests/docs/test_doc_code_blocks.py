"""The code blocks of README.md and docs/*.md run as written.

Every fenced ``python`` block runs, each in a subprocess of its own, unless its info string says
``no-run`` (an illustrative fragment: names it does not define, a second machine). An ``sh``
block runs only when its info string says ``run``. The harness is the same for all (README.md,
"Testing"): the working directory is a fresh folder holding ``calc``, the sample repository
committed (``baton.testing.copy_sample_repo``); ``BATON_HOME`` is a fresh folder; the venv's
``bin`` is first on ``PATH``. A block whose info string names ``scenario=NAME`` gets the
scripted model playing that scenario (``ANTHROPIC_BASE_URL``, a placeholder key): it runs an
agent, so it is a slow test. Every other block is fast.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.cli._baton_cli import cli_environment, sample_repo

from baton.testing import ScriptedModelServer

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK_TIMEOUT = 120  # seconds a block may take (an agent's run, at most)
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    language: str
    attributes: tuple[str, ...]
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def scenario(self) -> str | None:
        for attribute in self.attributes:
            if attribute.startswith("scenario="):
                return attribute.removeprefix("scenario=")
        return None

    @property
    def runs(self) -> bool:
        if self.language == "python":
            return "no-run" not in self.attributes
        return self.language == "sh" and "run" in self.attributes


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, indented ones (inside a list) dedented."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = len(opening["indent"])
        words = opening["info"].split()
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"{path}:{index + 1}: a code block that never closes"
        code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        blocks.append(Block(path, index + 1, words[0] if words else "", tuple(words[1:]), code))
        index = end + 1
    return blocks


ALL_BLOCKS = [block for path in DOCUMENTS for block in code_blocks(path)]
RUNNABLE = [block for block in ALL_BLOCKS if block.runs]


def _param(block: Block) -> object:
    marks = [pytest.mark.slow] if block.scenario else []  # an agent run: ~5–10 s
    return pytest.param(block, id=block.name, marks=marks)


def test_most_python_blocks_run() -> None:
    python = [block for block in ALL_BLOCKS if block.language == "python"]
    fragments = [block.name for block in python if not block.runs]
    assert len(python) - len(fragments) >= 2 * len(fragments), f"too many python blocks are no-run: {fragments}"
    for block in python:
        unknown = [a for a in block.attributes if a != "no-run" and not a.startswith("scenario=")]
        assert not unknown, f"{block.name}: unknown info-string words {unknown}"


def test_every_scenario_a_block_names_exists() -> None:
    from baton.testing import list_scenarios

    named = {block.scenario for block in ALL_BLOCKS if block.scenario}
    assert named <= set(list_scenarios())


@pytest.mark.timeout(BLOCK_TIMEOUT + 30)
@pytest.mark.parametrize("block", [_param(block) for block in RUNNABLE])
def test_the_block_runs(block: Block, tmp_path: Path) -> None:
    sample_repo(tmp_path / "calc")
    env = cli_environment(tmp_path / "baton-home")
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    with contextlib.ExitStack() as stack:
        if block.scenario is not None:
            server = stack.enter_context(ScriptedModelServer(block.scenario))
            env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="sk-docs-example-placeholder")
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    assert done.returncode == 0, (
        f"{block.name} exited {done.returncode}:\n{block.code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
