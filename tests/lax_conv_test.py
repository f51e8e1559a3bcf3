"""Tests for `lax.conv_general_dilated` (minijax/lax/convolution.py) and `lax.reduce_window`
(minijax/lax/windowed_reductions.py), against real JAX: values (eager and jit), gradients with
respect to both operands, vmap over either or both, and `check_grads` on small cases. Mirrors
the convolution and reduce_window parts of JAX's tests/lax_test.py, lax_autodiff_test.py and
lax_vmap_test.py.
"""

import jax
import numpy as np
import pytest

import minijax
from minijax.test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): convolutions with their gradients and batching.
pytestmark = pytest.mark.slow

RNG = np.random.default_rng(7)

CONV_CASES = {
    "valid": dict(x=(2, 3, 7, 6), w=(4, 3, 3, 2), strides=(1, 1), padding="VALID"),
    "same_strided": dict(x=(2, 3, 7, 6), w=(4, 3, 3, 2), strides=(2, 1), padding="SAME"),
    "nhwc_explicit_dilated": dict(x=(2, 7, 6, 3), w=(3, 2, 3, 4), strides=(2, 2),
                                  padding=((1, 0), (2, -1)), dn=("NHWC", "HWIO", "NHWC"),
                                  lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
    "groups": dict(x=(2, 4, 7, 6), w=(6, 2, 3, 3), strides=(1, 2), padding="SAME", groups=2),
    "depthwise_1d": dict(x=(2, 4, 9), w=(4, 1, 3), strides=(2,), padding="SAME",
                         dn=("NCH", "OIH", "NHC"), groups=4, rhs_dilation=(2,)),
}


def _conv(J, c):
    return lambda x, w: J.lax.conv_general_dilated(
        x, w, c["strides"], c["padding"], c.get("lhs_dilation"), c.get("rhs_dilation"),
        c.get("dn"), feature_group_count=c.get("groups", 1))


def _operands(c):
    return (RNG.standard_normal(c["x"]).astype(np.float32),
            RNG.standard_normal(c["w"]).astype(np.float32))


def assert_close(got, want, tol=1e-4):
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_values(name):
    c = CONV_CASES[name]
    x, w = _operands(c)
    want = _conv(jax, c)(x, w)
    assert_close(_conv(minijax, c)(x, w), want)
    assert_close(minijax.jit(_conv(minijax, c))(x, w), want)


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_grads(name):
    c = CONV_CASES[name]
    x, w = _operands(c)
    loss = lambda J: lambda x, w: J.numpy.sin(_conv(J, c)(x, w)).sum()
    for argnum in (0, 1):
        assert_close(minijax.grad(loss(minijax), argnum)(x, w), jax.grad(loss(jax), argnum)(x, w))


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_vmap(name):
    c = CONV_CASES[name]
    x, w = _operands(c)
    xs, ws = np.stack([x, 2 * x]), np.stack([w, -w])
    axes = [(0, None), (None, 0), (0, 0)] if c.get("groups", 1) == 1 else [(0, None)]
    for in_axes in axes:
        args = (xs if in_axes[0] == 0 else x, ws if in_axes[1] == 0 else w)
        assert_close(minijax.vmap(_conv(minijax, c), in_axes=in_axes)(*args),
                     jax.vmap(_conv(jax, c), in_axes=in_axes)(*args))


def test_conv_check_grads():
    c = dict(strides=(2, 1), padding=((1, 1), (0, 1)), rhs_dilation=(1, 2), groups=2)
    x = RNG.standard_normal((1, 2, 5, 4))
    w = RNG.standard_normal((2, 1, 2, 2))
    check_grads(_conv(minijax, c), (x, w), order=2)


def test_conv_errors():
    x, w = np.ones((1, 3, 5, 5), np.float32), np.ones((2, 2, 3, 3), np.float32)
    for J in (jax, minijax):  # a feature-count mismatch is a ValueError in JAX
        with pytest.raises(ValueError, match="feature"):
            J.lax.conv_general_dilated(x, w, (1, 1), "VALID")
    with pytest.raises(TypeError, match="dimension_numbers"):
        minijax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=(
            "NCHW", "OIHX", "NCHW"))


# ---------------------------------------------------------------------------------------------
# reduce_window
# ---------------------------------------------------------------------------------------------

WINDOW_CASES = {
    "pool2x2": ((1, 1, 2, 2), (1, 1, 2, 2), "VALID", None, None),
    "same3x3": ((1, 1, 3, 3), (1, 1, 2, 1), "SAME", None, None),
    "explicit_window_dilation": ((1, 1, 2, 3), (1, 1, 1, 2),
                                 ((0, 0), (0, 0), (1, 2), (0, -1)), None, (1, 1, 2, 1)),
    "base_dilation": ((1, 1, 2, 2), (1, 1, 2, 2), "VALID", (1, 1, 2, 1), None),
}
REDUCERS = {"add": 0.0, "max": -np.inf, "min": np.inf}
XW = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)


def _window(J, name, case):
    wd, ws, pad, bd, wdl = WINDOW_CASES[case]
    return lambda x: J.lax.reduce_window(x, REDUCERS[name], getattr(J.lax, name), wd, ws, pad,
                                         bd, wdl)


@pytest.mark.parametrize("case", WINDOW_CASES)
@pytest.mark.parametrize("name", REDUCERS)
def test_reduce_window(name, case):
    f, g = _window(minijax, name, case), _window(jax, name, case)
    assert_close(f(XW), g(XW), 1e-5)
    assert_close(minijax.jit(f)(XW), g(XW), 1e-5)
    xs = np.stack([XW, 2 * XW], 1)
    assert_close(minijax.vmap(f, in_axes=1)(xs), jax.vmap(g, in_axes=1)(xs), 1e-5)
    if name != "add" and WINDOW_CASES[case][4]:
        return  # JAX has no max-pool gradient with window dilation
    loss = lambda J, h: lambda x: J.numpy.sin(h(x)).sum()
    assert_close(minijax.grad(loss(minijax, f))(XW), jax.grad(loss(jax, g))(XW), 1e-5)


def test_reduce_window_check_grads():
    x = np.random.default_rng(0).standard_normal((3, 5))  # its own: the same alone or in order
    for name in REDUCERS:
        f = lambda x, name=name: minijax.lax.reduce_window(
            x, REDUCERS[name], getattr(minijax.lax, name), (2, 2), (1, 2), ((0, 1), (1, 0)))
        check_grads(f, (x,), order=1 if name != "add" else 2)


def test_reduce_window_unsupported_computation():
    with pytest.raises(NotImplementedError, match="reduce_window"):
        minijax.lax.reduce_window(XW, 1.0, minijax.lax.mul, (1, 1, 2, 2), (1, 1, 1, 1), "VALID")


# max pooling's derivative: select_and_gather_add (jvp) and select_and_scatter_add (transpose)
POOL_CASES = [c for c in WINDOW_CASES if not WINDOW_CASES[c][4]]
XT = np.round(2 * XW)  # many ties inside windows: the first winner must be JAX's


@pytest.mark.parametrize("kind", ["select_and_gather_add", "unrolled"])
@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("name", ["max", "min"])
def test_pooling_derivatives(name, case, kind):
    from minijax.lax.windowed_reductions import chooser_jvp
    f, g = _window(minijax, name, case), _window(jax, name, case)
    w = np.linspace(-1, 1, g(XT).size, dtype=np.float32).reshape(g(XT).shape)
    loss = lambda J, h: lambda x: (h(x) * w).sum()
    t = np.cos(XT)
    progs = {
        "grad": lambda J, h: J.grad(loss(J, h)),
        "jit_grad": lambda J, h: J.jit(J.grad(loss(J, h))),
        "jvp": lambda J, h: lambda x: J.jvp(h, (x,), (t,))[1],
        "hvp": lambda J, h: lambda x: J.jvp(J.grad(lambda x: (h(x) ** 2).sum()), (x,), (t,))[1],
        "vmap_grad": lambda J, h: lambda x: J.vmap(J.grad(loss(J, h)))(np.stack([x, -x])),
    }
    with chooser_jvp(kind):
        for prog, make in progs.items():
            np.testing.assert_array_equal(make(minijax, f)(XT), make(jax, g)(XT), err_msg=prog)
        got = str(minijax.make_jaxpr(progs["grad"](minijax, f))(XT))
    if kind == "select_and_gather_add":
        assert got == str(jax.make_jaxpr(progs["grad"](jax, g))(XT))
        jvp = str(minijax.make_jaxpr(progs["jvp"](minijax, f))(XT))
        assert jvp == str(jax.make_jaxpr(progs["jvp"](jax, g))(XT))
    else:
        assert "select_and" not in got and "select_n" in got


def test_pooling_second_order_check_grads():
    f = lambda x: minijax.lax.reduce_window(x, -np.inf, minijax.lax.max, (2, 2), (1, 2),
                                            ((0, 1), (1, 0)))
    check_grads(f, (RNG.standard_normal((3, 5)),), order=2)


def test_chooser_jvp_kinds():
    from minijax.interpreters import ad
    from minijax.lax import windowed_reductions as wr
    rule = ad.primitive_jvps[wr.reduce_window_max_p]
    with pytest.raises(ValueError, match="chooser_jvp: kind must be one of"):
        with wr.chooser_jvp("slices"):
            pass
    with wr.chooser_jvp("unrolled"):
        assert ad.primitive_jvps[wr.reduce_window_max_p] is not rule
    assert ad.primitive_jvps[wr.reduce_window_max_p] is rule
