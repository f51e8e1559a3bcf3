"""What every model topic's quick test asserts besides its own checks: both modules' gradients
were checked against float64 finite differences, and the step was profiled
(`compare/_model_checks.py`)."""


def assert_grads_checked_and_profiled(res, timing_keys=()):
    """`res` (a TopicResult) holds passing finite-difference checks of JAX's and minijax's
    gradients, a gradient section and a profile section; `timing_keys` are timings it must
    hold for both modules (`<key>: jax`, `<key>: minijax`)."""
    fd = [c for c in res.checks if "central differences" in c.name]
    assert fd and all(c.ok for c in fd), fd
    assert {"both", "jax"} <= {c.runs for c in fd}, fd
    assert any(s.startswith("### Gradients against finite differences") for s in res.sections)
    assert any(s.startswith("### Profile") for s in res.sections)
    for key in timing_keys:
        for name in ("jax", "minijax"):
            assert res.timings_ms[f"{key}: {name}"] > 0, f"{key}: {name}"
