"""minijax.nn's activations and standardize against jax.nn: values, jit, grads (against
jax.grad and with `check_grads`) and vmap. Mirrors tests/nn_test.py in JAX.
"""

import jax
import numpy as np
import pytest

import minijax
from minijax.test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): check_grads on every activation.
pytestmark = pytest.mark.slow

RNG = np.random.RandomState(0)
X = np.asarray(RNG.randn(3, 5) * 3, np.float32)
# the kinks of relu6 (0 and 6) and large |x|, where naive formulas overflow
EDGES = np.asarray([-100.0, -6.0, 0.0, 1.5, 6.0, 7.0, 100.0], np.float32)

# name: fun(J, x), written once and run with J=jax and J=minijax
PROGRAMS = {
    "relu6": lambda J, x: J.nn.relu6(x),
    "silu": lambda J, x: J.nn.silu(x),
    "swish": lambda J, x: J.nn.swish(x),
    "softplus": lambda J, x: J.nn.softplus(x),
    "log_sigmoid": lambda J, x: J.nn.log_sigmoid(x),
    "gelu_exact": lambda J, x: J.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda J, x: J.nn.gelu(x, approximate=True),
    "standardize": lambda J, x: J.nn.standardize(x),
    "standardize_axis0_stable": lambda J, x: J.nn.standardize(x, axis=0, algorithm="stable"),
    "standardize_axes": lambda J, x: J.nn.standardize(x, axis=(0, 1), epsilon=1e-3),
    "standardize_given_stats": lambda J, x: J.nn.standardize(
        x, mean=np.float32(0.5), variance=np.float32(2.0)),
    "identity": lambda J, x: J.nn.identity(x),
    "tanh": lambda J, x: J.nn.tanh(x),
    "elu": lambda J, x: J.nn.elu(x),
    "elu_alpha": lambda J, x: J.nn.elu(x, 0.5),
    "celu": lambda J, x: J.nn.celu(x, 1.5),
    "selu": lambda J, x: J.nn.selu(x),
    "leaky_relu": lambda J, x: J.nn.leaky_relu(x, 0.1),
    "mish": lambda J, x: J.nn.mish(x),
    "soft_sign": lambda J, x: J.nn.soft_sign(x),
    "squareplus": lambda J, x: J.nn.squareplus(x),
    "squareplus_b": lambda J, x: J.nn.squareplus(x, 0.5),
    "log1mexp": lambda J, x: J.nn.log1mexp(J.numpy.abs(x) + 0.1),
    "glu": lambda J, x: J.nn.glu(J.numpy.concatenate([x, 2 * x], -1)),
    "logmeanexp": lambda J, x: J.nn.logmeanexp(x, axis=1),
    "logmeanexp_where": lambda J, x: J.nn.logmeanexp(x, axis=0, where=x > -2.0),
}
# piecewise functions: values, grads and vmap against JAX, but no finite differences (which
# straddle their kinks)
KINKED = {
    "hard_tanh": lambda J, x: J.nn.hard_tanh(x),
    "hard_sigmoid": lambda J, x: J.nn.hard_sigmoid(x),
    "hard_silu": lambda J, x: J.nn.hard_silu(x),
    "hard_swish": lambda J, x: J.nn.hard_swish(x),
    "sparse_plus": lambda J, x: J.nn.sparse_plus(x),
    "sparse_sigmoid": lambda J, x: J.nn.sparse_sigmoid(x),
}
ELEMENTWISE = ["relu6", "silu", "swish", "softplus", "log_sigmoid", "gelu_exact", "gelu_tanh",
               "elu", "mish", "sparse_plus"]
# finite differences for the functions with a formula of their own (the others are short
# compositions of checked jnp functions, and are compared with jax.grad above)
CHECK_GRADS = ["relu6", "silu", "swish", "softplus", "log_sigmoid", "gelu_exact", "gelu_tanh",
               "standardize", "standardize_axis0_stable", "standardize_axes",
               "standardize_given_stats", "elu", "log1mexp", "glu", "logmeanexp_where"]
ALL = {**PROGRAMS, **KINKED}


def _close(got, want, tol=2e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(ALL))
def test_value_matches_jax(name):
    f = ALL[name]
    want = f(jax, X)
    _close(f(minijax, X), want)
    _close(minijax.jit(lambda x: f(minijax, x))(X), want)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_edges_match_jax(name):
    f = ALL[name]
    _close(f(minijax, EDGES), f(jax, EDGES))
    grad = lambda J: J.vmap(J.grad(lambda v: f(J, v)))(EDGES)
    _close(grad(minijax), grad(jax))


@pytest.mark.parametrize("name", sorted(ALL))
def test_grad_matches_jax(name):
    f = ALL[name]
    def loss(J):
        def weighted(x):
            out = f(J, x)
            return J.numpy.sum(out * np.arange(out.shape[-1] if out.ndim else 1, dtype=np.float32))
        return weighted
    _close(minijax.grad(loss(minijax))(X), jax.grad(loss(jax))(X), 1e-4)


@pytest.mark.parametrize("name", CHECK_GRADS)
def test_check_grads(name):
    # away from relu6's kinks, where finite differences straddle them
    x = np.asarray(RNG.uniform(0.3, 2.5, (2, 3)) * RNG.choice([-1, 1, 2.2], (2, 3)), np.float32)
    check_grads(lambda v: PROGRAMS[name](minijax, v), (x,), order=2, eps=1e-2, atol=5e-2,
                rtol=5e-2)


@pytest.mark.parametrize("name", sorted(ALL))
def test_vmap_matches_jax(name):
    f = ALL[name]
    xs = np.stack([X, 2 * X])
    _close(minijax.vmap(lambda x: f(minijax, x))(xs), jax.vmap(lambda x: f(jax, x))(xs))


def test_gelu_promotes_integers():
    x = np.arange(-3, 4, dtype=np.int32)
    for approximate in [True, False]:
        _close(minijax.nn.gelu(x, approximate), jax.nn.gelu(x, approximate))


def test_standardize_unknown_algorithm():
    with pytest.raises(ValueError, match="Unknown algorithm"):
        minijax.nn.standardize(X, algorithm="exact")


# ---------------------------------------------------------------------------------------------
# dot_product_attention (JAX's XLA implementation; cuDNN's is a GPU kernel)
# ---------------------------------------------------------------------------------------------

_QKV = [np.asarray(RNG.randn(*shape), np.float32)
        for shape in ((2, 5, 4, 8), (2, 6, 2, 8), (2, 6, 2, 8))]  # B T N H, B S K H (GQA 4/2)
ATTENTION = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "scale_bias": dict(scale=0.3, bias=np.asarray(RNG.randn(1, 4, 5, 6), np.float32)),
    "mask": dict(mask=RNG.rand(2, 1, 5, 6) > 0.3),
    "seq_lengths": dict(query_seq_lengths=np.array([5, 3], np.int32),
                        key_value_seq_lengths=np.array([4, 6], np.int32)),
    "window": dict(local_window_size=(2, 1)),
    "causal_window_int": dict(is_causal=True, local_window_size=1),
}


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_dot_product_attention_matches_jax(name):
    kw = ATTENTION[name]
    run = lambda J, q, k, v: J.nn.dot_product_attention(q, k, v, **kw)
    _close(run(minijax, *_QKV), run(jax, *_QKV), 1e-5)
    loss = lambda J: (lambda q, k, v: J.numpy.sum(J.numpy.sin(run(J, q, k, v))))
    for g, w in zip(minijax.grad(loss(minijax), (0, 1, 2))(*_QKV),
                    jax.grad(loss(jax), (0, 1, 2))(*_QKV)):
        _close(g, w, 1e-4)


def test_dot_product_attention_unbatched_residual_and_jit():
    q, k, v = (t[0] for t in _QKV)  # T N H: no batch axis
    run = lambda J: J.jit(lambda q, k, v: J.nn.dot_product_attention(
        q, k, v, is_causal=True, return_residual=True))(q, k, v)
    for g, w in zip(run(minijax), run(jax)):
        _close(g, w, 1e-5)


@pytest.mark.parametrize("bad", ["heads", "dtype", "cudnn_or_unknown"])
def test_dot_product_attention_errors_as_jax(bad):
    q, k, v = _QKV
    call = {"heads": lambda J: J.nn.dot_product_attention(q[:, :, :3], k, v),
            "dtype": lambda J: J.nn.dot_product_attention(q, k, v.astype(np.float16)),
            "cudnn_or_unknown": lambda J: J.nn.dot_product_attention(
                q, k, v, implementation="flash")}[bad]
    for J in (jax, minijax):
        with pytest.raises(ValueError):
            call(J)


# --- block-scaled matmul: JAX computes it with cuDNN on NVIDIA GPUs only (no CPU lowering), so
# the values are checked against its definition, computed here with NumPy

def _scaled_operands():
    rng = np.random.RandomState(1)
    a, b = (rng.randn(2, m, 64).astype(np.float32) for m in (4, 3))
    sa, sb = (rng.uniform(0.5, 2.0, (2, m, 2)).astype(np.float32) for m in (4, 3))
    return a, b, sa, sb


def test_scaled_matmul_is_its_definition():
    a, b, sa, sb = _scaled_operands()
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, 32, -1), b * np.repeat(sb, 32, -1))
    for f in (minijax.nn.scaled_matmul, minijax.jit(minijax.nn.scaled_matmul)):
        out = f(a, b, sa, sb)
        assert out.shape == (2, 4, 3) and out.dtype == np.float32
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-4)
    bf = minijax.nn.scaled_matmul(a, b, sa, sb, preferred_element_type=minijax.numpy.bfloat16)
    assert bf.dtype == minijax.numpy.bfloat16


@pytest.mark.parametrize("bad", ["rank", "batch", "scales", "kept"])
def test_scaled_matmul_shape_errors_as_jax(bad):
    a, b, sa, sb = _scaled_operands()
    args = {"rank": (a[0], b, sa, sb), "batch": (a, b[:1], sa, sb),
            "scales": (a, b, sa, sb[:, :, :1]), "kept": (a, b, sa[:, :2], sb)}[bad]
    messages = []
    for J in (jax, minijax):
        with pytest.raises(ValueError) as e:  # JAX checks before it lowers
            J.nn.scaled_matmul(*args)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_scaled_dot_general_config_and_unscaled_path():
    for mode in ("nvfp4", "mxfp8"):
        got, want = (J.nn.get_scaled_dot_general_config(mode) for J in (minijax, jax))
        assert (got.mode, got.block_size, got.data_type, got.scale_type, got.infer_only) == (
            want.mode, want.block_size, want.data_type, want.scale_type, want.infer_only)
        assert (got.global_scale is None) == (want.global_scale is None)
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="Unsupported mode"):
            J.nn.get_scaled_dot_general_config("int8")
    a, b, _, _ = _scaled_operands()
    dims = (((2,), (2,)), ((0,), (0,)))
    for dtype in (np.float32, np.float16):
        got, want = (J.nn.scaled_dot_general(a.astype(dtype), b.astype(dtype), dims)
                     for J in (minijax, jax))
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-3, atol=2e-2)
    with pytest.raises(NotImplementedError, match="block-scaled"):
        minijax.nn.scaled_dot_general(a, b, dims,
                                      configs=[minijax.nn.get_scaled_dot_general_config("mxfp8")])
