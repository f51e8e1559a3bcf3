"""minijax.random against jax.random, bit for bit: keys, split, fold_in, bits and every sampler,
eagerly, under jit and under vmap over keys; plus the primitives the threefry hash and the
samplers are built from (xor, shifts, bitcast, nextafter, erf, erf_inv, sort, cumsum).

Programs are written once against a module alias (`fun(J, key)` with `J=jax` or `J=minijax`).
Mirrors tests/random_test.py (and tests/random_lax_test.py) in JAX.
"""

import jax
import jax.extend.random as jex_random
import numpy as np
import pytest

import minijax
from minijax import lax as mlax, prng
from minijax.public_test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): every sampler's bits against JAX's.
pytestmark = pytest.mark.slow

SEEDS = [0, 1, 42, -1, 2**31 + 5, 2**40 + 3]


def assert_bits_equal(got, want, msg=""):
    """Same dtype, shape and bits (floats compared as their integer bit patterns)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (msg, got.dtype, want.dtype)
    assert got.shape == want.shape, (msg, got.shape, want.shape)
    if got.dtype.kind == "f" or got.dtype == jax.numpy.bfloat16:
        got, want = got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}")
    np.testing.assert_array_equal(got, want, err_msg=msg)


def keys(J, seeds=(0, 7)):
    return [J.random.PRNGKey(s) for s in seeds]


# ---------------------------------------------------------------------------------------------
# Keys, split, fold_in, bits (eager: the threefry hash runs on numpy)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_seed_to_key(seed):
    assert_bits_equal(minijax.random.PRNGKey(seed), jax.random.PRNGKey(seed), "PRNGKey")
    assert_bits_equal(minijax.random.key_data(minijax.random.key(seed)),
                      jax.random.key_data(jax.random.key(seed)), "key")


def test_seed_dtypes():
    for seed in [np.int32(-7), np.uint32(4000000000), np.int64(2**40), np.int8(-3)]:
        assert_bits_equal(minijax.random.PRNGKey(seed), jax.random.PRNGKey(seed), repr(seed))


@pytest.mark.parametrize("num", [2, 3, (2, 3)], ids=str)
def test_split(num):
    for mk, jk in zip(keys(minijax, SEEDS), keys(jax, SEEDS)):
        assert_bits_equal(minijax.random.split(mk, num), jax.random.split(jk, num), str(num))


def test_fold_in():
    for mk, jk in zip(keys(minijax, SEEDS), keys(jax, SEEDS)):
        for data in [0, 7, np.int32(-5), np.uint32(2**32 - 1)]:
            assert_bits_equal(minijax.random.fold_in(mk, data), jax.random.fold_in(jk, data),
                              f"fold_in {data}")


@pytest.mark.parametrize("shape,dtype", [((), np.uint32), ((5,), np.uint32),
                                         ((2, 3), np.uint8), ((3,), np.uint16)], ids=str)
def test_bits(shape, dtype):
    for mk, jk in zip(keys(minijax), keys(jax)):
        assert_bits_equal(minijax.random.bits(mk, shape, dtype),
                          jax.random.bits(jk, shape, dtype))


@pytest.mark.parametrize("n", [1, 6, 7])
def test_threefry_2x32_matches_jax(n):
    # the hash of a whole count array (fold_in's layout), odd sizes padded as in JAX
    count = np.arange(100, 100 + n, dtype=np.uint32)
    key = np.array([0x13198A2E, 0x03707344], np.uint32)
    want = jex_random.threefry_2x32(key, count)
    assert_bits_equal(prng.threefry_2x32(key, count), want, "eager")
    assert_bits_equal(minijax.jit(prng.threefry_2x32)(key, count), want, "jit")


def test_typed_keys():
    k = minijax.random.key(3)
    assert k.shape == () and str(k.dtype) == str(jax.random.key(3).dtype) == "key<fry>"
    ks = minijax.random.split(k, 4)
    assert isinstance(ks, prng.PRNGKeyArray) and ks.shape == (4,) and len(ks) == 4
    k1, k2 = minijax.random.split(k)  # unpacking, as with JAX's key arrays
    jk1, jk2 = jax.random.split(jax.random.key(3))
    assert_bits_equal(minijax.random.key_data(k2), jax.random.key_data(jk2))
    assert_bits_equal(minijax.random.key_data(ks[1:3]),
                      jax.random.key_data(jax.random.split(jax.random.key(3), 4)[1:3]))
    wrapped = minijax.random.wrap_key_data(minijax.random.key_data(k1))
    assert_bits_equal(minijax.random.uniform(wrapped, (3,)), jax.random.uniform(jk1, (3,)))
    assert minijax.random.key_impl(k) == jax.random.key_impl(jax.random.key(3))
    # a raw key in gives raw keys out; a typed key gives typed keys
    assert not isinstance(minijax.random.split(minijax.random.PRNGKey(0)), prng.PRNGKeyArray)
    assert isinstance(minijax.random.fold_in(k, 1), prng.PRNGKeyArray)


# ---------------------------------------------------------------------------------------------
# Samplers, eagerly (each is a jitted function, as in JAX)
# ---------------------------------------------------------------------------------------------

BF16 = jax.numpy.bfloat16
_bounds = np.array([-1.0, 0.5, 2.0], np.float32)
_p = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
_logits = np.random.RandomState(0).randn(3, 5).astype(np.float32)
_x = np.arange(12, dtype=np.float32).reshape(4, 3)
_cov = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.5]], np.float32)

SAMPLERS = {
    "uniform": lambda J, k: J.random.uniform(k, (3, 4)),
    "uniform_bf16": lambda J, k: J.random.uniform(k, (5,), BF16),
    "uniform_bounds": lambda J, k: J.random.uniform(k, (2, 3), minval=_bounds, maxval=5.0),
    "normal": lambda J, k: J.random.normal(k, (3, 4)),
    "normal_bf16": lambda J, k: J.random.normal(k, (5,), BF16),
    "normal_f16": lambda J, k: J.random.normal(k, (5,), np.float16),
    "truncated_normal": lambda J, k: J.random.truncated_normal(k, -1.5, 2.0, (3, 4)),
    "truncated_normal_bounds": lambda J, k: J.random.truncated_normal(k, _bounds, 3.0),
    "bernoulli": lambda J, k: J.random.bernoulli(k, 0.3, (10,)),
    "bernoulli_p_array": lambda J, k: J.random.bernoulli(k, _p),
    "bernoulli_high": lambda J, k: J.random.bernoulli(k, np.float32(0.3), (6,), mode="high"),
    "randint": lambda J, k: J.random.randint(k, (10,), 0, 10),
    "randint_negative": lambda J, k: J.random.randint(k, (2, 3), -50, np.array([1, 2, 3])),
    "randint_int8": lambda J, k: J.random.randint(k, (10,), -5, 1000, np.int8),
    "randint_uint8_full": lambda J, k: J.random.randint(k, (10,), 0, 256, np.uint8),
    "permutation_int": lambda J, k: J.random.permutation(k, 10),
    "permutation_rows": lambda J, k: J.random.permutation(k, _x),
    "permutation_independent": lambda J, k: J.random.permutation(k, _x, 1, independent=True),
    "choice": lambda J, k: J.random.choice(k, 5, (3,)),
    "choice_rows": lambda J, k: J.random.choice(k, _x, (2,)),
    "choice_no_replace": lambda J, k: J.random.choice(k, 5, (3,), replace=False),
    "choice_p": lambda J, k: J.random.choice(k, 4, (6,), p=_p),
    "choice_p_no_replace": lambda J, k: J.random.choice(k, 4, (3,), replace=False, p=_p),
    "categorical": lambda J, k: J.random.categorical(k, _logits),
    "categorical_no_replace": lambda J, k: J.random.categorical(k, _logits, shape=(2, 3),
                                                                replace=False),
    "gumbel": lambda J, k: J.random.gumbel(k, (4,)),
    "gumbel_high": lambda J, k: J.random.gumbel(k, (4,), mode="high"),
    "exponential": lambda J, k: J.random.exponential(k, (3, 4)),
    "laplace": lambda J, k: J.random.laplace(k, (3, 4)),
    "logistic": lambda J, k: J.random.logistic(k, (3, 4)),
    "cauchy": lambda J, k: J.random.cauchy(k, (3, 4)),
    "rademacher": lambda J, k: J.random.rademacher(k, (10,)),
    "rademacher_f32": lambda J, k: J.random.rademacher(k, (6,), np.float32),
    "maxwell": lambda J, k: J.random.maxwell(k, (5,)),
    "double_sided_maxwell": lambda J, k: J.random.double_sided_maxwell(
        k, np.float32(1.0), np.array([1.0, 2.0], np.float32), (3,)),
    "weibull_min": lambda J, k: J.random.weibull_min(k, 2.0, 1.5, (6,)),
    "pareto": lambda J, k: J.random.pareto(k, np.array([1.0, 2.0, 3.0], np.float32)),
    "lognormal": lambda J, k: J.random.lognormal(k, 0.5, (6,)),
    "rayleigh": lambda J, k: J.random.rayleigh(k, 2.0, (6,)),
    "wald": lambda J, k: J.random.wald(k, np.array([0.5, 1.0, 3.0], np.float32)),
    "geometric": lambda J, k: J.random.geometric(k, 0.3, (8,)),
    "triangular": lambda J, k: J.random.triangular(k, -1.0, 0.5, 2.0, (6,)),
    "multivariate_normal": lambda J, k: J.random.multivariate_normal(
        k, np.zeros(3, np.float32), _cov, (4,)),
    "multivariate_normal_eigh": lambda J, k: J.random.multivariate_normal(
        k, np.ones(3, np.float32), _cov, method="eigh"),
    "orthogonal": lambda J, k: J.random.orthogonal(k, 3, (2,)),
    "orthogonal_wide": lambda J, k: J.random.orthogonal(k, 2, m=4),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_eager(name):
    fun = SAMPLERS[name]
    for mk, jk in zip(keys(minijax), keys(jax)):
        assert_bits_equal(fun(minijax, mk), fun(jax, jk), name)


def test_new_samplers_under_jit_and_vmap_keep_their_bits():
    names = ["exponential", "wald"]
    mks = minijax.random.split(minijax.random.key(3), 2)
    jks = jax.random.split(jax.random.key(3), 2)
    for name in names:
        fun = SAMPLERS[name]
        assert_bits_equal(minijax.jit(lambda k, f=fun: f(minijax, k))(mks[0]),
                          jax.jit(lambda k, f=fun: f(jax, k))(jks[0]), f"jit {name}")
        assert_bits_equal(minijax.vmap(lambda k, f=fun: f(minijax, k))(mks),
                          jax.vmap(lambda k, f=fun: f(jax, k))(jks), f"vmap {name}")


def test_samplers_typed_keys():
    for name in ["uniform", "normal", "randint", "permutation_int"]:
        assert_bits_equal(SAMPLERS[name](minijax, minijax.random.key(5)),
                          SAMPLERS[name](jax, jax.random.key(5)), name)


# Gamma and what is built on it, Poisson, binomial, multinomial: rejection loops, one key per
# element. Each call compiles a while loop (seconds on a loaded machine), so a few configs each;
# `f` draws through `chisquare` and `ball` through `generalized_normal`, which are covered so.
_alpha = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
_lam = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 40.0, 1e3], np.float32)
GAMMA_SAMPLERS = {
    "gamma": lambda J, k: J.random.gamma(k, _alpha, (3, 4)),
    "loggamma_f16": lambda J, k: J.random.loggamma(k, _alpha, (2, 4), np.float16),
    "beta": lambda J, k: J.random.beta(k, _alpha, 2.0),
    "dirichlet": lambda J, k: J.random.dirichlet(k, _alpha, (2,)),
    "f": lambda J, k: J.random.f(k, _alpha, 3.0),
    "t": lambda J, k: J.random.t(k, _alpha, (2, 4)),
    "ball": lambda J, k: J.random.ball(k, 3, 1.5, (2,)),
    "poisson": lambda J, k: J.random.poisson(k, _lam),
    "binomial": lambda J, k: J.random.binomial(k, np.array([5.0, 20.0, 100.0, 1e3, -1.0]),
                                               np.array([0.3, 0.7, 0.5, 0.1, 0.5])),
    "multinomial": lambda J, k: J.random.multinomial(k, 50.0, np.array([0.2, 0.3, 0.5])),
}


@pytest.mark.parametrize("name", sorted(GAMMA_SAMPLERS))
def test_rejection_sampler_eager(name):
    fun = GAMMA_SAMPLERS[name]
    for mk, jk in zip(keys(minijax, (0, 7, 123)), keys(jax, (0, 7, 123))):
        assert_bits_equal(fun(minijax, mk), fun(jax, jk), name)


def test_gamma_vmap_over_keys_and_its_primitive():
    # the batching rule of random_gamma: a key and an alpha per example
    f = lambda J: lambda k, a: J.random.gamma(k, a, (2,))
    a = np.array([0.5, 4.0], np.float32)
    assert_bits_equal(minijax.vmap(f(minijax))(_key_batch(minijax, True)[:2], a),
                      jax.vmap(f(jax))(_key_batch(jax, True)[:2], a))
    jaxpr = str(minijax.make_jaxpr(lambda k: minijax.random.gamma(k, 2.0))(
        minijax.random.key(0)))
    assert "random_gamma" in jaxpr and minijax.random.random_gamma_p.name == "random_gamma"


# ---------------------------------------------------------------------------------------------
# Under jit and vmap
# ---------------------------------------------------------------------------------------------

def _program(J, key):
    k1, k2, k3, k4 = J.random.split(key, 4)
    return (J.random.uniform(k1, (3, 4)), J.random.normal(J.random.fold_in(k2, 3), (5,)),
            J.random.truncated_normal(k3, -1.0, 1.0, (4,)), J.random.randint(k4, (6,), 0, 9),
            J.random.permutation(k1, 8), J.random.bernoulli(k2, 0.5, (5,)),
            J.random.categorical(k3, _logits, 0, (4, 5)), J.random.choice(k4, 4, (3,), p=_p))


def test_samplers_jit():
    # one program, one compile per module; typed keys (raw ones are covered eagerly)
    mfun = minijax.jit(lambda k: _program(minijax, k))
    jfun = jax.jit(lambda k: _program(jax, k))
    for seed in [0, 3]:
        for g, w in zip(mfun(minijax.random.key(seed)), jfun(jax.random.key(seed))):
            assert_bits_equal(g, w, f"seed {seed}")


def _key_batch(J, typed: bool):
    return J.random.split(J.random.key(11) if typed else J.random.PRNGKey(11), 4)


@pytest.mark.parametrize("typed", [False, True])
def test_vmap_split_over_keys(typed):
    data = lambda J, ks: ks if not typed else J.random.key_data(ks)
    got = minijax.vmap(lambda k: minijax.random.split(k, 3))(_key_batch(minijax, typed))
    want = jax.vmap(lambda k: jax.random.split(k, 3))(_key_batch(jax, typed))
    assert_bits_equal(data(minijax, got), data(jax, want))


def test_vmap_samplers_over_keys():
    f = lambda J: lambda k: (J.random.uniform(k, (3,)), J.random.normal(k, (2,)),
                             J.random.randint(k, (2,), 0, 5))
    got = minijax.vmap(f(minijax))(_key_batch(minijax, True))
    want = jax.vmap(f(jax))(_key_batch(jax, True))
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


def test_vmap_fold_in_over_data_and_jit_of_vmap():
    data = np.arange(5, dtype=np.uint32)
    got = minijax.jit(minijax.vmap(minijax.random.fold_in, in_axes=(None, 0)))(
        minijax.random.PRNGKey(2), data)
    want = jax.jit(jax.vmap(jax.random.fold_in, in_axes=(None, 0)))(jax.random.PRNGKey(2), data)
    assert_bits_equal(got, want)


def test_sampler_is_a_jitted_function():
    # as in JAX, the sampler shows up as a jit equation named after its private function
    text = str(minijax.make_jaxpr(lambda k: minijax.random.uniform(k, (2,)))(
        minijax.random.PRNGKey(0)))
    assert "name=_uniform" in text


# ---------------------------------------------------------------------------------------------
# Errors: the same calls raise in both
# ---------------------------------------------------------------------------------------------

BAD_CALLS = {
    "uniform_int_dtype": (ValueError, lambda J: J.random.uniform(J.random.PRNGKey(0), (2,),
                                                                  np.int32)),
    "randint_float_dtype": (TypeError, lambda J: J.random.randint(J.random.PRNGKey(0), (2,),
                                                                  0, 3, np.float32)),
    "choice_too_many": (ValueError, lambda J: J.random.choice(J.random.PRNGKey(0), 3, (5,),
                                                              replace=False)),
    "split_key_array": (ValueError, lambda J: J.random.split(J.random.split(J.random.key(0)))),
    "key_array_seed": (TypeError, lambda J: J.random.key(np.arange(2))),
    "bits_signed": (ValueError, lambda J: J.random.bits(J.random.PRNGKey(0), (2,), np.int32)),
    "mvn_scalar_mean": (ValueError, lambda J: J.random.multivariate_normal(
        J.random.PRNGKey(0), np.float32(0), np.eye(2, dtype=np.float32))),
    "mvn_cov_mismatch": (ValueError, lambda J: J.random.multivariate_normal(
        J.random.PRNGKey(0), np.zeros(3, np.float32), np.eye(2, dtype=np.float32))),
    "mvn_bad_method": (ValueError, lambda J: J.random.multivariate_normal(
        J.random.PRNGKey(0), np.zeros(2, np.float32), np.eye(2, dtype=np.float32),
        method="lu")),
    "pareto_shape_mismatch": (ValueError, lambda J: J.random.pareto(
        J.random.PRNGKey(0), np.ones(3, np.float32), (2,))),
    "exponential_int_dtype": (ValueError, lambda J: J.random.exponential(
        J.random.PRNGKey(0), (2,), np.int32)),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_errors_match_jax(name):
    exc, fun = BAD_CALLS[name]
    with pytest.raises(exc):
        fun(jax)
    with pytest.raises(exc):
        fun(minijax)


# Python ints outside the 32-bit range a key, a fold_in datum or a randint bound is converted to
OVERFLOWS = {
    "fold_in_2**32": lambda J: J.random.fold_in(J.random.PRNGKey(0), 2**32),
    "fold_in_negative": lambda J: J.random.fold_in(J.random.PRNGKey(0), -1),
    "fold_in_typed_2**40": lambda J: J.random.fold_in(J.random.key(0), 2**40),
    "PRNGKey_2**64": lambda J: J.random.PRNGKey(2**64),
    "key_-2**64": lambda J: J.random.key(-2**64),
    "randint_maxval_2**31": lambda J: J.random.randint(J.random.PRNGKey(0), (3,), 0, 2**31),
    "randint_minval_-2**40": lambda J: J.random.randint(J.random.PRNGKey(0), (3,), -2**40, 5),
    "uniform_minval_2**200": lambda J: J.random.uniform(J.random.PRNGKey(0), (2,),
                                                        minval=2**200),
}


@pytest.mark.parametrize("name", sorted(OVERFLOWS))
def test_python_ints_out_of_range_raise_jaxs_overflow_error(name):
    with pytest.raises(Exception) as want:
        OVERFLOWS[name](jax)
    assert want.type is OverflowError
    with pytest.raises(OverflowError) as got:
        OVERFLOWS[name](minijax)
    if name.startswith("fold_in"):  # (JAX's jitted samplers word it for their jit arguments)
        assert str(got.value) == str(want.value)


def test_python_ints_at_the_edge_of_the_range_match_jax():
    for data in (0, 2**32 - 1):
        assert_bits_equal(minijax.random.fold_in(minijax.random.PRNGKey(3), data),
                          jax.random.fold_in(jax.random.PRNGKey(3), data))
    for lo, hi in ((-2**31, 2**31 - 1), (0, 1)):
        assert_bits_equal(minijax.random.randint(minijax.random.PRNGKey(1), (4,), lo, hi),
                          jax.random.randint(jax.random.PRNGKey(1), (4,), lo, hi))


# ---------------------------------------------------------------------------------------------
# The primitives under the hash and the samplers
# ---------------------------------------------------------------------------------------------

_AMOUNTS = np.array([0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 100, -1, -8, 3], np.int64)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint8, np.int8, np.uint16])
@pytest.mark.parametrize("name", ["shift_left", "shift_right_logical",
                                  "shift_right_arithmetic", "bitwise_xor"])
def test_bit_ops_match_xla(name, dtype):
    # shift amounts at and past the bit width, and negative ones, follow XLA's rules
    x = np.array([1, -1, 5, 0x7F, -128, 0x55, 3, -7, 9, 2, 1, -1, 64, 100]).astype(dtype)
    y = _AMOUNTS.astype(dtype)
    want = getattr(jax.lax, name)(x, y)
    assert_bits_equal(getattr(mlax, name)(x, y), want, "eager")
    assert_bits_equal(minijax.jit(getattr(mlax, name))(x, y), want, "jit")


def test_bitcast_convert_type():
    x = np.array([1.0, -2.5, 0.0, -0.0, np.inf, np.nan], np.float32)
    for new in [np.uint32, np.int32]:
        want = jax.lax.bitcast_convert_type(x, new)
        assert_bits_equal(mlax.bitcast_convert_type(x, new), want)
        assert_bits_equal(minijax.jit(lambda v, new=new: mlax.bitcast_convert_type(v, new))(x),
                          want)
    u = np.array([0x3F80, 0xBF00, 0x7F80], np.uint16)
    assert_bits_equal(mlax.bitcast_convert_type(u, BF16), jax.lax.bitcast_convert_type(u, BF16))
    with pytest.raises(TypeError, match="bit width"):
        mlax.bitcast_convert_type(x, np.uint8)


def test_nextafter():
    x = np.array([1.0, -1.0, 0.0, -0.0, 3e38], np.float32)
    for to in [np.inf, -np.inf, 0.0]:
        y = np.full_like(x, to)
        want = jax.lax.nextafter(x, y)
        assert_bits_equal(mlax.nextafter(x, y), want)
        assert_bits_equal(minijax.jit(mlax.nextafter)(x, y), want)


def test_erf_and_erf_inv():
    rng = np.random.RandomState(0)
    u = np.concatenate([rng.uniform(-1, 1, 200), [1.0, -1.0, 0.0, 0.9999999]]).astype(np.float32)
    x = (rng.randn(200) * 2).astype(np.float32)
    # under jit both lower to the CHLO ops JAX emits, so XLA gives the same bits
    assert_bits_equal(minijax.jit(mlax.erf_inv)(u), jax.lax.erf_inv(u))
    assert_bits_equal(minijax.jit(mlax.erf)(x), jax.lax.erf(x))
    # eagerly, numpy evaluates the same approximation: equal to a few ulp
    np.testing.assert_allclose(mlax.erf_inv(u), jax.lax.erf_inv(u), rtol=2e-6)
    np.testing.assert_allclose(mlax.erf(x), jax.lax.erf(x), rtol=2e-6, atol=1e-7)
    check_grads(mlax.erf, (x[:5],), order=2)
    check_grads(mlax.erf_inv, (u[:5] * 0.9,), order=1)


def test_sort():
    keys_ = np.array([3, 1, 2, 1, 0, 3], np.uint32)
    vals = np.arange(6, dtype=np.float32)
    floats = np.array([np.nan, 1.0, -0.0, 0.0, -np.inf, 2.0], np.float32)
    for args in [(keys_, vals), (floats, vals)]:
        want = jax.lax.sort_key_val(*args)
        for got in [mlax.sort_key_val(*args), minijax.jit(mlax.sort_key_val)(*args)]:
            for g, w in zip(got, want):
                assert_bits_equal(g, w)
    two = np.array([[1, 0, 1, 0], [2, 3, 1, 0]], np.int32)
    want = jax.lax.sort((two[0], two[1], vals[:4]), num_keys=2)
    for got in [mlax.sort((two[0], two[1], vals[:4]), num_keys=2),
                minijax.jit(lambda a, b, c: mlax.sort((a, b, c), num_keys=2))(two[0], two[1],
                                                                              vals[:4])]:
        for g, w in zip(got, want):
            assert_bits_equal(g, w)
    m = np.random.RandomState(1).randn(3, 5).astype(np.float32)
    assert_bits_equal(minijax.vmap(lambda r: mlax.sort(r))(m), jax.vmap(jax.lax.sort)(m))
    check_grads(lambda v: mlax.sort(v), (m,), order=2)


def test_cumsum():
    x = np.random.RandomState(2).rand(3, 37).astype(np.float32)
    for axis, reverse in [(1, False), (1, True), (0, False)]:
        want = jax.lax.cumsum(x, axis, reverse)
        # under jit: XLA's reduce-window, the same as JAX's, so the same rounding
        f = minijax.jit(lambda v, a=axis, r=reverse: mlax.cumsum(v, a, r))
        assert_bits_equal(f(x), want)
        np.testing.assert_allclose(mlax.cumsum(x, axis, reverse), want, rtol=1e-5)
    assert_bits_equal(minijax.vmap(lambda r: mlax.cumsum(r, 0), in_axes=1)(x),
                      jax.vmap(lambda r: jax.lax.cumsum(r, 0), in_axes=1)(x))
    check_grads(lambda v: mlax.cumsum(v, 1, True), (x[:, :4],), order=1)


@pytest.mark.parametrize("name", ["gamma", "loggamma"])
def test_grad_of_gamma_samplers_matches_jax(name):
    # implicit reparameterization through lax.random_gamma_grad, as JAX differentiates (the
    # samplers built on these inherit it)
    a = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
    f = lambda J: lambda v: getattr(J.random, name)(J.random.key(1), v).sum()
    np.testing.assert_allclose(minijax.grad(f(minijax))(a), jax.grad(f(jax))(a), rtol=1e-4)


def test_typed_keys_join_and_refuse_conversions_as_jax():
    # concatenate/stack of typed keys (eagerly and under jit) join their words; keys refuse
    # NumPy, other dtypes, astype, and joining with other arrays, in JAX's exception families
    def joined(J):
        k0, k1 = J.random.split(J.random.key(0)), J.random.split(J.random.key(1))
        data = J.random.key_data
        return [np.asarray(data(x)).tolist() for x in (
            J.numpy.concatenate([k0, k1]), J.numpy.stack([k0[0], k1[0]]),
            J.numpy.stack([k0, k1], axis=1), J.jit(lambda k: J.numpy.concatenate([k, k]))(k0))]
    assert joined(minijax) == joined(jax)
    refused = {
        "numpy": lambda J: np.asarray(J.random.key(0)),
        "dtype": lambda J: J.numpy.asarray(J.random.key(0), dtype=np.float32),
        "astype": lambda J: J.random.key(0).astype(np.uint32),
        "mixed": lambda J: J.numpy.concatenate([J.random.split(J.random.key(0)),
                                                np.ones(2, np.uint32)]),
        "zero_d": lambda J: J.numpy.concatenate([J.random.key(0), J.random.key(1)]),
    }
    for name, program in refused.items():
        with pytest.raises(Exception) as want:
            program(jax)
        with pytest.raises(type(want.value)) as got:
            program(minijax)
        if name != "astype":  # (JAX's text: "Cannot call abstract method astype")
            assert str(got.value) == str(want.value), name
    assert str(minijax.numpy.asarray(minijax.random.key(0)).dtype) == "key<fry>"


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_rbg_keys_as_jax(impl):
    # keys over XLA's RngBitGenerator (u32[4]): seed, split, fold_in, the bits and the samplers
    # on them, eagerly, under jit and vmap, and raw keys under jax_default_prng_impl
    def program(J):
        r = J.random
        k = r.key(42, impl=impl)
        data = r.key_data
        out = [data(k), data(r.split(k, (2, 3))), data(r.fold_in(k, 7)), r.PRNGKey(3, impl=impl),
               data(r.wrap_key_data(np.arange(8, dtype=np.uint32).reshape(2, 4), impl=impl)),
               r.bits(k, (5,)), r.bits(k, (3,), np.uint8), r.bits(k, (2,), np.uint16),
               r.uniform(k, (2, 3)), r.normal(k, (4,), np.float16), r.randint(k, (3,), 0, 10),
               r.permutation(k, 6), r.bernoulli(k, 0.3, (4,)), r.categorical(k, np.zeros(5)),
               J.jit(lambda k: r.normal(r.split(k)[1], (3,)))(k),
               J.vmap(lambda k: r.uniform(k, (2,)))(r.split(k, 3)),
               J.jit(J.vmap(lambda k, i: data(r.fold_in(k, i))))(r.split(k, 2), np.arange(2))]
        if impl == "rbg":  # (minijax's gamma refuses unsafe_rbg keys, below)
            out += [r.gamma(k, np.array([0.5, 2.0, 9.0])), r.beta(k, 2.0, 3.0, (2,))]
        with J.default_prng_impl(impl):
            raw = r.PRNGKey(5)
            out += [raw, r.uniform(raw, (3,)), data(r.split(raw)), r.key_impl(r.key(1))]
        return out, [r.key_impl(k), str(k.dtype), repr(k)]
    (got, got_meta), (want, want_meta) = program(minijax), program(jax)
    assert got_meta == want_meta
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, str):
            assert g == w, i
        else:
            assert_bits_equal(g, w, str(i))
    # JAX's errors: a key of the other impl's shape, an impl JAX does not know
    for bad in (lambda J: J.random.uniform(J.random.PRNGKey(0, impl=impl), (2,)),
                lambda J: J.random.wrap_key_data(np.zeros(2, np.uint32), impl=impl),
                lambda J: J.random.key(0, impl="nope")):
        with pytest.raises(Exception) as want_err:
            bad(jax)
        with pytest.raises(type(want_err.value)):
            bad(minijax)
    if impl == "unsafe_rbg":  # a documented difference: JAX samples, minijax refuses
        with pytest.raises(NotImplementedError, match="unsafe_rbg"):
            minijax.random.gamma(minijax.random.key(0, impl=impl), 2.0)
