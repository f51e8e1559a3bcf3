"""The `dispatch` comparison topic (`compare/dispatch.py`) at quick sizes: every check passes and
each figure is recorded for both modules. Ratios are not asserted (they depend on the machine).
"""

import os

import pytest

from compare import dispatch as dispatch_topic


@pytest.mark.slow
def test_dispatch_topic_checks_pass_and_records_figures():
    res = dispatch_topic.run(quick=True)
    failing = [c.name for c in res.failed_checks()]  # speed targets: reported, not asserted
    assert res.checks and not failing, failing
    targets = [c for c in res.checks if c.target]
    assert len(targets) == 8  # a missed one is flagged in its table row too
    assert ("**MISSED**" in "".join(res.sections)) == any(not c.ok for c in targets)
    eager = ["eager add f32[8,8]", "eager dot f32[8,8]", "eager a @ b f32[8,8]"]
    cases = eager + ["jit x+1 f32[]", "jit 10 f32[4] args", "jit dict of 20 f32[4]", "mlp step"]
    for case in cases:
        for module in ("jax", "minijax"):
            assert res.timings_ms[f"{case}: {module}"] > 0
        assert res.extra["ratios"][case] > 0
    assert all(res.timings_ms[f"{case}: numpy"] > 0 for case in eager)
    assert min(res.extra["peak_memory_mib"].values()) > 200  # the 256 MiB array is in both


def test_children_run_on_the_cpu_where_this_process_holds_an_accelerator(monkeypatch):
    import jax
    root = str(dispatch_topic.ROOT)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert dispatch_topic.child_env({"A": "1"}) == {"A": "1", "PYTHONPATH": root}  # the CPU
    # the parent's path is kept after the repository's (a machine whose JAX and ml_dtypes
    # live on PYTHONPATH, as the TPU machine's do)
    assert dispatch_topic.child_env({"PYTHONPATH": "/opt/site"}) == {
        "PYTHONPATH": root + os.pathsep + "/opt/site"}
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert dispatch_topic.child_env({"A": "1"}) == {"A": "1", "PYTHONPATH": root,
                                                    "JAX_PLATFORMS": "cpu"}


def test_a_failing_memory_child_reports_its_stderr(monkeypatch):
    monkeypatch.setattr(dispatch_topic, "_MEMORY_SCRIPT",
                        "import sys; sys.stderr.write('no backend: the chip is busy\\n'); "
                        "sys.exit(1)")
    with pytest.raises(RuntimeError, match="exited 1; its stderr ends:\nno backend: the chip"):
        dispatch_topic.peak_memory_mib()


@pytest.mark.parametrize("platform", ["cpu", "tpu"])
def test_peak_memory_says_where_it_was_measured(monkeypatch, platform):
    import jax

    from compare._report import TopicResult
    monkeypatch.setattr(jax, "default_backend", lambda: platform)
    monkeypatch.setattr(dispatch_topic, "peak_memory_mib", lambda: {"jax": 257.0,
                                                                    "minijax": 258.0})
    res, sections = TopicResult("t"), []
    dispatch_topic._peak_memory(res, {}, sections)
    said = (dispatch_topic.CHIP_HELD in res.checks[0].name, dispatch_topic.CHIP_HELD in sections[0])
    assert said == ((True, True) if platform == "tpu" else (False, False))
