"""Tests for minijax/interpreters/partial_eval.py: tracing to jaxprs, the known/unknown split,
dead-code elimination, forwarding and residuals — each against JAX's own
`jax._src.interpreters.partial_eval` (or `jax.linearize`) on the same program.

Mirrors the intent of JAX's tests/api_test.py partial-eval and DCE tests.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax._src.interpreters import partial_eval as jpe

import minijax
from minijax import core
from minijax.interpreters import partial_eval as pe
from minijax.lax import lax

X = np.arange(3, dtype=np.float32) + 1.0
C1 = np.arange(3, dtype=np.float32) * 2.0
C2 = np.arange(3, dtype=np.float32) * 5.0


def _names(jaxpr) -> list[str]:
    return [e.primitive.name for e in jaxpr.eqns]


# ---------------------------------------------------------------------------------------------
# The known/unknown split
# ---------------------------------------------------------------------------------------------

# name -> (program(J) giving f(a, b), which inputs are unknown)
SPLITS = {
    "sin_times_unknown": (lambda J: lambda a, b: J.numpy.sin(a) * b, [False, True]),
    "known_chain": (lambda J: lambda a, b: (J.numpy.cos(a) * 2.0 + b, a * 3.0), [False, True]),
    "known_output": (lambda J: lambda a, b: (a + 1.0, b * a), [False, True]),
    "unknown_first": (lambda J: lambda a, b: J.numpy.exp(b) * a + J.numpy.tanh(b),
                      [True, False]),
    "all_unknown": (lambda J: lambda a, b: a * b, [True, True]),
    "all_known": (lambda J: lambda a, b: a * b, [False, False]),
    "forwarded_known_input": (lambda J: lambda a, b: (a, b * 2.0), [False, True]),
}


def _split(J, pe_module, name, instantiate):
    program, unknowns = SPLITS[name]
    closed = J.make_jaxpr(program(J))(X, X)
    jk, ju, out_uk, res = pe_module.partial_eval_jaxpr_nounits(closed, unknowns, instantiate)
    num_res = res if isinstance(res, int) else len(res)  # JAX returns the residual avals
    return closed, (jk, ju, list(out_uk), num_res)


@pytest.mark.parametrize("instantiate", [False, True], ids=["no_inst", "inst"])
@pytest.mark.parametrize("name", list(SPLITS))
def test_partial_eval_jaxpr_nounits_matches_jax(name, instantiate):
    _, (jk, ju, out_uk, num_res) = _split(minijax, pe, name, instantiate)
    _, (jjk, jju, jout_uk, jnum_res) = _split(jax, jpe, name, instantiate)
    assert out_uk == jout_uk
    assert num_res == jnum_res
    assert _names(jk.jaxpr) == _names(jjk.jaxpr)
    assert _names(ju.jaxpr) == _names(jju.jaxpr)
    core.check_jaxpr(jk.jaxpr)
    core.check_jaxpr(ju.jaxpr)


@pytest.mark.parametrize("name", list(SPLITS))
def test_known_then_unknown_computes_the_program(name):
    closed, (jk, ju, out_uk, num_res) = _split(minijax, pe, name, False)
    _, unknowns = SPLITS[name]
    a, b = X, X * 0.5 - 1.0
    args = [a, b]
    want = core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    known_out = core.eval_jaxpr(jk.jaxpr, jk.consts, *[x for x, u in zip(args, unknowns) if not u])
    known_vals, residuals = known_out[:len(known_out) - num_res], known_out[len(known_out)
                                                                            - num_res:]
    unknown_vals = core.eval_jaxpr(ju.jaxpr, ju.consts, *residuals,
                                   *[x for x, u in zip(args, unknowns) if u])
    kit, uit = iter(known_vals), iter(unknown_vals)
    got = [next(uit) if u else next(kit) for u in out_uk]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_jaxpr_trace_evaluates_known_operations_in_the_parent():
    # sin of a known value runs now (no equation); mul with the unknown input is recorded,
    # and its known operand becomes a constvar of the recorded jaxpr: a residual
    trace = pe.JaxprTrace(core.current_trace(), purpose="test")
    try:
        unknown = trace.new_arg(core.ShapedArray((3,), np.float32))
        with core.set_current_trace(trace):
            known = lax.sin(X)
            out = lax.mul(known, unknown)
        assert not trace.is_own(known)
        np.testing.assert_allclose(np.asarray(known), np.sin(X), rtol=1e-6)
        jaxpr, residuals = trace.to_jaxpr([out])
    finally:
        trace.invalidate()
    assert _names(jaxpr) == ["mul"]
    assert len(residuals) == 1 and len(jaxpr.constvars) == 1
    np.testing.assert_allclose(np.asarray(residuals[0]), np.sin(X), rtol=1e-6)


def test_default_process_primitive_records_whatever_the_operands():
    # what a JaxprTrace rule calls to record the unknown part: even all-known operands are
    # recorded (as constvars), bypassing JaxprTrace.process_primitive's evaluation
    trace = pe.JaxprTrace(core.current_trace(), purpose="test")
    try:
        out = trace.default_process_primitive(lax.sin_p, [X], {})
        assert trace.is_own(out)
        jaxpr, consts = trace.to_jaxpr([out])
    finally:
        trace.invalidate()
    assert _names(jaxpr) == ["sin"] and len(consts) == 1


def test_tracer_holds_its_jaxpr_variable():
    trace = pe.DynamicJaxprTrace(purpose="test")
    try:
        x = trace.new_arg(core.ShapedArray((3,), np.float32))
        with core.set_current_trace(trace):
            y = lax.sin(x)
        jaxpr, _ = trace.to_jaxpr([y])
    finally:
        trace.invalidate()
    assert jaxpr.invars == [x.val] and jaxpr.eqns[0].invars == [x.val]
    assert jaxpr.eqns[0].outvars == [y.val] and jaxpr.outvars == [y.val]
    assert y.aval == y.val.aval == core.ShapedArray((3,), np.float32)


# ---------------------------------------------------------------------------------------------
# Dead-code elimination
# ---------------------------------------------------------------------------------------------

def _four_outputs(J):
    def f(a, b, c):
        s = J.numpy.sin(a)
        return s * b, J.numpy.cos(a) + C1, c * C2, a
    return f


USED = [[True] * 4, [True, False, False, False], [False, True, False, False],
        [False, False, True, False], [False, False, False, True], [False] * 4]


@pytest.mark.parametrize("used", USED, ids=["".join("1" if u else "0" for u in us)
                                            for us in USED])
def test_dce_jaxpr_matches_jax(used):
    ours = minijax.make_jaxpr(_four_outputs(minijax))(X, X, X)
    theirs = jax.make_jaxpr(_four_outputs(jax))(X, X, X)
    new, used_inputs = pe.dce_jaxpr(ours.jaxpr, used)
    jnew, jused_inputs = jpe.dce_jaxpr(theirs.jaxpr, used)
    assert _names(new) == _names(jnew)
    assert used_inputs == list(jused_inputs)
    assert len(new.outvars) == sum(used)
    core.check_jaxpr(new)
    # the consts still read are those JAX's dce_jaxpr_consts keeps
    closed, used_inputs2 = pe.dce_closed_jaxpr(ours, used)
    _, jused_consts, jused_inputs2 = jpe.dce_jaxpr_consts(theirs.jaxpr, used)
    assert len(closed.consts) == sum(jused_consts) == len(closed.jaxpr.constvars)
    assert used_inputs2 == list(jused_inputs2)


def test_dce_closed_jaxpr_instantiate_keeps_inputs():
    closed = minijax.make_jaxpr(_four_outputs(minijax))(X, X, X)
    new, used_inputs = pe.dce_closed_jaxpr(closed, [False, False, True, False],
                                           instantiate=True)
    assert used_inputs == [True, True, True] and len(new.jaxpr.invars) == 3
    assert _names(new.jaxpr) == ["mul"]
    np.testing.assert_allclose(np.asarray(core.eval_jaxpr(new.jaxpr, new.consts, X, X, X)[0]),
                               X * C2)


def test_dce_of_a_jit_equation_matches_jax():
    def program(J):
        return lambda a: J.jit(lambda v: (J.numpy.sin(v), J.numpy.cos(v) * C1))(a)[1]
    ours = minijax.make_jaxpr(program(minijax))(X)
    theirs = jax.make_jaxpr(program(jax))(X)
    new, _ = pe.dce_jaxpr(ours.jaxpr, [True])
    jnew, _ = jpe.dce_jaxpr(theirs.jaxpr, [True])
    inner = new.eqns[0].params["jaxpr"].jaxpr
    jinner = jnew.eqns[0].params["jaxpr"].jaxpr
    assert _names(inner) == _names(jinner) == ["cos", "mul"]


# ---------------------------------------------------------------------------------------------
# Linearize: residuals and forwarding, against jax.linearize
# ---------------------------------------------------------------------------------------------

LINEARIZE = {
    "sin_times_x": lambda J: lambda a: J.numpy.sin(a) * a,
    "log_exp": lambda J: lambda a: J.numpy.log(J.numpy.exp(a) + 1.0),
    "scan_carry": lambda J: lambda a: J.lax.scan(lambda c, r: (c * r, J.numpy.sin(c)), 1.0, a),
    "scan_residual_is_xs": lambda J: lambda a: J.lax.scan(lambda c, r: (c + r * r, c), 0.0,
                                                          a)[0],
}


def _linear_jaxpr(J, name):
    _, f_jvp = J.linearize(LINEARIZE[name](J), X)
    return J.make_jaxpr(f_jvp)(X)


@pytest.mark.parametrize("name", list(LINEARIZE))
def test_linearize_residuals_and_equations_match_jax(name):
    ours, theirs = _linear_jaxpr(minijax, name), _linear_jaxpr(jax, name)
    assert len(ours.consts) == len(theirs.consts)  # the residuals
    assert pe.count_eqns(ours.jaxpr) == sum(1 for _ in _all_eqns(theirs.jaxpr))
    assert _names(ours.jaxpr) == _names(theirs.jaxpr)


def _all_eqns(jaxpr):
    for e in jaxpr.eqns:
        yield e
        for p in e.params.values():
            for sub in (p if isinstance(p, tuple) else (p,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _all_eqns(inner)


def test_scan_forwards_a_residual_that_is_a_slice_of_xs():
    # d/dr (r * r) needs r: the residual is xs itself, read from xs, not stacked anew by the
    # primal scan; the tangent scan reads it as one more xs operand, as JAX's does
    _, f_jvp = minijax.linearize(LINEARIZE["scan_residual_is_xs"](minijax), X)
    (res,) = f_jvp.jaxpr.consts
    np.testing.assert_array_equal(np.asarray(res), X)
    _, f_jvp_jax = jax.linearize(LINEARIZE["scan_residual_is_xs"](jax), X)
    np.testing.assert_allclose(np.asarray(f_jvp(X)), np.asarray(f_jvp_jax(X)), rtol=1e-6)
    (scan_eqn,) = [e for e in f_jvp.jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    (jscan_eqn,) = [e for e in jax.make_jaxpr(f_jvp_jax)(X).jaxpr.eqns
                    if e.primitive.name == "scan"]
    assert len(scan_eqn.invars) == len(jscan_eqn.invars)


def test_trace_state_is_clean_after_a_failed_partial_eval():
    # an ill-typed jaxpr (mul of f32[3] by f32[4]) fails inside the split, leaving no trace
    closed = minijax.make_jaxpr(lambda a, b: a * b)(X, X)
    j, v = closed.jaxpr, core.Var(core.ShapedArray((4,), np.float32))
    bad = core.ClosedJaxpr(core.Jaxpr([], [j.invars[0], v], j.outvars,
                                      [j.eqns[0].replace(invars=[j.invars[0], v])]), [])
    with pytest.raises(TypeError, match="mul"):
        pe.partial_eval_jaxpr_nounits(bad, [False, True])
    assert core.current_trace() is core.eval_trace
    _, _, out_uk, _ = pe.partial_eval_jaxpr_nounits(closed, [False, True])
    assert out_uk == [True]
