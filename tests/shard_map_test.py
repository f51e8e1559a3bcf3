"""shard_map and collectives (minijax/shard_map.py, minijax/lax/parallel.py) against JAX, on 8
CPU devices.

All checks run in ONE child process (tests/shard_map_checks.py), which sets
XLA_FLAGS=--xla_force_host_platform_device_count=8 before JAX is imported; each check is then
reported here as its own test.
"""

import json
import os
import re
import subprocess
import sys

import pytest

_SCRIPT = os.path.join(os.path.dirname(__file__), "shard_map_checks.py")
with open(_SCRIPT) as _f:
    CHECKS = re.findall(r"^def (check_\w+)\(", _f.read(), flags=re.M)


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, _SCRIPT], capture_output=True, text=True,
                          timeout=300, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])


def test_every_check_ran(results):
    assert len(CHECKS) >= 14
    assert sorted(results["passed"] + list(results["failed"])) == sorted(CHECKS)


@pytest.mark.parametrize("name", CHECKS)
def test_shard_map(results, name):
    if name in results["failed"]:
        pytest.fail(results["failed"][name], pytrace=False)
    assert name in results["passed"]
