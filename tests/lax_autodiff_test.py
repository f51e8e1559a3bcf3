"""Derivatives of every differentiable minijax.lax primitive: jvp and vjp against jax.jvp and
jax.vjp, numerical checks with `check_grads` (orders 1 and 2), and the transposes of the linear
primitives (exact inner-product identity, jax.linear_transpose, check_jaxpr).

Mirrors tests/lax_autodiff_test.py in JAX. The op table is in tests/lax_test_util.py.
"""

import zlib

import jax
import numpy as np
import pytest
from lax_test_util import ALL_CASES, F32, STRUCTURAL_CASES, Case, assert_close, rand

import minijax
from minijax import core, lax as mlax
from minijax.test_util import check_grads


def _rng(name: str) -> np.random.RandomState:
    return np.random.RandomState(zlib.crc32(name.encode()) + 1)


def _float_output(case: Case) -> bool:
    out = case(minijax, *case.args(_rng(case.name)))
    return np.asarray(out).dtype.kind == "f"


DIFF_CASES = [c for c in ALL_CASES if c.diff and _float_output(c)]
LINEAR_CASES = [c for c in DIFF_CASES if c.linear]


def _split(case: Case, J, args):
    """(f of the differentiated args only, those args)."""
    def f(*dargs):
        full = list(args)
        for i, a in zip(case.diff, dargs):
            full[i] = a
        return case(J, *full)
    return f, [args[i] for i in case.diff]


# JAX references. jvp and vjp run eagerly: JAX caches each operation's executable by shape, which
# the many cases share; grads of whole programs run under one jax.jit.
def _jax_jvp(f, primals, tangents):
    return jax.jvp(f, tuple(primals), tuple(tangents))


def _jax_vjp(f, primals, ct):
    out, pullback = jax.vjp(f, *primals)
    return out, pullback(ct)


def _jax_grad(f, argnums, *args):
    return jax.jit(jax.grad(f, argnums))(*args)


def _low_precision(case: Case, args) -> bool:
    out = case(minijax, *args)
    return any(np.asarray(a).dtype.itemsize <= 2 for a in list(args) + [out])


# ---------------------------------------------------------------------------------------------
# jvp, vjp and numerical checks for every differentiable case
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", DIFF_CASES, ids=repr)
def test_jvp_matches_jax(case):
    rng = _rng(case.name)
    args = case.args(rng)
    f_mini, primals = _split(case, minijax, args)
    f_jax, _ = _split(case, jax, args)
    primals = tuple(primals)
    tangents = tuple(rand(rng, np.shape(p), np.asarray(p).dtype) for p in primals)
    out, t_out = minijax.jvp(f_mini, primals, tangents)
    want_out, want_t = _jax_jvp(f_jax, primals, tangents)
    assert_close(out, want_out, f"{case.name} primal", case.tol)
    assert_close(t_out, want_t, f"{case.name} tangent", case.tol or 1e-4)


@pytest.mark.parametrize("case", DIFF_CASES, ids=repr)
def test_vjp_matches_jax(case):
    rng = _rng(case.name)
    args = case.args(rng)
    f_mini, primals = _split(case, minijax, args)
    f_jax, _ = _split(case, jax, args)
    out, pullback = minijax.vjp(f_mini, *primals)
    ct = rand(rng, np.shape(out), np.asarray(out).dtype)
    want_out, want = _jax_vjp(f_jax, primals, ct)
    assert_close(out, want_out, f"{case.name} primal", case.tol)
    got = pullback(ct)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, f"{case.name} cotangent", case.tol or 1e-4)


@pytest.mark.parametrize("case", DIFF_CASES, ids=repr)
def test_check_grads(case):
    args = case.args(_rng(case.name))
    f, primals = _split(case, minijax, args)
    if _low_precision(case, args):
        # float16 rounding needs a larger finite-difference step and tolerance
        check_grads(f, primals, order=2, eps=1e-1, atol=1e-1, rtol=1e-1)
    else:
        check_grads(f, primals, order=2)


@pytest.mark.parametrize("case", [c for c in DIFF_CASES if c.prim in ("sin", "mul", "pow",
                                                                        "dot_general", "pad")],
                         ids=repr)
def test_grad_jaxpr_type_checks(case):
    args = case.args(_rng(case.name))
    f, primals = _split(case, minijax, args)

    def loss(*xs):
        out = f(*xs)
        return mlax.reduce_sum(out, tuple(range(np.ndim(out))))
    closed = minijax.make_jaxpr(minijax.grad(loss, tuple(range(len(primals)))))(*primals)
    core.check_jaxpr(closed.jaxpr)
    closed = minijax.make_jaxpr(lambda *xs: minijax.jvp(f, xs, xs))(*primals)
    core.check_jaxpr(closed.jaxpr)


# ---------------------------------------------------------------------------------------------
# Transposes of the linear primitives
# ---------------------------------------------------------------------------------------------

def _bilinear_cases():
    out = []
    for c in DIFF_CASES:
        if c.prim in ("dot_general", "mul") or (c.prim == "div" and not c.linear):
            argnums = (0, 1) if c.prim != "div" else (0,)
            for k in argnums:
                out.append(Case(f"{c.name}_arg{k}", c.prim, c.fun, c.specs, diff=(k,),
                                linear=True, make_args=c._make_args))
    return out


TRANSPOSE_CASES = LINEAR_CASES + _bilinear_cases()


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=repr)
def test_linear_transpose(case):
    rng = _rng(case.name)
    args = case.args(rng)
    f_mini, primals = _split(case, minijax, args)
    f_jax, _ = _split(case, jax, args)
    out, pullback = minijax.vjp(f_mini, *primals)
    ct = rand(rng, np.shape(out), np.asarray(out).dtype)
    cts = pullback(ct)
    # against JAX's transpose of the same linear map
    want = jax.jit(lambda c: jax.linear_transpose(f_jax, *primals)(c))(ct)
    for g, w in zip(cts, want):
        assert_close(g, w, f"{case.name} transpose", case.tol or 1e-4)
    # <ct, f(t)> == <f^T(ct), t>, exactly up to rounding (f is linear in the args)
    ts = [rand(rng, np.shape(p), np.asarray(p).dtype) for p in primals]
    lhs = np.sum(np.asarray(ct, np.float64) * np.asarray(f_mini(*ts), np.float64))
    rhs = sum(np.sum(np.asarray(c, np.float64) * np.asarray(t, np.float64))
              for c, t in zip(cts, ts))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-2 if _low_precision(case, args) else 1e-4,
                               atol=1e-4)
    # the transposed program is a well-typed jaxpr
    closed = minijax.make_jaxpr(lambda c: minijax.vjp(f_mini, *primals)[1](c))(ct)
    core.check_jaxpr(closed.jaxpr)


PARTIAL_CASES = [Case(f"{c.name}_only{k}", c.prim, c.fun, c.specs, diff=(k,), linear=True,
                      make_args=c._make_args)
                 for c in LINEAR_CASES if len(c.diff) >= 2 for k in c.diff]


@pytest.mark.parametrize("case", PARTIAL_CASES, ids=repr)
def test_transpose_for_one_linear_operand(case):
    # the other operands are known values: the transpose rules' non-undefined branches
    rng = _rng(case.name)
    args = case.args(rng)
    f_mini, primals = _split(case, minijax, args)
    f_jax, _ = _split(case, jax, args)
    out, pullback = minijax.vjp(f_mini, *primals)
    ct = rand(rng, np.shape(out), np.asarray(out).dtype)
    (got,) = pullback(ct)
    t = rand(rng, np.shape(primals[0]), np.asarray(primals[0]).dtype)
    # f is affine in the one operand: <ct, f(t) - f(0)> == <f^T(ct), t>
    f_lin = np.asarray(f_mini(t), np.float64) - np.asarray(f_mini(np.zeros_like(t)), np.float64)
    np.testing.assert_allclose(np.sum(np.asarray(ct, np.float64) * f_lin),
                               np.sum(np.asarray(got, np.float64) * t), rtol=1e-4, atol=1e-4)
    if case.prim == "pad" and case.diff == (1,):
        return  # JAX's pad transpose fails for the padding value alone (see below)
    (want,) = _jax_vjp(f_jax, primals, ct)[1]
    assert_close(got, want, case.name, 1e-4)


def test_pad_transpose_padding_value_only():
    # JAX's own rule fails here (it subtracts the operand's part, which it did not compute)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    cfg = ((1, 2, 1), (-1, 1, 0))
    ct = rand(np.random.RandomState(0), jax.lax.pad(x, np.float32(0), cfg).shape, F32)
    g = minijax.grad(lambda pv: mlax.reduce_sum(mlax.mul(mlax.pad(x, pv, cfg), ct), (0, 1)))(
        np.float32(2.0))
    # pv's cotangent is the sum of ct over the padding positions
    mask = np.asarray(jax.lax.pad(np.zeros_like(x), np.float32(1), cfg))
    np.testing.assert_allclose(g, np.sum(ct * mask), rtol=1e-5)
    # and jointly with the operand
    gx, gpv = minijax.grad(lambda a, pv: mlax.reduce_sum(mlax.mul(mlax.pad(a, pv, cfg), ct),
                                                         (0, 1)), (0, 1))(x, np.float32(2.0))
    np.testing.assert_allclose(gpv, np.sum(ct * mask), rtol=1e-5)
    check_grads(lambda pv: mlax.pad(x, pv, cfg), (np.float32(2.0),), order=1)


# ---------------------------------------------------------------------------------------------
# Points where the derivative needs a convention: follow JAX's
# ---------------------------------------------------------------------------------------------

def _jvp_both(name_fun, *primals):
    tangents = tuple(np.ones_like(p) for p in primals)
    got = minijax.jvp(lambda *a: name_fun(minijax, *a), primals, tangents)
    want = _jax_jvp(lambda *a: name_fun(jax, *a), primals, tangents)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_derivative_conventions_at_kinks():
    z = np.array([0.0, -0.0, 1.0, -2.0], np.float32)
    _jvp_both(lambda J, x: J.lax.abs(x), z)
    _jvp_both(lambda J, x: J.lax.integer_pow(x, 0), z)
    _jvp_both(lambda J, x: J.lax.integer_pow(x, 1), z)
    _jvp_both(lambda J, x: J.lax.integer_pow(x, 2), z)
    _jvp_both(lambda J, x: J.lax.sign(x), z)
    _jvp_both(lambda J, x: J.lax.sqrt(x), np.array([1.0, 4.0], np.float32))


def test_max_min_ties_split_the_gradient():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([1.0, 0.0, 3.0], np.float32)
    for name in ["max", "min"]:
        f = lambda J, a, b, n=name: J.lax.reduce_sum(getattr(J.lax, n)(a, b), (0,))
        got = minijax.grad(lambda a, b, f=f: f(minijax, a, b), (0, 1))(x, y)
        want = _jax_grad(lambda a, b, f=f: f(jax, a, b), (0, 1), x, y)
        for g, w in zip(got, want):
            assert_close(g, w, name)
        _jvp_both(lambda J, a, b, n=name: getattr(J.lax, n)(a, b), x, y)
        _jvp_both(lambda J, a, n=name: getattr(J.lax, n)(a, np.float32(2.0)), x)


def test_reduce_max_min_ties_split_the_gradient():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float32)
    for name in ["reduce_max", "reduce_min"]:
        for axes in [(1,), (0, 1)]:
            f = lambda J, a, n=name, ax=axes: J.lax.reduce_sum(getattr(J.lax, n)(a, ax),
                                                               tuple(range(2 - len(ax))))
            assert_close(minijax.grad(lambda a, f=f: f(minijax, a))(x),
                         _jax_grad(lambda a, f=f: f(jax, a), 0, x), f"{name}{axes}")


@pytest.mark.parametrize("fun", [
    lambda J, x: J.lax.argmax(x, 0, np.int32), lambda J, x: J.lax.lt(x, np.float32(0)),
    lambda J, x: J.lax.convert_element_type(x, np.int32), lambda J, x: J.lax.floor(x),
    lambda J, x: J.lax.stop_gradient(x), lambda J, x: J.lax.sign(x),
], ids=["argmax", "lt", "convert_int", "floor", "stop_gradient", "sign"])
def test_zero_derivatives(fun):
    x = np.array([0.5, -1.5, 2.0], np.float32)
    t = np.ones_like(x)
    out, t_out = minijax.jvp(lambda a: fun(minijax, a), (x,), (t,))
    want_out, want_t = _jax_jvp(lambda a: fun(jax, a), (x,), (t,))
    assert_close(out, want_out)
    assert np.asarray(t_out).dtype == np.asarray(want_t).dtype  # float0 for int/bool outputs
    if np.asarray(want_t).dtype.kind == "f":
        assert_close(t_out, want_t)


def test_dot_general_preferred_element_type_grad():
    x = rand(np.random.RandomState(0), (2, 3), np.float16)
    y = rand(np.random.RandomState(1), (3, 4), np.float16)
    dn = (((1,), (0,)), ((), ()))

    def f(J, a, b):
        return J.lax.reduce_sum(J.lax.dot_general(a, b, dn, preferred_element_type=np.float32),
                                (0, 1))
    got = minijax.grad(lambda a, b: f(minijax, a, b), (0, 1))(x, y)
    want = _jax_grad(lambda a, b: f(jax, a, b), (0, 1), x, y)
    for g, w in zip(got, want):
        assert_close(g, w, tol=1e-2)


def test_select_n_grad_through_predicate_is_zero_for_cases_only():
    which = np.array([True, False, True])
    a, b = np.arange(3, dtype=np.float32), -np.arange(3, dtype=np.float32)

    def f(J, x, y):
        return J.lax.reduce_sum(J.lax.mul(J.lax.select_n(which, x, y), x), (0,))
    got = minijax.grad(lambda x, y: f(minijax, x, y), (0, 1))(a, b)
    want = _jax_grad(lambda x, y: f(jax, x, y), (0, 1), a, b)
    for g, w in zip(got, want):
        assert_close(g, w)


@pytest.mark.parametrize("case", [c for c in STRUCTURAL_CASES if c.name in
                                  ("broadcast_in_dim_size1", "pad_negative")], ids=repr)
def test_second_order_through_jit(case):
    args = case.args(_rng(case.name))
    f, primals = _split(case, minijax, args)
    check_grads(minijax.jit(f), primals, order=2)



@pytest.mark.parametrize("name", ["tanh", "sqrt", "log", "square", "rsqrt", "cos",
                                  "exp", "sin", "logistic"])
def test_grad_of_a_python_scalar_keeps_its_weak_type_like_jax(name):
    """Rule constants follow a weakly typed operand (JAX: lax._const / _one), so
    `grad(tanh)(2.0)` is weakly typed in both modules."""
    got, want = (J.grad(getattr(J.lax, name))(2.0) for J in (minijax, jax))
    assert (got.weak_type, got.dtype) == (want.weak_type, want.dtype)



@pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])
def test_check_grads_takes_pytree_arguments_as_jax_does(J):
    # A model's parameters are a pytree (dicts and lists of arrays): check_grads perturbs every
    # leaf. It passes for a correct derivative and raises for a wrong one, in both modules.
    import jax.test_util  # noqa: F401 (jax.test_util is a submodule)
    args = ({"w": rand(np.random.RandomState(0), (3, 2), F32), "b": [np.float32(0.5)]},
            rand(np.random.RandomState(1), (2,), F32))

    @J.custom_jvp
    def wrong_sin(x):
        return J.numpy.sin(x)
    wrong_sin.defjvp(lambda p, t: (wrong_sin(p[0]), 2.0 * t[0]))
    f = lambda p, x: J.numpy.sum(J.numpy.tanh(p["w"] @ x + p["b"][0]))
    g = lambda p, x: J.numpy.sum(wrong_sin(p["w"] @ x))
    J.test_util.check_grads(f, args, order=2, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)
    for mode in ("fwd", "rev"):
        with pytest.raises(AssertionError):
            J.test_util.check_grads(g, args, order=1, modes=(mode,), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("axis", [-1, 0])
def test_top_k_second_order_and_batched_gradients_as_jax(axis):
    # top_k's jvp is a gather with batching dims (as JAX's); its transpose is a scatter-add,
    # and the transpose of that (a Hessian) a gather again: each as JAX computes it
    rng = np.random.RandomState(0)
    x, v = rand(rng, (3, 5), F32), rand(rng, (3, 5), F32)
    got, want = [], []
    for J, out in ((minijax, got), (jax, want)):
        f = lambda x, J=J: (J.lax.top_k(x, 2, axis=axis)[0] ** 2).sum()
        out.append(J.jvp(J.grad(f), (x,), (v,))[1])
        out.append(J.grad(lambda x, J=J, f=f: (J.grad(f)(x) ** 2).sum())(x))
        out.append(J.vmap(J.grad(f))(np.stack([x, x + 1])))
    for a, b in zip(got, want):
        assert_close(a, b, "top_k derivative", tol=1e-6)
