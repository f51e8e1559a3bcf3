"""Tests for minijax/lax/control_flow/: cond, switch, while_loop, scan, fori_loop, map.

One program, two modules: `program(J)` runs with `J=jax` and `J=minijax`; JAX's results
(values, dtypes, weak types, errors) are expected. Also: numerical derivative checks
(`check_grads`, order 2), vmap against a per-example loop, jaxprs printed as JAX prints them,
`check_jaxpr` after each transformation, and DCE of the loop primitives.
Mirrors tests/lax_control_flow_test.py in JAX.
"""

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minijax
from minijax import core, pjit
from minijax.interpreters import partial_eval as pe
from minijax.lax.control_flow import cond_p, scan_p, while_p
from minijax.public_test_util import check_grads

RNG = np.random.RandomState(0)
W = (RNG.randn(3, 3) * 0.5).astype(np.float32)
X0 = RNG.randn(3).astype(np.float32)
XS = RNG.randn(4, 3).astype(np.float32)
XB = RNG.randn(2, 4, 3).astype(np.float32)


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    """Same pytree structure, and leaf by leaf the same shape, dtype, weak type and values."""
    g_leaves, g_tree = minijax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert str(g_tree).replace("PyTreeDef", "") == str(w_tree).replace("PyTreeDef", "")
    for g, w in zip(g_leaves, w_leaves):
        g_np, w_np = np.asarray(g), np.asarray(w)
        assert g_np.shape == w_np.shape and g_np.dtype == w_np.dtype, (g, w)
        assert getattr(g, "weak_type", False) == getattr(w, "weak_type", False), (g, w)
        if g_np.dtype.kind != "V":  # float0 tangents have no values
            np.testing.assert_allclose(g_np.astype(np.float64), w_np.astype(np.float64),
                                       rtol=rtol, atol=atol)


def check(program, *args, **kw):
    """Run `program(J)(*args)` with J=jax and J=minijax; compare the results."""
    want = program(jax)(*args)
    got = program(minijax)(*args)
    assert_same(got, want, **kw)
    return got


def _rnn_body(J):
    jnp = J.numpy

    def body(c, x):
        c = jnp.tanh(c @ W + x)
        return c, jnp.sin(c) * x
    return body


def _eqns_of(closed, prim):
    return [e for e in closed.jaxpr.eqns if e.primitive is prim]


def _check_jaxprs(f, *args):
    closed = minijax.make_jaxpr(f)(*args)
    core.check_jaxpr(closed.jaxpr)
    return closed


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pred", [True, False, 0, 3, -1.5])
def test_cond_values(pred):
    check(lambda J: lambda p, x: J.lax.cond(p, J.numpy.sin, J.numpy.cos, x), pred, X0)


def test_cond_pytrees_closures_and_passthrough():
    def program(J):
        jnp = J.numpy

        def f(p, d, s):
            true_fun = lambda d, s: {"a": d["a"] * s + W[0], "b": d["b"]}   # b passes through
            false_fun = lambda d, s: {"a": jnp.exp(d["a"]), "b": d["b"]}
            return J.lax.cond(p, true_fun, false_fun, d, s)
        return f
    for p in (True, False):
        check(program, p, {"a": X0, "b": XS}, 2.0)
    check(lambda J: lambda x: J.lax.cond(True, lambda: 1.0, lambda: 2.0), X0)  # no operands


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_values_and_clamping(index):
    def program(J):
        jnp = J.numpy
        return lambda i, x: J.lax.switch(i, [jnp.sin, jnp.cos, lambda x: x * 2.0], x)
    check(program, index, X0)


def _branch_calls(J):
    """How many times cond's and switch's branches run as Python, over eager calls with two
    signatures, a function closing over a tracer (under jvp), and the results."""
    calls, outs = [], []

    def b0(x):
        calls.append(0)
        return x + 1

    def b1(x):
        calls.append(1)
        return x * 2

    for x in (np.float32(1.0), np.float32(2.0), X0, X0 + 1):
        for i in (0, 1, 5):
            outs.append(J.lax.switch(i, [b0, b1], x))
    for p in (True, False, True):
        outs.append(J.lax.cond(p, b0, b1, X0))
    counts = [len(calls)]
    t = J.jvp(lambda s: J.lax.cond(True, lambda x: x * s, b1, X0), (2.0,), (1.0,))
    outs.append(t)
    counts.append(len(calls))
    return counts, outs


def test_eager_cond_and_switch_trace_each_branch_once_per_signature_as_jax():
    (got, got_outs), (want, want_outs) = _branch_calls(minijax), _branch_calls(jax)
    assert got == want
    assert_same(got_outs, want_outs)


def test_cached_branches_do_not_keep_their_functions_alive():
    import gc
    import weakref
    f = lambda x: x + 1.0
    ref = weakref.ref(f)
    assert float(minijax.lax.cond(True, f, lambda x: x, 1.0)) == 2.0
    del f
    gc.collect()
    assert ref() is None


def test_scan_values():
    check(lambda J: lambda x0, xs: J.lax.scan(_rnn_body(J), x0, xs), X0, XS)
    # pytree carry, xs and ys; reverse
    def program(J):
        def body(c, x):
            a, b = c
            return (a + x["u"], b * 2), {"y": a * x["v"], "z": b}
        return lambda xs: J.lax.scan(body, (0.0, 1), xs, reverse=True)
    check(program, {"u": XS[:, 0], "v": XS[:, 1]})
    # xs=None with a length; a weakly typed initial carry promoted to the body's dtype
    check(lambda J: lambda: J.lax.scan(lambda c, _: (c + 1, c * 2), 0, None, length=3))
    check(lambda J: lambda xs: J.lax.scan(lambda c, x: (c + x, c), 0, xs), XS[:, 0])
    check(lambda J: lambda: J.lax.scan(lambda c, x: (c * 2.0, x), 1.0,
                                       np.zeros((0, 2), np.float32)))


@settings(max_examples=10, deadline=None)
@given(length=st.integers(0, 5), shape=st.lists(st.integers(1, 3), max_size=2).map(tuple),
       reverse=st.booleans())
def test_hypothesis_scan_against_python_loop(length, shape, reverse):
    # eager scan (numpy impl) and its vjp against the loop it stands for
    xs = RNG.randn(length, *shape).astype(np.float32)
    init = np.asarray(RNG.randn(*shape), np.float32)
    body = lambda c, x: (np.tanh(c * x + 0.5), np.sin(c) * x)
    c, ys = init, []
    for x in (xs[::-1] if reverse else xs):
        c, y = body(c, x)
        ys.append(y)
    ys = np.stack(ys[::-1] if reverse else ys) if ys else np.zeros((0, *shape), np.float32)
    jnp = minijax.numpy
    f = lambda init, xs: minijax.lax.scan(lambda c, x: (jnp.tanh(c * x + 0.5), jnp.sin(c) * x),
                                          init, xs, reverse=reverse)
    got_c, got_ys = f(init, xs)
    np.testing.assert_allclose(got_c, c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_ys, ys, rtol=1e-5, atol=1e-6)
    check_grads(f, (init, xs), order=1, modes=("rev",))


def test_while_fori_map_values():
    check(lambda J: lambda x: J.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x), 1.0)
    check(lambda J: lambda x: J.lax.while_loop(lambda c: c[0] < 3,
                                               lambda c: (c[0] + 1, J.numpy.sin(c[1])),
                                               (0, x)), X0)
    check(lambda J: lambda x: J.lax.fori_loop(0, 5, lambda i, c: c * 2.0 + i, x), 1.0)
    check(lambda J: lambda x: J.lax.fori_loop(np.int32(2), np.int32(5),
                                              lambda i, c: c + i, x), 1.0)
    check(lambda J: lambda xs: J.lax.map(lambda x: J.numpy.sin(x) * 2, xs), XS)


def test_jit_of_everything_compiles_once():
    def program(J):
        jnp, lax = J.numpy, J.lax

        def f(p, i, n, x, xs):
            a = lax.cond(p, jnp.sin, jnp.cos, x)
            b = lax.switch(i, [jnp.sin, jnp.cos, jnp.exp], x)
            c, ys = lax.scan(_rnn_body(J), x, xs)
            d = lax.while_loop(lambda v: v[0] < n, lambda v: (v[0] + 1, v[1] * 1.5), (0, x))[1]
            e = lax.fori_loop(0, n, lambda k, v: v + k, x)      # traced bounds: a while
            g = lax.fori_loop(0, 3, lambda k, v: v * 2.0, x)    # static bounds: a scan
            return a, b, c, ys, d, e, g, lax.map(jnp.tanh, xs)
        return J.jit(f)
    before = dict(pjit.cache_stats)
    f, jf = program(minijax), program(jax)
    assert_same(f(True, 7, 3, X0, XS), jf(True, 7, 3, X0, XS))
    assert_same(f(False, -1, 0, X0, XS), jf(False, -1, 0, X0, XS))
    assert pjit.cache_stats["compiles"] - before["compiles"] == 1


# ---------------------------------------------------------------------------------------------
# Differentiation
# ---------------------------------------------------------------------------------------------

def test_jvp():
    check(lambda J: lambda p, x, t: J.jvp(lambda x: J.lax.cond(p, J.numpy.sin, J.numpy.cos, x),
                                          (x,), (t,)), False, X0, XS[0])
    check(lambda J: lambda x, t: J.jvp(lambda x: J.lax.scan(_rnn_body(J), x, XS), (x,), (t,)),
          X0, XS[0])
    # forward mode works through while_loop (and linearize, which partially evaluates it)
    check(lambda J: lambda x, t: J.jvp(
        lambda x: J.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x), (x,), (t,)),
        1.5, 1.0)
    check(lambda J: lambda x: J.linearize(
        lambda x: J.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x), x)[1](1.0), 1.5)
    check(lambda J: lambda x: J.jacfwd(lambda x: J.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, J.numpy.sin(c[1])), (0, x))[1])(x), X0)


def test_grad():
    def cond_loss(J):
        jnp = J.numpy
        return lambda x: J.lax.cond(x.sum() > 0, lambda a: jnp.sin(a).sum(),
                                    lambda a: (a ** 2).sum(), x)
    check(lambda J: J.grad(cond_loss(J)), X0)
    check(lambda J: J.grad(cond_loss(J)), -np.abs(X0))

    def scan_loss(J):
        return lambda W_, x: (J.lax.scan(lambda c, x: (J.numpy.tanh(c @ W_ + x), c.sum()), x,
                                         XS)[1] ** 2).sum()
    check(lambda J: J.grad(scan_loss(J), argnums=(0, 1)), W, X0, rtol=1e-4)
    check(lambda J: J.grad(lambda x: J.lax.fori_loop(0, 4, lambda i, c: c * i + J.numpy.sin(c),
                                                     x)), 0.3)
    # nested: a cond inside a scan, a scan inside a cond; reverse scans
    check(lambda J: J.grad(lambda x: J.lax.scan(
        lambda c, x: (J.lax.cond(x > 0, lambda a: a * x, J.numpy.sin, c), c), 1.0, x)[0]),
        np.array([1.0, -2.0, 3.0], np.float32))
    check(lambda J: J.grad(lambda x: J.lax.cond(
        x.sum() > 0, lambda a: J.lax.scan(_rnn_body(J), a, XS)[0].sum(), J.numpy.sum, x)), X0)
    check(lambda J: J.grad(lambda x: J.lax.scan(lambda c, x: (c * x, c), 1.0, x,
                                                reverse=True)[1].sum()),
          np.arange(1.0, 5.0, dtype=np.float32))


def test_jit_of_grad_of_scan():
    check(lambda J: J.jit(J.grad(lambda x: J.lax.scan(_rnn_body(J), x, XS)[1].sum())), X0,
          rtol=1e-4)


def test_check_grads_order_2():
    jnp = minijax.numpy

    def f_scan(W_, x0, xs):
        c, ys = minijax.lax.scan(_rnn_body(minijax), x0, xs)
        return c.sum() + ys.sum() + (W_ * c[0]).sum()

    def f_cond(x, y):
        return minijax.lax.cond(x.sum() > 0, lambda a, b: jnp.sin(a) * b,
                                lambda a, b: jnp.cos(b) * a ** 2, x, y)

    check_grads(f_scan, (W, X0, XS), order=2)
    check_grads(f_cond, (X0, XS[0]), order=2)
    check_grads(f_cond, (-np.abs(X0), XS[0]), order=2)
    check_grads(lambda x: minijax.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1]) * 2.0), (0, x))[1], (X0,),
        order=2, modes=("fwd",))


@pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])
def test_while_reverse_mode_raises_jax_error(J):
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                       "lax.while_loop or lax.fori_loop with dynamic start/stop values"):
        J.grad(lambda x: J.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x))(1.0)
    with pytest.raises(ValueError, match="Reverse-mode differentiation"):
        J.jit(lambda n, x: J.grad(lambda x: J.lax.fori_loop(
            0, n, lambda i, c: c * 2.0, x))(x))(3, 1.0)


# ---------------------------------------------------------------------------------------------
# Batching
# ---------------------------------------------------------------------------------------------

def test_vmap_cond_batched_and_unbatched_predicate():
    def program(J):
        return J.vmap(lambda p, x: J.lax.cond(p > 0, J.numpy.sin, J.numpy.cos, x))
    check(program, XB[:, 0, 0], XB[:, 0])   # batched predicate
    check(lambda J: J.vmap(lambda x: J.lax.cond(True, J.numpy.sin, J.numpy.cos, x)), XB[:, 0])
    check(lambda J: J.vmap(program(J)), XB[:, :, 0], XB)
    check(lambda J: J.vmap(J.grad(lambda x: J.lax.cond(x > 0, J.numpy.sin, J.numpy.cos, x))),
          XB[:, 0, 0])
    # the batched predicate becomes a select_n of both branches, as in JAX
    f = minijax.vmap(lambda p, x: minijax.lax.cond(p > 0, minijax.numpy.sin,
                                                   minijax.numpy.cos, x))
    closed = _check_jaxprs(f, XB[:, 0, 0], XB[:, 0])
    names = [e.primitive.name for e in closed.jaxpr.eqns]
    assert "cond" not in names and names[-1] == "select_n"
    assert str(closed) == str(jax.make_jaxpr(jax.vmap(
        lambda p, x: jax.lax.cond(p > 0, jax.numpy.sin, jax.numpy.cos, x)))(XB[:, 0, 0],
                                                                              XB[:, 0]))
    # an unbatched predicate keeps the cond, with batched branches
    h = minijax.vmap(lambda y, x: minijax.lax.cond(x.sum() > 0, lambda: y * x, lambda: y),
                     in_axes=(0, None))
    (eqn,) = _eqns_of(_check_jaxprs(h, XB[:, 0], X0), cond_p)
    assert eqn.outvars[0].aval.shape == (2, 3)
    check(lambda J: J.vmap(lambda y, x: J.lax.cond(x.sum() > 0, lambda: y * x, lambda: y),
                           in_axes=(0, None)), XB[:, 0], X0)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (0, 1), (None, 0)])
def test_vmap_scan_against_loop(in_axes):
    f = lambda x0, xs: minijax.lax.scan(_rnn_body(minijax), x0, xs)
    x0s = XB[:, 0]
    xss = XB if in_axes[1] == 0 else XB.transpose(1, 0, 2)
    args = (x0s if in_axes[0] == 0 else X0, xss if in_axes[1] is not None else XS)
    got = minijax.vmap(f, in_axes=in_axes)(*args)
    for b in range(2):
        one = f(*[a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)])
        for g, w in zip(got, one):
            np.testing.assert_allclose(np.asarray(g)[b], np.asarray(w), rtol=1e-5, atol=1e-6)
    check(lambda J: J.vmap(lambda x0, xs: J.lax.scan(_rnn_body(J), x0, xs), in_axes=in_axes),
          *args)
    _check_jaxprs(minijax.vmap(f, in_axes=in_axes), *args)


def test_vmap_while_batched_predicate():
    def program(J):
        return J.vmap(lambda n, x: J.lax.while_loop(lambda c: c[0] < n,
                                                    lambda c: (c[0] + 1, c[1] * 2.0), (0, x)))
    n = np.array([1, 3, 0], np.int32)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    check(program, n, x)
    check(lambda J: J.jit(program(J)), n, x)
    check(lambda J: J.vmap(lambda x: J.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0,
                                                      x)), x)
    # an unbatched predicate: the carry that depends on the batch is batched, the loop stays
    closed = _check_jaxprs(minijax.vmap(lambda x: minijax.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))), x)
    (eqn,) = _eqns_of(closed, while_p)
    assert [v.aval.shape for v in eqn.outvars] == [(), (3,)]


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_cond_branch_type_mismatch_names_both_types():
    for J in (jax, minijax):
        with pytest.raises(TypeError, match="cond branches must have equal output types"):
            J.lax.cond(True, lambda x: x, lambda x: 1, 1.0)
    with pytest.raises(TypeError, match=r"true_fun has type f32\[\] but the corresponding "
                       r"output of false_fun has type i32\[\]"):
        minijax.lax.cond(True, lambda x: x, lambda x: 1, 1.0)
    with pytest.raises(TypeError, match="same pytree structure"):
        minijax.lax.cond(True, lambda x: (x, x), lambda x: [x, x], 1.0)


def test_other_errors_match_jax():
    cases = [
        (TypeError, lambda J: J.lax.scan(lambda c, x: (c.astype(np.int32), x), 1.0, XS[:, 0])),
        (TypeError, lambda J: J.lax.scan(lambda c, x: c, 1.0, XS[:, 0])),
        (ValueError, lambda J: J.lax.scan(lambda c, x: (c, x), 1.0, XS[:, 0], length=5)),
        (ValueError, lambda J: J.lax.scan(lambda c, x: (c, x), 1.0, None)),
        (TypeError, lambda J: J.lax.while_loop(lambda c: c, lambda c: c * 2.0, 1.0)),
        (TypeError, lambda J: J.lax.while_loop(lambda c: c < 3, lambda c: c * np.float32(2),
                                               np.int32(1))),
        (TypeError, lambda J: J.lax.switch(1.0, [lambda: 1.0, lambda: 2.0])),
        (TypeError, lambda J: J.lax.cond(np.ones(2, bool), lambda: 1.0, lambda: 2.0)),
    ]
    for err, f in cases:
        with pytest.raises(err):
            f(jax)
        with pytest.raises(err):
            f(minijax)


def test_python_if_on_tracer_points_to_cond():
    with pytest.raises(minijax.ConcretizationTypeError, match="lax.cond"):
        minijax.jit(lambda x: x if x > 0 else -x)(1.0)


# ---------------------------------------------------------------------------------------------
# Jaxprs: printed as JAX prints them, well typed after each transformation, DCE
# ---------------------------------------------------------------------------------------------

def _programs(J):
    jnp, lax = J.numpy, J.lax
    return {
        "cond": (lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), (True, 1.0)),
        "scan": (lambda x: lax.scan(lambda c, x: (c + x, c * 2.0), 0.0, x), (XS[:, 0],)),
        "while": (lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x), (1.0,)),
        "fori": (lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x), (1.0,)),
        # traced bounds: one while, no convert_element_type of a bound already int32
        "fori_traced_upper": (lambda n: lax.fori_loop(0, n, lambda i, c: c + 1.0, 0.0), (3,)),
        "fori_traced_int32": (lambda n: lax.fori_loop(n, np.int32(9), lambda i, c: c + i, 0.0),
                              (np.int32(3),)),
    }


@pytest.mark.parametrize("name", list(_programs(minijax)))
def test_jaxpr_text_matches_jax(name):
    (f, args), (jf, _) = _programs(minijax)[name], _programs(jax)[name]
    assert str(_check_jaxprs(f, *args)) == str(jax.make_jaxpr(jf)(*args))


def test_grad_of_cond_jaxpr_has_jax_structure():
    # a known cond computing primal outputs and residuals, then a linear (transposed) cond
    def names(J):
        jaxpr = J.make_jaxpr(J.grad(lambda x: J.lax.cond(x > 0, J.numpy.sin, J.numpy.cos,
                                                         x)))(1.0).jaxpr
        return [(e.primitive.name, len(e.invars), len(e.outvars)) for e in jaxpr.eqns]
    assert names(minijax) == names(jax)


def test_check_jaxpr_after_transformations():
    def loss(x):
        return minijax.lax.scan(_rnn_body(minijax), x, XS)[1].sum() + minijax.lax.cond(
            x.sum() > 0, lambda a: a.sum(), lambda a: minijax.numpy.sin(a).sum(), x)

    cases = [(minijax.grad(loss), X0), (minijax.vmap(minijax.grad(loss)), XB[:, 0]),
             (minijax.jit(minijax.grad(loss)), X0),
             (minijax.grad(minijax.grad(lambda s: loss(X0 * s))), 1.5),
             (minijax.jacfwd(minijax.grad(loss)), X0)]
    for f, x in cases:
        _check_jaxprs(f, x)


def test_dce_of_loops_and_cond():
    def f(x):
        c, ys = minijax.lax.scan(lambda c, x: ((c[0] + x, c[1] * 2.0), c[0] * x), (x, x), XS)
        z = minijax.lax.cond(x.sum() > 0, lambda a: (a * 2.0, minijax.numpy.exp(a)),
                             lambda a: (a, a), x)
        return c[1], z[0]

    dced, _ = pe.dce_closed_jaxpr(minijax.make_jaxpr(f)(X0))
    core.check_jaxpr(dced.jaxpr)
    (scan_eqn,) = _eqns_of(dced, scan_p)
    # only the carry c[1] is needed: c[0] and ys (and their equations) are gone
    assert scan_eqn.params["num_carry"] == 1 and len(scan_eqn.outvars) == 1
    assert pe.count_eqns(scan_eqn.params["jaxpr"].jaxpr) == 1
    (cond_eqn,) = _eqns_of(dced, cond_p)
    assert len(cond_eqn.outvars) == 1
    assert all("exp" not in str(b) for b in cond_eqn.params["branches"])
    np.testing.assert_allclose(core.eval_jaxpr(dced.jaxpr, dced.consts, X0)[0],
                               np.asarray(f(X0)[0]), rtol=1e-6)
