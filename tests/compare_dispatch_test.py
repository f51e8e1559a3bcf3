"""The `dispatch` comparison topic (`compare/dispatch.py`) at quick sizes: every check passes and
each figure is recorded for both modules. Ratios are not asserted (they depend on the machine).
"""

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
