"""The `debugging` comparison topic (`compare/debugging.py`) at quick sizes: every check passes,
each of its five parts compares minijax with JAX, and the breakpoint session is in the report."""

from compare import debugging


def test_debugging_topic_checks_pass_under_both_modules():
    res = debugging.run(quick=True)
    failing = [c.name for c in res.checks if not c.ok]
    assert res.checks and not failing, failing
    both = [c.name for c in res.checks if c.runs == "both"]
    for part in ("debug.print under", "debug.callback under", "checkify, ", "jax_debug_nans",
                 "jax_debug_infs", "debug.breakpoint under", "visualize_array_sharding"):
        assert any(n.startswith(part) for n in both), part
    for how in ("eager", "jit", "vmap", "grad"):
        assert any(n.startswith(f"debug.breakpoint under {how}") for n in both), how
    session = next(s for s in res.sections if s.startswith("### debug.breakpoint"))
    assert "Entering jdb:" in session and "*** NameError" in session
    assert len(res.sections) == 5
