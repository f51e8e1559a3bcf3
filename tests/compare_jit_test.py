"""The `jit` comparison topic (`compare/jit.py`) at quick sizes: every check passes and the
benchmarks record both modules' timings. Ratios are not asserted (they depend on the machine).
"""

import pytest

from compare import jit as jit_topic


@pytest.mark.slow
def test_jit_topic_checks_pass():
    res = jit_topic.run(quick=True)
    failing = [c.name for c in res.checks if not c.ok]
    assert res.checks and not failing, failing
    names = [c.name for c in res.checks]
    for stage in ("trace:", "lower:", "compile:", "cost_analysis:", "memory_analysis:"):
        assert any(n.startswith(stage) for n in names), stage
    for n in (1, 10, 20):
        for module in ("jax", "minijax"):
            assert res.timings_ms[f"dispatch {n} leaves: {module}"] > 0
        assert res.extra["ratios"][f"dispatch {n} leaves"] > 0
    assert res.timings_ms["trace+lower MNIST step: minijax"] > 0
    assert res.extra["ratios"]["trace+lower"] > 0
    assert len(res.sections) >= 6


def test_entry_instructions_reads_the_entry_computation():
    hlo = ("HloModule m\n\n%fused (p: f32[2]) -> f32[2] {\n  ROOT %n = f32[2] negate(%p)\n}\n\n"
           "ENTRY %main (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n"
           "  ROOT %f = f32[2]{0} fusion(%a), kind=kLoop, calls=%fused\n}\n")
    assert jit_topic.entry_instructions(hlo) == ["parameter", "fusion[kLoop]"]
    assert jit_topic.stablehlo_ops("%0 = stablehlo.add %a, %b\n%1 = stablehlo.add %0, %0") == \
        ["add"]
