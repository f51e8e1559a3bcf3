"""The control-flow comparison topic (`compare/control_flow.py`) at quick sizes: every check
must pass, including the RNN losses and the grad-jaxpr equation-count target."""

import importlib

import pytest


@pytest.mark.slow
def test_control_flow_topic_agrees():
    res = importlib.import_module("compare.control_flow").run(quick=True)
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert res.checks and not failing, failing
    names = [c.name for c in res.checks]
    assert any("jaxpr text" in n for n in names) and any(n.startswith("rnn:") for n in names)
    rnn = res.extra["rnn"]
    assert rnn["minijax"]["losses"] == pytest.approx(rnn["jax"]["losses"], rel=1e-4)
    counts = res.extra["grad_eqn_counts"]
    assert 0 < counts["minijax"] <= counts["target"] * counts["jax"]
    assert res.sections
