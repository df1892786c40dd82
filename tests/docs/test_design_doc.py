"""docs/design.md, the product contract, lives in the repository and is what everything cites.

Nothing in the repository may point at a contract outside it; every section cited by name
after ``docs/design.md`` exists; the error-code table is ``baton.errors.CODES``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from baton.errors import CODES

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
# Spelled in pieces so that this file does not mention them itself.
FORBIDDEN = ("DESIGN" + ".md", "../" + "shared", "/work/" + "shared")
# The changelog is history, written by the lead from the reports: it may name what was.
NOT_SCANNED = {"CHANGELOG.md"}
HTTP_ONLY_CODES = {"internal_error"}


def repository_files() -> list[Path]:
    """Tracked files and new ones not ignored: what a commit of this work tree would hold."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and name not in NOT_SCANNED]


def test_nothing_in_the_repository_points_outside_it_for_the_contract() -> None:
    offending = []
    for path in repository_files():
        if not path.is_file() or path.is_symlink():
            continue
        text = path.read_bytes()
        if b"\0" in text[:4096]:
            continue  # binary
        for number, line in enumerate(text.decode("utf-8", errors="replace").splitlines(), 1):
            if any(word in line for word in FORBIDDEN):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offending, "the contract is docs/design.md; these point elsewhere:\n" + "\n".join(offending)


def design_sections() -> list[str]:
    """Headings and bold paragraph leads of docs/design.md."""
    text = DESIGN.read_text()
    return re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE) + re.findall(r"\*\*([^*]+)\*\*", text)


def test_every_cited_section_exists() -> None:
    sections = design_sections()
    cited = re.compile(r"design\.md\)?,? \"([^\"]+)\"")
    missing = []
    for path in repository_files():
        if path.suffix not in {".py", ".md"} or not path.is_file():
            continue
        for found in cited.findall(path.read_text()):
            name = " ".join(found.split())  # a citation may wrap
            if not any(section.startswith(name) for section in sections):
                missing.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert not missing, "cited sections that docs/design.md does not have:\n" + "\n".join(missing)


def test_the_error_code_table_is_the_code_s() -> None:
    text = DESIGN.read_text()
    table = text.split("\n## Error codes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "`" in line]
    documented = {code for row in rows for code in re.findall(r"`([a-z_]+)`", row.split("|")[2])}
    expected = set(CODES) | HTTP_ONLY_CODES
    missing, unknown = sorted(expected - documented), sorted(documented - expected)
    assert not missing, f"codes missing from docs/design.md 'Error codes': {missing}"
    assert not unknown, f"codes in docs/design.md that baton.errors lacks: {unknown}"
