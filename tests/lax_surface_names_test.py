"""jax.lax names built on other primitives or as small primitives of their own, each against
real JAX: the transposed, patch and unshared convolutions (eager, jit, grad, vmap), `stage`,
`copy_p`, `dce_sink`, `rng_uniform` and `shape_as_value` (values, jaxprs and lowerings)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import minijax

RNG = np.random.default_rng(0)
F32 = np.float32


def _rand(*shape):
    return RNG.standard_normal(shape).astype(F32)


def _modes(f):
    """`f(J)` for J = jax and minijax run eagerly and under jit: the four results."""
    out = []
    for J in (jax, minijax):
        g = f(J)
        out.append(g)
        out.append(J.jit(g))
    return out


def _close(fs, *args, rtol=2e-5, atol=2e-5):
    want = np.asarray(fs[0](*args))
    for f in fs[1:]:
        np.testing.assert_allclose(np.asarray(f(*args)), want, rtol=rtol, atol=atol)


TRANSPOSE_CASES = [  # lhs shape, rhs shape, strides, padding, rhs_dilation, dn, transpose_kernel
    ((2, 5, 6, 3), (3, 3, 3, 4), (2, 2), "SAME", None, None, False),
    ((2, 5, 6, 3), (3, 2, 3, 4), (2, 1), "VALID", (1, 2), None, False),
    ((2, 5, 6, 3), (3, 3, 4, 3), (2, 2), "SAME", None, None, True),
    ((2, 3, 5, 6), (4, 3, 3, 3), (3, 2), ((1, 2), (0, 1)), None, ("NCHW", "OIHW", "NCHW"),
     False),
    ((2, 7, 3), (3, 3, 2), (2,), "VALID", None, None, False),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: f"{c[0]}-{c[3]}")
def test_conv_transpose_as_jax(case):
    ls, rs, strides, padding, dil, dn, tk = case
    lhs, rhs = _rand(*ls), _rand(*rs)

    def f(J):
        return lambda x, k: J.lax.conv_transpose(x, k, strides, padding, rhs_dilation=dil,
                                                 dimension_numbers=dn, transpose_kernel=tk)
    _close(_modes(f), lhs, rhs)
    grads = [lambda x, k, J=J: J.grad(lambda x, k: (f(J)(x, k) ** 2).sum(), (0, 1))(x, k)
             for J in (jax, minijax)]
    (gx, gk), (mx, mk) = (g(lhs, rhs) for g in grads)
    np.testing.assert_allclose(mx, gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mk, gk, rtol=1e-4, atol=1e-4)


def test_conv_transpose_consistent_padding_and_vmap_as_jax():
    lhs, rhs = _rand(3, 2, 5, 6, 3), _rand(3, 3, 3, 4)

    def f(J):
        one = lambda x: J.lax.conv_transpose(
            x, rhs, (2, 2), ((1, 1), (0, 2)), use_consistent_padding=True)
        return J.vmap(one)
    _close(_modes(f), lhs)


def test_conv_transpose_refuses_a_rank_without_default_layouts():
    x = np.zeros((1,) * 6, F32)
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="No 4\\+ dimensional dimension_number defaults"):
            J.lax.conv_transpose(x, x, (1,) * 4, "SAME")


PATCH_CASES = [  # lhs shape, filter shape, strides, padding, lhs_dil, rhs_dil, dn
    ((2, 3, 6, 5), (2, 3), (1, 1), "VALID", None, None, None),
    ((2, 3, 6, 5), (3, 2), (2, 1), ((1, 1), (0, 2)), (1, 2), (2, 1), None),
    ((2, 6, 5, 3), (2, 2), (1, 2), ((1, 0), (2, 1)), None, None, ("NHWC", "HWIO", "NHWC")),
    ((2, 6, 5, 3), (3, 2), (1, 1), "VALID", None, None, ("NHWC", "OIWH", "NCHW")),
]


@pytest.mark.parametrize("case", PATCH_CASES, ids=lambda c: f"{c[0]}-{c[6]}")
def test_conv_general_dilated_patches_as_jax(case):
    ls, fs, strides, padding, ld, rd, dn = case
    x = _rand(*ls)

    def f(J):
        return lambda x: J.lax.conv_general_dilated_patches(x, fs, strides, padding, ld, rd, dn)
    _close(_modes(f), x, rtol=0, atol=0)  # a copy of the input's values, exactly
    gw = jax.grad(lambda x: (f(jax)(x) ** 2).sum())(x)
    np.testing.assert_allclose(minijax.grad(lambda x: (f(minijax)(x) ** 2).sum())(x), gw,
                               rtol=1e-5)
    vw = jax.vmap(f(jax))(np.stack([x, -x]))
    np.testing.assert_allclose(minijax.vmap(f(minijax))(np.stack([x, -x])), vw)


@pytest.mark.parametrize("dn", [None, ("NHWC", "HWIO", "NHWC"), ("NCHW", "IOWH", "NHWC")])
def test_conv_general_dilated_local_as_jax(dn):
    fs, strides, padding = (3, 2), (1, 2), "SAME"
    layout = dn or ("NCHW", "OIHW", "NCHW")
    lhs = _rand(2, 3, 6, 5) if layout[0] == "NCHW" else _rand(2, 6, 5, 3)
    patches = jax.lax.conv_general_dilated_patches(lhs, fs, strides, padding,
                                                   dimension_numbers=dn)
    size = dict(O=4, I=3 * 6, **{c: patches.shape[layout[2].index(c)] for c in "HW"})
    rhs = _rand(*[size[c] for c in layout[1]])

    def f(J):
        return lambda x, k: J.lax.conv_general_dilated_local(x, k, strides, padding, fs,
                                                             dimension_numbers=dn)
    _close(_modes(f), lhs, rhs, rtol=1e-4, atol=1e-4)
    g = [J.grad(lambda x, k, J=J: (f(J)(x, k) ** 2).sum(), (0, 1))(lhs, rhs)
         for J in (jax, minijax)]
    for a, b in zip(g[1], g[0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_conv_general_dilated_local_refuses_a_dot_algorithm():
    x, k = _rand(1, 1, 4, 4), _rand(2, 4, 3, 3)
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="Unsupported precision"):
            J.lax.conv_general_dilated_local(x, k, (1, 1), "VALID", (2, 2),
                                             precision="BF16_BF16_F32")


def _jaxprs(f, *args):
    return [str(J.make_jaxpr(f(J))(*args)) for J in (jax, minijax)]


def test_stage_lifts_a_value_into_the_trace_as_jax():
    want, got = _jaxprs(lambda J: lambda: J.lax.stage(1.0))
    assert got == want  # a literal result, no equation
    want, got = _jaxprs(lambda J: lambda x: J.lax.stage(x) * 2, 1.0)
    assert got == want  # a tracer of the trace is itself
    for v in (1.0, np.float32(2), np.arange(3)):
        a, b = jax.lax.stage(v), minijax.lax.stage(v)
        assert (b.dtype, b.shape, b.weak_type) == (a.dtype, a.shape, a.weak_type)
        assert isinstance(b, minijax.Array)
        np.testing.assert_array_equal(b, a)
    for J in (jax, minijax):
        assert float(J.grad(lambda x, J=J: J.lax.stage(x) * 3.0)(2.0)) == 3.0
    np.testing.assert_array_equal(minijax.vmap(minijax.lax.stage)(np.arange(3.0)),
                                  jax.vmap(jax.lax.stage)(np.arange(3.0)))


def test_copy_p_as_jax():
    want, got = _jaxprs(lambda J: J.grad(lambda x: J.lax.copy_p.bind(x) * 3.0), 1.0)
    assert got == want
    x = np.arange(6.0, dtype=F32).reshape(2, 3)
    for J in (jax, minijax):
        for g in (J.lax.copy_p.bind, J.jit(J.lax.copy_p.bind),
                  J.vmap(J.lax.copy_p.bind, in_axes=1)):
            out = g(x)
            np.testing.assert_array_equal(out, x if out.shape == x.shape else x.T)
    y = minijax.lax.copy_p.bind(minijax.numpy.asarray(x))
    assert isinstance(y, minijax.Array)


def test_dce_sink_keeps_a_value_alive_as_jax():
    f = lambda J: lambda x: (J.lax.dce_sink({"a": x, "b": [x * 3]}), x * 2)[1]
    want, got = _jaxprs(f, 1.0)
    assert got == want and "dce_sink" in got
    want, got = _jaxprs(lambda J: J.grad(f(J)), 1.0)
    assert got == want
    assert minijax.lax.dce_sink(np.ones(2)) is None
    for J in (jax, minijax):
        assert float(J.jit(f(J))(1.5)) == 3.0
        assert float(J.jit(J.grad(f(J)))(1.5)) == 2.0
        np.testing.assert_array_equal(J.vmap(f(J))(np.arange(3.0)), 2 * np.arange(3.0))
    # with prevent_mlir_dce: a side-effecting custom call in the lowering too, as JAX's
    lowered = [J.jit(lambda x, J=J: (J.lax.dce_sink(x, prevent_mlir_dce=True), x)[1])
               .lower(1.0).as_text() for J in (jax, minijax)]
    calls = [[ln.strip() for ln in t.splitlines() if "custom_call" in ln] for t in lowered]
    assert calls[1] == calls[0] and len(calls[0]) == 1


def test_rng_uniform_as_jax():
    want, got = _jaxprs(lambda J: lambda: J.lax.rng_uniform(0.0, 1.0, (3,)))
    assert got == want
    ops = [[ln.split("=", 1)[1].strip() for ln in J.jit(
        lambda J=J: J.lax.rng_uniform(F32(-2), F32(5), (4, 3))).lower().as_text().splitlines()
        if "stablehlo.rng" in ln] for J in (jax, minijax)]
    assert ops[1] == ops[0] and len(ops[0]) == 1
    for lo, hi in ((F32(-2), F32(5)), (np.int32(3), np.int32(9)), (0.0, 1.0)):
        a = jax.lax.rng_uniform(lo, hi, (500,))
        for b in (minijax.lax.rng_uniform(lo, hi, (500,)),
                  minijax.jit(lambda lo=lo, hi=hi: minijax.lax.rng_uniform(lo, hi, (500,)))()):
            assert (b.dtype, b.shape, b.weak_type) == (a.dtype, a.shape, a.weak_type)
            b = np.asarray(b)
            assert b.min() >= lo and b.max() < hi and len(np.unique(b)) > 5
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="must have identical dtypes"):
            J.lax.rng_uniform(0.0, 1, (3,))
        with pytest.raises(ValueError, match="must be scalars"):
            J.lax.rng_uniform(np.zeros(2, F32), np.ones(2, F32), (3,))
        with pytest.raises(NotImplementedError):  # no batching rule, as JAX
            J.vmap(lambda a, J=J: J.lax.rng_uniform(a, 1.0, (2,)))(np.zeros(3, F32))


def test_shape_as_value_as_jax():
    for shape in ((2, 3), (), (7,), (2**31, 1)):  # int64 only where int32 cannot hold
        a, b = jax.lax.shape_as_value(shape), minijax.lax.shape_as_value(shape)
        assert (type(b) is np.ndarray) == (type(a) is np.ndarray)
        assert (b.dtype, b.shape) == (a.dtype, a.shape)
        np.testing.assert_array_equal(b, a)


def test_eager_special_functions_through_xla_keep_weak_types_as_jax():
    # their eager values come from XLA; the type is the abstract eval's, weak for Python floats
    for name, args in (("polygamma", (1.0, 2.0)), ("zeta", (2.0, 1.5))):
        a, b = getattr(jax.lax, name)(*args), getattr(minijax.lax, name)(*args)
        assert (b.dtype, b.weak_type) == (a.dtype, a.weak_type)
        np.testing.assert_allclose(b, a, rtol=1e-6)
