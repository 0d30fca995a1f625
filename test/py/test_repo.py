"""The repository's promises: CI runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sh_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.S)]


def test_ci_runs_the_readme_test_command() -> None:
    blocks = _sh_blocks((ROOT / "README.md").read_text())
    test_command = next(b for b in blocks if "tools/run_tests.sh" in b)
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_command


def test_readme_demo_command_runs_the_demo() -> None:
    blocks = _sh_blocks((ROOT / "README.md").read_text())
    assert any(b.endswith(".venv/bin/python -m meshjit.demo") for b in blocks)
