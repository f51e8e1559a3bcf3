"""Eight CPU devices for the mesh tests: each check script runs in ONE child process.

XLA reads `--xla_force_host_platform_device_count` once, when JAX is first imported, so the
8-device checks cannot run in the pytest process. A check script (tests/*_checks.py) calls
`request_eight_devices()` before importing JAX, defines `check_*` functions, and ends with
`run_checks(globals())`, which runs them all and prints one JSON line
`{"passed": [...], "failed": {name: traceback}}`. Its test module calls `check_names(script)`
to parametrize one test per check and `child_results(script)` (once, in a module fixture) to
run the child and read that line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import traceback


def request_eight_devices() -> None:
    """Ask XLA for 8 host devices; call it before JAX is first imported (in the child)."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=8").strip()


def run_checks(namespace: dict) -> None:
    """Run every `check_*` callable of a script's namespace, report each, keep going. The
    reverse-mode path is the one MINIJAX_DIRECT_LINEARIZE picks, as in tests/conftest.py."""
    direct = os.environ.get("MINIJAX_DIRECT_LINEARIZE")
    if direct is not None:
        import minijax  # the script has imported it already, with the eight devices
        minijax.config.update("jax_use_direct_linearize", direct == "1")
    passed, failed = [], {}
    for name, fn in sorted(namespace.items()):
        if name.startswith("check_") and callable(fn):
            try:
                fn()
                passed.append(name)
            except Exception:  # report every failure, run the others
                failed[name] = traceback.format_exc()
    print(json.dumps({"passed": passed, "failed": failed}))


def check_names(script: str) -> list[str]:
    """The `check_*` functions a check script defines, in file order."""
    with open(script) as f:
        return re.findall(r"^def (check_\w+)\(", f.read(), flags=re.M)


def child_results(script: str, timeout: float = 300) -> dict:
    """Run `script` in a child Python with this repository on its path; its JSON report.
    Raises AssertionError (with the child's output) when it fails or prints no report."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                          timeout=timeout, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])
