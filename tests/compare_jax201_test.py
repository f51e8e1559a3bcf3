"""The comparison topics of the JAX 201 pages, run at quick sizes: every check must pass.

Each runs minijax next to JAX; a few checks (a JAX feature minijax does not model) run JAX
alone, and each check says which (`Check.runs`): every topic here has checks that compare the
two modules.

Each topic is one test so `pytest -n 2` can spread them over workers. Quick mode writes any
files (profiler traces, XLA dumps) to fresh temporary folders, so parallel workers never share
an output path.
"""

import importlib

import pytest

TOPICS = ["placement", "sharding", "shard_map", "callbacks", "offloading", "compute_on",
          "pallas", "profiling", "precision_xla"]


@pytest.mark.slow
@pytest.mark.parametrize("topic", TOPICS)
def test_topic_checks_pass(topic):
    mod = importlib.import_module(f"compare.{topic}")
    res = mod.run(quick=True)
    assert res.checks, f"{topic}: no checks were recorded"
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    if failing:
        print(f"{topic}: failing checks:\n  " + "\n  ".join(failing))
    assert not failing, f"{topic}: {len(failing)} failing check(s): {failing}"
    assert res.sections, f"{topic}: no explanatory sections"
    both = [c for c in res.checks if (c.runs or res.runs) == "both"]
    assert both, f"{topic}: no check compares minijax with JAX"
    assert all(v >= 0 for v in res.timings_ms.values()), f"{topic}: negative timing"
