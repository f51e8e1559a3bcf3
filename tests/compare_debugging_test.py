"""The `debugging` comparison topic (`compare/debugging.py`) at quick sizes: every check passes,
each of its five parts compares minijax with JAX, and the breakpoint session is in the report.
The topic runs in a child process: it turns global flags (`jax_debug_nans`, `jax_debug_infs`)
on and off in both modules, and reads JAX's messages, which must not depend on what earlier
tests in the same process configured."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = """
import json
from compare import debugging
res = debugging.run(quick=True)
print(json.dumps({"checks": [(c.name, c.ok, c.runs) for c in res.checks],
                  "sections": res.sections}))
"""


@pytest.mark.slow
def test_debugging_topic_checks_pass_under_both_modules():
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    checks, sections = doc["checks"], doc["sections"]
    failing = [name for name, ok, _ in checks if not ok]
    assert checks and not failing, failing
    both = [name for name, _, runs in checks if runs == "both"]
    for part in ("debug.print under", "debug.callback under", "checkify, ", "jax_debug_nans",
                 "jax_debug_infs", "debug.breakpoint under", "visualize_array_sharding"):
        assert any(n.startswith(part) for n in both), part
    for how in ("eager", "jit", "vmap", "grad"):
        assert any(n.startswith(f"debug.breakpoint under {how}") for n in both), how
    session = next(s for s in sections if s.startswith("### debug.breakpoint"))
    assert "Entering jdb:" in session and "*** NameError" in session
    assert len(sections) == 5
