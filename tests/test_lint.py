"""ruff over every Python file of the project, with the rest of the tests.

The settings are in ruff.toml; .pre-commit-config.yaml runs the same check
before each commit. ruff is pinned in requirements.txt.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from sitekit.pages import ROOT


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(ROOT / ".venv" / "bin")) or shutil.which("ruff")
    command = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    result = subprocess.run([*command, "check", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
