"""The comparison topics of the JAX 201 pages, run at quick sizes: every check must pass.

Each runs minijax next to JAX; a few checks (a JAX feature minijax does not model) run JAX
alone, and each check says which (`Check.runs`): every topic here has checks that compare the
two modules.

Each topic is one test so `pytest -n 2` can spread them over workers. Quick mode writes any
files (profiler traces, XLA dumps) to fresh temporary folders, so parallel workers never share
an output path.
"""

import importlib
import shutil

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


# What the topics decide per platform (their TPU runs: chapters/data/compare-tpu.json), checked
# here without a TPU.

def test_pallas_compiles_without_interpret_on_a_tpu_only_in_both_modules():
    from compare.pallas import compiles_without_interpret
    assert compiles_without_interpret("tpu", "jax") and compiles_without_interpret("tpu", "minijax")
    assert not compiles_without_interpret("cpu", "jax")
    assert not compiles_without_interpret("cpu", "minijax")
    assert compiles_without_interpret("gpu", "jax")
    assert not compiles_without_interpret("gpu", "minijax")


def test_precision_default_is_one_bf16_pass_on_a_tpu_only():
    from compare.precision_xla import cpu_note, one_bf16_pass_default
    assert one_bf16_pass_default("tpu") and not one_bf16_pass_default("cpu")
    assert cpu_note("cpu") == "" and "CPU device" in cpu_note("tpu")


def test_bf16_passes_split_in_numpy_three_passes_win_back_the_digits():
    import numpy as np

    from compare.precision_xla import bf16_passes
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 128), np.float32), rng.standard_normal((128, 8), np.float32)
    exact = a.astype(np.float64) @ b
    err = {p: np.abs(np.asarray(bf16_passes(a, b, p), np.float64) - exact).max()
           for p in (1, 3)}
    assert err[1] > 100 * err[3] > 0


@pytest.mark.slow
def test_precision_xla_cpu_parts_run_on_the_cpu_device_off_a_cpu():
    """With the platform said to be a TPU, the compiler options run on the CPU device, the dump
    subprocesses with JAX_PLATFORMS=cpu, and minijax's fused chain is checked against JAX's:
    every check passes on this CPU, and the CPU parts say where they ran."""
    from compare import precision_xla
    from compare._report import TopicResult
    res = TopicResult("precision_xla off a CPU", runs="jax")
    precision_xla._compile_options(res, True, "tpu")
    dump_dir, dumps = precision_xla._hlo_dumps(res, True, "tpu")
    precision_xla._describe_hlo_dump(res, dumps, dump_dir, True, "tpu")
    shutil.rmtree(dump_dir, ignore_errors=True)
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert not failing, failing
    names = [c.name for c in res.checks]
    assert "jax: dump subprocess (on the CPU device) exited cleanly" in names
    assert "disabling fusion for this one function gives more kernels (on the CPU device)" in names
    assert any(n.startswith("on the TPU, minijax's programs have JAX's kernel counts")
               for n in names)
    assert "ran on the CPU device" in res.sections[0]
    assert "JAX_PLATFORMS=cpu XLA_FLAGS=" in res.sections[1]
