"""Tests for minijax/custom_derivatives.py: custom_jvp and custom_vjp against real JAX.

One program, two modules: `def program(J): ...` runs with `J=jax` and `J=minijax`; JAX's
results (values, shapes, dtypes, the fact of raising and the exception type) are the expected
ones. Mirrors the custom_jvp / custom_vjp parts of JAX's tests/api_test.py.
"""

from functools import partial

import jax
import numpy as np
import pytest

import minijax
from minijax import core
from minijax.interpreters import partial_eval as pe
from minijax.test_util import check_grads

BOTH = pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])
RNG = np.random.default_rng(0)
X3 = RNG.standard_normal(3).astype(np.float32)
Y3 = RNG.standard_normal(3).astype(np.float32)


def assert_same(got, want, rtol=2e-5, atol=2e-6):
    """Same pytree structure, and leaf by leaf the same shape, dtype and values."""
    g_leaves, g_tree = minijax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert str(g_tree).replace("PyTreeDef", "") == str(w_tree).replace("PyTreeDef", "")
    for g, w in zip(g_leaves, w_leaves):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=rtol, atol=atol)


def check(program, *args, **kw):
    got = program(minijax)(*args)
    assert_same(got, program(jax)(*args), **kw)
    return got


def raises_like_jax(program, *args):
    """Both modules raise, with exceptions of the same name (minijax mirrors JAX's error
    classes, e.g. UnexpectedTracerError); returns minijax's exception."""
    with pytest.raises(Exception) as want:
        program(jax)(*args)
    with pytest.raises(Exception) as got:
        program(minijax)(*args)
    assert got.type.__name__ == want.type.__name__, (got.value, want.value)
    return got.value


# ---------------------------------------------------------------------------------------------
# Functions shared by the tests (the examples of JAX's docstrings); the custom rules are
# deliberately *not* the true derivatives (scaled by 3) so the tests see that they are used.
# ---------------------------------------------------------------------------------------------

def _f_jvp(J):
    jnp = J.numpy

    @J.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), 3.0 * (jnp.cos(x) * tx * y + jnp.sin(x) * ty)

    return f


def _g_vjp(J):
    jnp = J.numpy

    @J.custom_vjp
    def g(x, y):
        return jnp.sin(x) * y

    def g_fwd(x, y):
        return g(x, y), (jnp.cos(x), jnp.sin(x), y)

    def g_bwd(res, ct):
        cos_x, sin_x, y = res
        return (3.0 * cos_x * ct * y, 3.0 * sin_x * ct)

    g.defvjp(g_fwd, g_bwd)
    return g


def _softplus(J):
    """A numerically stable log(1 + e^x) with a correct custom rule (for check_grads)."""
    jnp = J.numpy

    @J.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(x, 0.0)

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1.0 + jnp.exp(-x))

    return softplus


def _clip_gradient(J):
    """Identity in the forward pass; the backward pass clips the cotangent."""
    jnp = J.numpy

    @J.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))

    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


# ---------------------------------------------------------------------------------------------
# custom_jvp
# ---------------------------------------------------------------------------------------------

def test_custom_jvp_value_and_rule_is_used():
    check(lambda J: _f_jvp(J), X3, Y3)
    check(lambda J: lambda x, y: J.jvp(_f_jvp(J), (x, y), (Y3, X3)), X3, Y3)
    check(lambda J: J.grad(lambda x, y: _f_jvp(J)(x, y).sum(), (0, 1)), X3, Y3)
    got = minijax.grad(lambda x: _f_jvp(minijax)(x, 2.0))(0.5)
    np.testing.assert_allclose(got, 3.0 * np.cos(0.5) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("name,program", [
    ("jit", lambda J: J.jit(_f_jvp(J))),
    ("jit_of_grad", lambda J: J.jit(J.grad(lambda x, y: _f_jvp(J)(x, y).sum()))),
    ("grad_of_jit", lambda J: J.grad(lambda x, y: J.jit(_f_jvp(J))(x, y).sum())),
    ("vmap", lambda J: J.vmap(_f_jvp(J), (0, None))),
    ("vmap_of_grad", lambda J: J.vmap(J.grad(_f_jvp(J)))),
    ("grad_of_vmap", lambda J: J.grad(lambda x, y: J.vmap(_f_jvp(J))(x, y).sum(), (0, 1))),
    ("jvp_of_vmap", lambda J: lambda x, y: J.jvp(J.vmap(_f_jvp(J)), (x, y), (Y3, X3))),
    ("jacfwd", lambda J: J.jacfwd(_f_jvp(J))),
    ("jacrev", lambda J: J.jacrev(_f_jvp(J))),
    ("grad_of_grad", lambda J: J.vmap(J.grad(J.grad(_f_jvp(J))))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_custom_jvp_compositions(name, program):
    check(program, X3, Y3)


@BOTH
def test_custom_jvp_passes_zero_tangents_to_the_rule(J):
    seen = []
    jnp = J.numpy

    @J.custom_jvp
    def f(x, y):
        return x * y

    @f.defjvp
    def f_jvp(primals, tangents):
        seen.append(tuple(np.asarray(t).copy() if not isinstance(t, core.Tracer) else t
                          for t in tangents))
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), tx * y + x * ty

    J.jvp(lambda x: f(x, jnp.float32(2.0)), (jnp.float32(1.0),), (jnp.float32(1.0),))
    (tx, ty), = seen
    assert np.asarray(ty).shape == () and float(ty) == 0.0 and float(tx) == 1.0


def test_custom_jvp_defjvps():
    def program(J):
        jnp = J.numpy

        @J.custom_jvp
        def f(x, y):
            return jnp.sin(x) * y

        f.defjvps(lambda xd, ans, x, y: jnp.cos(x) * xd * y, None)
        return lambda x, y: (J.jvp(f, (x, y), (Y3, X3)), J.grad(lambda a: f(a, y).sum())(x))
    check(program, X3, Y3)


def test_custom_jvp_nondiff_argnums():
    def program(J):
        jnp = J.numpy

        @partial(J.custom_jvp, nondiff_argnums=(0,))
        def apply(fn, x):
            return fn(x)

        @apply.defjvp
        def apply_jvp(fn, primals, tangents):
            return apply(fn, primals[0]), 7.0 * tangents[0]

        return lambda x: (J.grad(lambda a: apply(jnp.sin, a).sum())(x),
                          J.vmap(J.grad(lambda a: apply(jnp.cos, a)))(x))
    check(program, X3)


def test_custom_jvp_pytrees():
    def program(J):
        jnp = J.numpy

        @J.custom_jvp
        def f(d):
            return {"s": d["a"] * d["b"], "t": (jnp.sin(d["a"]),)}

        @f.defjvp
        def f_jvp(primals, tangents):
            (d,), (t,) = primals, tangents
            return f(d), {"s": 2 * t["a"] * d["b"], "t": (t["a"] + t["b"],)}

        loss = lambda d: f(d)["s"].sum() + f(d)["t"][0].sum()
        return lambda a, b: J.grad(loss)({"a": a, "b": b})
    check(program, X3, Y3)


def test_custom_jvp_check_grads_order_2():
    f = _softplus(minijax)
    check_grads(f, (X3 * 4,), order=2)
    check(lambda J: J.hessian(lambda x: _softplus(J)(x).sum()), X3)


def test_custom_jvp_jaxpr_matches_jax():
    want = str(jax.make_jaxpr(_f_jvp(jax))(1.0, 2.0))
    got = str(minijax.make_jaxpr(_f_jvp(minijax))(1.0, 2.0))
    assert got == want
    assert "custom_jvp_call[" in got and "jvp=f_jvp" in got


def test_custom_jvp_check_jaxpr_after_transformations():
    f = _f_jvp(minijax)
    core.check_jaxpr(minijax.make_jaxpr(minijax.grad(f))(1.0, 2.0).jaxpr)
    for fun in [f, minijax.vmap(f), minijax.vmap(minijax.grad(f)),
                lambda x, y: minijax.jvp(f, (x, y), (x, y))]:
        core.check_jaxpr(minijax.make_jaxpr(fun)(X3, Y3).jaxpr)


def test_custom_jvp_dce_keeps_used_outputs():
    jnp = minijax.numpy

    @minijax.custom_jvp
    def two(x):
        return jnp.sin(x), jnp.cos(x)

    two.defjvp(lambda p, t: (two(p[0]), (t[0], -t[0])))
    closed = minijax.make_jaxpr(two)(X3)
    jaxpr, used_in = pe.dce_jaxpr(closed.jaxpr, [True, False])
    (eqn,) = jaxpr.eqns
    assert len(eqn.outvars) == 1 and len(eqn.params["call_jaxpr"].out_avals) == 1
    (out,) = core.eval_jaxpr(jaxpr, closed.consts, X3)
    np.testing.assert_allclose(out, np.sin(X3), rtol=1e-6)
    _, t = minijax.jvp(lambda x: core.eval_jaxpr(jaxpr, [], x)[0], (X3,), (Y3,))
    np.testing.assert_allclose(t, Y3)


def test_custom_jvp_errors_match_jax():
    def no_rule(J):
        return J.custom_jvp(lambda x: x)
    raises_like_jax(no_rule, 1.0)

    def rule(out):
        def program(J):
            f = J.custom_jvp(lambda x: x * 2.0)
            f.defjvp(lambda p, t: out(J, p, t))
            return lambda x: J.jvp(f, (x,), (x,))
        return program
    raises_like_jax(rule(lambda J, p, t: p[0]), 1.0)  # not a pair
    raises_like_jax(rule(lambda J, p, t: (p[0] * 2.0, J.numpy.ones(3))), 1.0)  # tangent shape
    raises_like_jax(rule(lambda J, p, t: ((p[0],), t[0])), 1.0)  # structures differ


@BOTH
def test_custom_jvp_closed_over_differentiated_value_raises(J):
    def outer(y):
        @J.custom_jvp
        def f(x):
            return x * y
        f.defjvp(lambda p, t: (f(p[0]), t[0] * y))
        return f(2.0)
    with pytest.raises(J.UnexpectedTracerError if J is minijax else
                       jax.errors.UnexpectedTracerError):
        J.grad(outer)(3.0)


# ---------------------------------------------------------------------------------------------
# custom_vjp
# ---------------------------------------------------------------------------------------------

def test_custom_vjp_value_and_rule_is_used():
    check(lambda J: _g_vjp(J), X3, Y3)
    check(lambda J: J.grad(lambda x, y: _g_vjp(J)(x, y).sum(), (0, 1)), X3, Y3)
    got = minijax.grad(lambda x: _g_vjp(minijax)(x, 2.0))(0.5)
    np.testing.assert_allclose(got, 3.0 * np.cos(0.5) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("name,program", [
    ("jit", lambda J: J.jit(_g_vjp(J))),
    ("jit_of_grad", lambda J: J.jit(J.grad(lambda x, y: _g_vjp(J)(x, y).sum()))),
    ("grad_of_jit", lambda J: J.grad(lambda x, y: J.jit(_g_vjp(J))(x, y).sum(), (0, 1))),
    ("vmap", lambda J: J.vmap(_g_vjp(J), (0, None))),
    ("vmap_of_grad", lambda J: J.vmap(J.grad(_g_vjp(J), (0, 1)))),
    ("grad_of_vmap", lambda J: J.grad(lambda x, y: J.vmap(_g_vjp(J))(x, y).sum(), (0, 1))),
    ("grad_of_vmap_unbatched_arg", lambda J: J.grad(
        lambda x, y: J.vmap(_g_vjp(J), (0, None))(x, y[0]).sum(), (0, 1))),
    ("jacrev", lambda J: J.jacrev(_g_vjp(J), (0, 1))),
    ("vjp", lambda J: lambda x, y: J.vjp(_g_vjp(J), x, y)[1](Y3)),
    ("grad_of_grad", lambda J: lambda x, y: J.grad(
        lambda a: J.grad(lambda b: _g_vjp(J)(b, y).sum())(a).sum())(x)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_custom_vjp_compositions(name, program):
    check(program, X3, Y3)


def test_unbatched_outputs_stay_unbatched():
    """An output that depends on no batched input stays unbatched under vmap (so jacfwd's
    `out_axes=None` and hessians work), for custom_jvp, custom_vjp and checkpoint."""
    def program(J):
        jnp = J.numpy

        @J.custom_vjp
        def two(x, w):
            return x * w, jnp.sin(w)

        two.defvjp(lambda x, w: (two(x, w), (x, w)),
                   lambda r, g: (g[0] * r[1], g[0] * r[0] + g[1] * jnp.cos(r[1])))
        loss = lambda x: J.checkpoint(lambda a: _softplus(J)(_f_jvp(J)(a, a)).sum())(x)
        return lambda x, w: (J.vmap(two, (0, None), (0, None))(x, w),
                             J.grad(lambda a: J.vmap(two, (0, None))(a, w)[0].sum())(x),
                             J.hessian(loss)(x))
    check(program, X3, np.float32(0.5), rtol=1e-4)


def test_custom_vjp_none_cotangents_and_nondiff_argnums():
    check(lambda J: J.grad(lambda x: (_clip_gradient(J)(-0.1, 0.2, x) * 4.0).sum()), X3)
    check(lambda J: J.vmap(J.grad(lambda x: _clip_gradient(J)(-0.1, 0.2, x) * 4.0)), X3)

    def program(J):
        @partial(J.custom_vjp, nondiff_argnums=(1,))
        def scale(x, k):
            return x * k
        scale.defvjp(lambda x, k: (scale(x, k), None), lambda k, res, g: (g * k * 2.0,))
        return lambda x: (J.grad(lambda a: scale(a, 3.0).sum())(x),
                          J.jit(J.grad(lambda a: scale(a, 3.0).sum()))(x))
    check(program, X3)

    def defaulted(J):  # a nondiff argument left to its default (JAX binds the signature)
        @partial(J.custom_vjp, nondiff_argnums=(1,))
        def scale(x, k=3.0):
            return x * k
        scale.defvjp(lambda x, k: (scale(x, k), None), lambda k, res, g: (g * k * 2.0,))
        return lambda x: (scale(x), J.grad(lambda a: scale(a).sum())(x))
    check(defaulted, X3)


def test_custom_vjp_pytrees_and_integer_inputs():
    def program(J):
        jnp = J.numpy

        @J.custom_vjp
        def f(d, n):
            return {"a": d["x"] * d["y"] * n, "b": jnp.sin(d["x"])}

        def fwd(d, n):
            return f(d, n), (d, n)

        def bwd(res, g):
            d, n = res
            return {"x": g["a"] * d["y"] * n + g["b"] * jnp.cos(d["x"]), "y": None}, None

        f.defvjp(fwd, bwd)
        return lambda x, y: J.grad(lambda d: f(d, 3)["a"].sum() + f(d, 3)["b"].sum())(
            {"x": x, "y": y})
    check(program, X3, Y3)


def test_custom_vjp_check_grads_rev_order_2():
    jnp = minijax.numpy

    @minijax.custom_vjp
    def f(x):
        return jnp.sin(x) * x

    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * (jnp.cos(x) * x + jnp.sin(x)),))
    check_grads(f, (X3,), order=2, modes=["rev"])


def test_custom_vjp_forward_mode_raises_like_jax():
    err = raises_like_jax(lambda J: lambda x, y: J.jvp(_g_vjp(J), (x, y), (x, y)), X3, Y3)
    assert "can't apply forward-mode autodiff (jvp) to a custom_vjp function" in str(err)
    raises_like_jax(lambda J: J.jit(lambda x, y: J.jvp(_g_vjp(J), (x, y), (x, y))[1]), X3, Y3)
    raises_like_jax(lambda J: J.jacfwd(_g_vjp(J)), X3, Y3)


def test_custom_vjp_jaxprs_match_jax():
    want = str(jax.make_jaxpr(_g_vjp(jax))(1.0, 2.0))
    got = str(minijax.make_jaxpr(_g_vjp(minijax))(1.0, 2.0))
    assert got == want
    lin = minijax.make_jaxpr(lambda x: minijax.linearize(
        lambda a: _g_vjp(minijax)(a, 2.0), x)[1](x))(1.0)
    assert "custom_lin[" in str(lin) and "bwd=g_bwd" in str(lin)
    core.check_jaxpr(lin.jaxpr)


def test_custom_vjp_check_jaxpr_after_transformations():
    g = _g_vjp(minijax)
    loss = lambda x, y: g(x, y).sum()
    for fun in [g, minijax.grad(loss, (0, 1)), minijax.vmap(g),
                minijax.grad(lambda x, y: minijax.vmap(g)(x, y).sum())]:
        core.check_jaxpr(minijax.make_jaxpr(fun)(X3, Y3).jaxpr)


def test_custom_vjp_dce_keeps_used_outputs():
    jnp = minijax.numpy

    @minijax.custom_vjp
    def two(x):
        return jnp.sin(x), jnp.cos(x)

    two.defvjp(lambda x: (two(x), x), lambda x, g: (g[0] * jnp.cos(x) - g[1] * jnp.sin(x),))
    closed = minijax.make_jaxpr(two)(X3)
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, [False, True])
    (eqn,) = jaxpr.eqns
    assert len(eqn.outvars) == 1
    fun = lambda x: core.eval_jaxpr(jaxpr, [], x)[0].sum()
    np.testing.assert_allclose(fun(X3), np.cos(X3).sum(), rtol=1e-6)
    np.testing.assert_allclose(minijax.grad(fun)(X3), -np.sin(X3), rtol=1e-5)


def test_custom_vjp_errors_match_jax():
    raises_like_jax(lambda J: J.custom_vjp(lambda x: x), 1.0)  # no defvjp

    def rules(fwd, bwd):
        def program(J):
            f = J.custom_vjp(lambda x, y: x * y)
            f.defvjp(lambda x, y: fwd(f, x, y), bwd)
            return J.grad(f)
        return program
    ok_fwd = lambda f, x, y: (f(x, y), None)
    raises_like_jax(rules(lambda f, x, y: f(x, y), lambda r, g: (g, g)), 1.0, 2.0)
    raises_like_jax(rules(ok_fwd, lambda r, g: (g,)), 1.0, 2.0)  # one ct for two args
    raises_like_jax(rules(ok_fwd, lambda r, g: (g, np.ones(3, np.float32))), 1.0, 2.0)

    def traced_nondiff(J):
        f = J.custom_vjp(lambda x, k: x * k, nondiff_argnums=(1,))
        f.defvjp(lambda x, k: (f(x, k), None), lambda k, r, g: (g * k,))
        return J.jit(lambda x, k: f(x, k))
    raises_like_jax(traced_nondiff, 1.0, 2.0)


@BOTH
def test_custom_vjp_closed_over_differentiated_value_raises(J):
    def outer(y):
        @J.custom_vjp
        def f(x):
            return x * y
        f.defvjp(lambda x: (f(x), None), lambda r, g: (g * y,))
        return f(2.0)
    with pytest.raises(J.UnexpectedTracerError if J is minijax else
                       jax.errors.UnexpectedTracerError):
        J.grad(outer)(3.0)


@pytest.mark.parametrize("form", ["jit_grad", "grad_vmap", "vmap_grad"])
def test_custom_vjp_fwd_closing_over_the_differentiated_value_raises_under_jit_and_vmap(form):
    # JAX's make_jaxpr of such a program keeps the leaked LinearizeTracer as a jaxpr constant;
    # running it raises in JAX, and in minijax (which refuses already while tracing)
    def program(J):
        jnp = J.numpy

        def loss(x):
            def b(c):
                return c * x
            f = J.custom_vjp(b)
            f.defvjp(lambda c: (b(c), c), lambda res, g: (res * g,))
            return jnp.sum(f(x * 2.0))
        return {"jit_grad": J.jit(J.grad(loss)),
                "grad_vmap": J.grad(lambda x: jnp.sum(J.vmap(loss)(x))),
                "vmap_grad": J.vmap(J.grad(loss))}[form]
    x = X3 if form == "jit_grad" else np.stack([X3, X3 + 0.25])
    err = raises_like_jax(program, x)
    assert type(err).__name__ == "UnexpectedTracerError"


def test_custom_vjp_closure_over_undifferentiated_value():
    def program(J):
        def outer(x, y):
            @J.custom_vjp
            def f(a):
                return a * y
            f.defvjp(lambda a: (f(a), None), lambda r, g: (g * y * 10.0,))
            return f(x)
        return lambda x, y: (J.vmap(J.grad(outer))(x, y), J.jit(J.grad(outer))(x[0], y[0]))
    check(program, X3, Y3)


def test_eager_call_runs_the_function_as_it_is_as_jax():
    # outside any transformation a custom_jvp / custom_vjp function is just called: Python
    # values stay Python values, and the function runs once
    def program(J):
        calls = []

        def fun(p):
            calls.append(1)
            return {"a": p[0] ** 2, "b": J.numpy.sin(p[1])}
        f = J.custom_jvp(fun)
        f.defjvp(lambda ps, ts: (f(ps[0]), f(ts[0])))
        g = J.custom_vjp(fun)
        g.defvjp(lambda p: (g(p), None), lambda r, ct: (ct,))
        out = [f((1.0, 2.0)), g((1.0, 2.0))]
        return [(type(o["a"]).__name__, o["a"], float(o["b"])) for o in out], len(calls)
    assert program(minijax) == program(jax)


# ---------------------------------------------------------------------------------------------
# How often the primal function runs: differentiation runs only the rule (issue 45)
# ---------------------------------------------------------------------------------------------

_TRANSFORMS = {
    "eager": lambda J, f: f(1.0),
    "jit": lambda J, f: J.jit(f)(1.0),
    "vmap": lambda J, f: J.vmap(f)(J.numpy.ones(3)),
    "jvp": lambda J, f: J.jvp(f, (1.0,), (1.0,)),
    "grad": lambda J, f: J.grad(f)(1.0),
    "vjp": lambda J, f: J.vjp(f, 1.0),
    "linearize": lambda J, f: J.linearize(f, 1.0),
    "jit_of_grad": lambda J, f: J.jit(J.grad(f))(1.0),
    "grad_of_jit": lambda J, f: J.grad(J.jit(f))(1.0),
    "vmap_of_grad": lambda J, f: J.vmap(J.grad(f))(J.numpy.ones(3)),
    "jacfwd": lambda J, f: J.jacfwd(f)(1.0),
    "hessian": lambda J, f: J.hessian(f)(1.0),
}


def _counted_custom_jvp(J, calls):
    @J.custom_jvp
    def f(x):
        calls["fun"] += 1
        return J.numpy.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls["rule"] += 1
        return f(primals[0]), J.numpy.cos(primals[0]) * tangents[0]
    return f


def _counted_custom_vjp(J, calls):
    @J.custom_vjp
    def f(x):
        calls["fun"] += 1
        return J.numpy.sin(x)

    def f_fwd(x):
        calls["rule"] += 1
        return f(x), J.numpy.cos(x)
    f.defvjp(f_fwd, lambda res, g: (res * g,))
    return f


@pytest.mark.parametrize("transform", sorted(_TRANSFORMS))
@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_primal_function_runs_as_often_as_in_jax(kind, transform):
    # JAX's JVPTrace/LinearizeTrace call the rule only; minijax traced the primal first
    if kind == "custom_vjp" and transform in ("jvp", "jacfwd", "hessian"):
        pytest.skip("forward mode of a custom_vjp function raises (tested above)")
    counts = []
    for J in (jax, minijax):
        calls = {"fun": 0, "rule": 0}
        f = (_counted_custom_jvp if kind == "custom_jvp" else _counted_custom_vjp)(J, calls)
        _TRANSFORMS[transform](J, f)
        counts.append(calls)
    assert counts[1] == counts[0], f"minijax {counts[1]}, JAX {counts[0]}"


def _documented_branchy(J):
    # JAX's "Custom derivative rules" tutorial: Python control flow on the primal value, in
    # the function and in its rule, works under differentiation (the function is never traced)
    jnp = J.numpy

    @J.custom_jvp
    def f(x):
        if x > 0:
            return jnp.sin(x)
        return jnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        return (ans, 2 * x_dot) if x > 0 else (ans, 3 * x_dot)
    return f


@pytest.mark.parametrize("transform", ["grad", "jvp", "vjp", "linearize", "jacfwd", "jacrev",
                                       "value_and_grad", "hessian"])
@pytest.mark.parametrize("x", [1.0, -1.0])
def test_python_control_flow_in_a_custom_jvp_function_under_differentiation(transform, x):
    def program(J):
        f = _documented_branchy(J)
        run = {"grad": lambda: J.grad(f)(x), "jvp": lambda: J.jvp(f, (x,), (1.0,)),
               "vjp": lambda: J.vjp(f, x)[1](1.0), "linearize": lambda: J.linearize(f, x)[1](1.0),
               "jacfwd": lambda: J.jacfwd(f)(x), "jacrev": lambda: J.jacrev(f)(x),
               "value_and_grad": lambda: J.value_and_grad(f)(x),
               "hessian": lambda: J.hessian(f)(x)}[transform]
        # (JAX hands back the rule's Python-float tangent as it is: compare as arrays)
        return lambda: J.tree_util.tree_map(J.numpy.asarray, run())
    check(program)


@pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])
def test_python_control_flow_in_a_custom_jvp_function_on_the_classic_linearize_path(J):
    J.config.update("jax_use_direct_linearize", False)
    try:
        f = _documented_branchy(J)
        assert (float(J.grad(f)(1.0)), float(J.grad(f)(-1.0))) == (2.0, 3.0)
    finally:
        J.config.update("jax_use_direct_linearize", True)


def test_closed_over_tracer_in_a_custom_jvp_function_raises_as_jax():
    # the function is now run, not traced, under jvp: the closed-over tracer meets the parent
    def program(J):
        def outer(y):
            f = J.custom_jvp(lambda x: x * y)
            f.defjvp(lambda p, t: (f(p[0]), t[0] * y))
            return f(2.0)
        return lambda: J.jvp(outer, (3.0,), (1.0,))
    err = raises_like_jax(program)
    assert "pass it as an argument" in str(err)
