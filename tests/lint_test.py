"""The tree passes ruff with the project's settings (pyproject.toml [tool.ruff]), as `make lint`
checks it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it is in the dev extras)")
    result = subprocess.run([ruff, "check", "."], cwd=ROOT,  # as `make lint` does
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
