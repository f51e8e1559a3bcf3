"""Reductions (minijax/numpy/reductions.py: prod, any/all, the nan* family, cumulative
reductions, quantiles; and lax_numpy.py's diff and trace) against jax.numpy.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import jax
import numpy as np
import pytest
from lax_numpy_test_util import (
    A3,
    WNAN,
    A,
    B,
    I,
    P,
    V,
    assert_same,
    check,
    check_grad,
    check_jit_and_vmap,
    check_raises,
    jnp,
)

import minijax

CASES = {
    "prod": lambda J: jnp(J).prod(A),
    "prod_axis": lambda J: jnp(J).prod(A3, axis=(0, 2)),
    "prod_keepdims": lambda J: jnp(J).prod(A3, axis=1, keepdims=True),
    "prod_int": lambda J: jnp(J).prod(I, axis=0),
    "prod_bool": lambda J: jnp(J).prod(B, axis=1),
    "prod_initial": lambda J: jnp(J).prod(A, axis=1, initial=2.0),
    "prod_where": lambda J: jnp(J).prod(A, axis=1, where=B),
    "prod_odd": lambda J: jnp(J).prod(V),
    "any": lambda J: jnp(J).any(B, axis=0),
    "all": lambda J: jnp(J).all(B, axis=1),
    "any_float": lambda J: jnp(J).any(I),
    "all_keepdims": lambda J: jnp(J).all(I, axis=0, keepdims=True),
    "count_nonzero": lambda J: jnp(J).count_nonzero(I),
    "count_nonzero_axis": lambda J: jnp(J).count_nonzero(I, axis=1),
    "ptp": lambda J: jnp(J).ptp(A, axis=0),
    "ptp_int": lambda J: jnp(J).ptp(I),
    "nansum": lambda J: jnp(J).nansum(WNAN, axis=1),
    "nanprod": lambda J: jnp(J).nanprod(WNAN, axis=1),
    "nanmax": lambda J: jnp(J).nanmax(WNAN, axis=1),
    "nanmin": lambda J: jnp(J).nanmin(WNAN, axis=1),
    "nanmin_all": lambda J: jnp(J).nanmin(WNAN),
    "nanmean": lambda J: jnp(J).nanmean(WNAN, axis=1),
    "nanmax_int": lambda J: jnp(J).nanmax(I, axis=0),
    "average": lambda J: jnp(J).average(A),
    "average_weights": lambda J: jnp(J).average(A, axis=1, weights=P[0]),
    "average_returned": lambda J: jnp(J).average(A, axis=0, weights=P, returned=True),
    "average_int": lambda J: jnp(J).average(I, axis=0),
    "cumsum": lambda J: jnp(J).cumsum(A, axis=1),
    "cumsum_flat": lambda J: jnp(J).cumsum(A3),
    "cumsum_bool": lambda J: jnp(J).cumsum(B, axis=0),
    "cumsum_dtype": lambda J: jnp(J).cumsum(I, axis=1, dtype=np.float32),
    "cumprod": lambda J: jnp(J).cumprod(A3, axis=2),
    "cumprod_int": lambda J: jnp(J).cumprod(I, axis=1),
    "cumsum_int8": lambda J: jnp(J).cumsum(I.astype(np.int8), axis=0),
    "cumprod_uint8": lambda J: jnp(J).cumprod(np.abs(I).astype(np.uint8), axis=0),
    "cumprod_flat": lambda J: jnp(J).cumprod(P),
    "nancumsum": lambda J: jnp(J).nancumsum(WNAN, axis=1),
    "nancumprod": lambda J: jnp(J).nancumprod(WNAN),
    "cumulative_sum": lambda J: jnp(J).cumulative_sum(A, axis=0, include_initial=True),
    "cumulative_prod": lambda J: jnp(J).cumulative_prod(V),
    "diff": lambda J: jnp(J).diff(A),
    "diff_n2": lambda J: jnp(J).diff(A3, n=2, axis=1),
    "diff_prepend": lambda J: jnp(J).diff(V, prepend=0.0, append=V[:2]),
    "diff_bool": lambda J: jnp(J).diff(B, axis=0),
    "diff_int": lambda J: jnp(J).diff(I),
    "median": lambda J: jnp(J).median(A),
    "median_axis": lambda J: jnp(J).median(A3, axis=1),
    "median_keepdims": lambda J: jnp(J).median(A3, axis=(0, 2), keepdims=True),
    "median_int": lambda J: jnp(J).median(I, axis=0),
    "quantile": lambda J: jnp(J).quantile(A, 0.3),
    "quantile_q": lambda J: jnp(J).quantile(A3, np.array([0.1, 0.5, 0.95], np.float32), axis=2),
    "quantile_qarr_keep": lambda J: jnp(J).quantile(A3, np.array([0.2, 0.7], np.float32),
                                                    axis=1, keepdims=True),
    "quantile_nan": lambda J: jnp(J).quantile(WNAN, 0.5, axis=1),
    "quantile_lower": lambda J: jnp(J).quantile(A, 0.3, axis=0, method="lower"),
    "quantile_higher": lambda J: jnp(J).quantile(A, 0.3, axis=0, method="higher"),
    "quantile_nearest": lambda J: jnp(J).quantile(A, 0.4, axis=1, method="nearest"),
    "quantile_midpoint": lambda J: jnp(J).quantile(A, 0.4, axis=1, method="midpoint"),
    "percentile": lambda J: jnp(J).percentile(A3, 40.0, axis=0),
    "percentile_int": lambda J: jnp(J).percentile(I, np.array([10, 90]), axis=1),
    "trace": lambda J: jnp(J).trace(A),
    "trace_offset": lambda J: jnp(J).trace(A3, offset=-1, axis1=1, axis2=2),
    "trace_int": lambda J: jnp(J).trace(I, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=2e-5, atol=2e-6)


GRADS = {
    "prod": (lambda J, x: jnp(J).prod(x, axis=1).sum(), A),
    "cumprod": (lambda J, x: jnp(J).cumprod(x, axis=1).sum(), A),
    "cumsum": (lambda J, x: (jnp(J).cumsum(x) ** 2).sum(), A),
    "median": (lambda J, x: jnp(J).median(x, axis=1).sum(), A),
    "quantile": (lambda J, x: jnp(J).quantile(x, 0.3), A3),
    "trace": (lambda J, x: jnp(J).trace(x * x), A),
    "nanmean": (lambda J, x: jnp(J).nanmean(x, axis=0).sum(), A),
    "average": (lambda J, x: jnp(J).average(x, axis=1, weights=P[0]).sum(), A),
    "diff": (lambda J, x: (jnp(J).diff(x, n=2) ** 2).sum(), A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    check_grad(*GRADS[name])


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "cumsum": lambda J, x: jnp(J).cumsum(x, axis=1),
 "cumprod": lambda J, x: jnp(J).cumprod(x, axis=0),
 "prod": lambda J, x: jnp(J).prod(x, axis=1),
 "median": lambda J, x: jnp(J).median(x, axis=0),
 "quantile": lambda J, x: jnp(J).quantile(x, np.array([0.2, 0.9], np.float32)),
 "trace": lambda J, x: jnp(J).trace(x),
 "diff": lambda J, x: jnp(J).diff(x),
 "nanmax": lambda J, x: jnp(J).nanmax(x, axis=0),
 "any": lambda J, x: jnp(J).any(x > 1, axis=0),
 "average": lambda J, x: jnp(J).average(x, axis=0, weights=np.arange(1., 4., dtype=np.float32)),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    check_jit_and_vmap(JIT_VMAP[name])


# ---------------------------------------------------------------------------------------------
# initial= and where= on sum/prod/max/min; empty axes
# ---------------------------------------------------------------------------------------------

E03 = np.zeros((0, 3), np.float32)
MASK = A > 0

INITIAL_WHERE = {
    f"{fn}_{name}": (lambda J, fn=fn, kw=kw: getattr(J.numpy, fn)(A, **kw))
    for fn in ("sum", "prod", "max", "min", "amax", "amin")
    for name, kw in (("initial", {"axis": 0, "initial": 0.5}),
                     ("initial_all", {"initial": 3.0}),
                     ("where_initial", {"axis": 1, "where": MASK, "initial": -2.0}),
                     ("where_initial_keepdims", {"axis": 0, "where": MASK, "initial": 9.0,
                                                 "keepdims": True}))
}
INITIAL_WHERE.update({
    "sum_where": lambda J: J.numpy.sum(A, axis=1, where=MASK),
    "prod_where": lambda J: J.numpy.prod(A, axis=0, where=MASK),
    "sum_int_where": lambda J: J.numpy.sum(I, where=B),
    "max_int_initial": lambda J: J.numpy.max(I, axis=1, initial=4),
    "min_bool_where": lambda J: J.numpy.min(B, axis=0, where=I != 0, initial=True),
    "max_where_broadcast": lambda J: J.numpy.max(A, axis=0, where=MASK[:1], initial=0.0),
    "sum_promote_integers": lambda J: J.numpy.sum(I.astype(np.int8), promote_integers=False),
    "sum_empty": lambda J: J.numpy.sum(E03, axis=0),
    "prod_empty": lambda J: J.numpy.prod(E03, axis=0),
    "sum_empty_all": lambda J: J.numpy.sum(E03),
    "max_empty_initial": lambda J: J.numpy.max(E03, axis=0, initial=-1.0),
    "min_empty_initial": lambda J: J.numpy.min(E03, initial=2.0),
    "max_empty_other_axis": lambda J: J.numpy.max(E03, axis=1),
    "any_empty": lambda J: J.numpy.any(E03, axis=0),
    "all_empty": lambda J: J.numpy.all(E03, axis=0),
})


@pytest.mark.parametrize("name", sorted(INITIAL_WHERE))
def test_initial_and_where(name):
    check(INITIAL_WHERE[name])


def test_initial_and_where_grad():
    def program(J):
        f = lambda x: (J.numpy.max(x, axis=1, where=MASK, initial=0.0).sum()
                       + J.numpy.sum(x, where=MASK, initial=1.0))
        return J.grad(f)(A)
    assert_same(program(minijax), program(jax))


REDUCTION_ERRORS = {
    "max_empty": lambda J: J.numpy.max(E03, axis=0),
    "min_empty": lambda J: J.numpy.min(E03),
    "amax_empty": lambda J: J.numpy.amax(np.zeros((2, 0), np.float32), axis=1),
    "argmax_empty": lambda J: J.numpy.argmax(E03, axis=0),
    "argmin_empty": lambda J: J.numpy.argmin(np.zeros((0,), np.float32)),
    "max_where_no_initial": lambda J: J.numpy.max(A, where=MASK),
    "sum_list": lambda J: J.numpy.sum([1, 2, 3]),
    "max_tuple": lambda J: J.numpy.max((1.0, 2.0)),
    "mean_list": lambda J: J.numpy.mean([1.0, 2.0]),
}


@pytest.mark.parametrize("name", sorted(REDUCTION_ERRORS))
def test_reduction_errors(name):
    check_raises(REDUCTION_ERRORS[name])


@pytest.mark.parametrize("shape,axis", [((8, 33), 1), ((4, 3, 5, 5), (0, 2, 3)), ((16, 100), 0)])
def test_var_grad_bit_identical(shape, axis):
    """grad of a jitted function of jnp.var equals JAX's to the last bit: `var` is one nested
    jit in both (JAX: jax/_src/numpy/reductions.py _var), so reverse mode sums the variance's
    own cotangent terms before the caller's, in the same grouping (chapters/18-cnn-batchnorm.md)."""
    rng = np.random.RandomState(0)
    x, w = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))

    def program(J):
        jnp = J.numpy

        def f(x, w):  # x reaches the loss both through var and directly, as in batch norm
            var = jnp.var(x, axis=axis, keepdims=True)
            return jnp.sum(w * J.lax.rsqrt(var + 1e-5) * x)
        return J.jit(J.value_and_grad(f))(x, w)
    got, want = program(minijax), program(jax)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w_))


C = (A + 1j * A3[0]).astype(np.complex64)
MASK_VAR = A > -0.5

# jnp.mean / var / std as JAX's (jax/_src/numpy/reductions.py _mean, _var, _std): where=,
# correction=, mean=, complex inputs (a real variance), float16/bfloat16 computed in float32,
# and NaN where n - ddof <= 0
MOMENT_CASES = {
    "var_ddof_eq_n": lambda J: jnp(J).var(V[:2], ddof=2),
    "std_ddof_gt_n": lambda J: jnp(J).std(V[:2], axis=0, ddof=3),
    "var_complex": lambda J: jnp(J).var(C, axis=1),
    "std_complex": lambda J: jnp(J).std(C),
    "var_bf16": lambda J: jnp(J).var(A.astype(jax.numpy.bfloat16), axis=1),
    "mean_bf16": lambda J: jnp(J).mean((A * 100).astype(jax.numpy.bfloat16), axis=0),
    "mean_where": lambda J: jnp(J).mean(A, axis=1, where=MASK_VAR),
    "var_where": lambda J: jnp(J).var(A, axis=1, where=MASK_VAR, ddof=1),
    "std_where_keepdims": lambda J: jnp(J).std(A, axis=0, where=MASK_VAR, keepdims=True),
    "var_correction": lambda J: jnp(J).var(A, correction=1.5),
    "var_mean": lambda J: jnp(J).var(A, axis=1, mean=jnp(J).mean(A, axis=1, keepdims=True)),
    "var_dtype_int": lambda J: jnp(J).var(I, axis=1, dtype=np.int32),
    "var_positional_out": lambda J: jnp(J).var(A, 0, None, None, 1),
}


@pytest.mark.parametrize("name", sorted(MOMENT_CASES))
def test_moments_against_jax(name):
    check(MOMENT_CASES[name], rtol=1e-5, atol=1e-6)


def test_moments_grad_vmap_where():
    def program(J):
        jnp = J.numpy
        f = lambda x, m: jnp.std(x, axis=0, where=m, ddof=1).sum() + jnp.var(x, where=m)
        return (J.grad(f)(A, MASK_VAR), J.vmap(f)(A, MASK_VAR),
                J.jit(J.grad(lambda x: jnp.var(x, axis=1).sum()))(C.real))
    assert_same(program(minijax), program(jax), rtol=1e-5, atol=1e-6)


MOMENT_ERRORS = {
    "std_int_dtype": lambda J: J.numpy.std(I, dtype=np.int32),
    "var_complex_real_dtype": lambda J: J.numpy.var(C, dtype=np.float32),
    "var_ddof_and_correction": lambda J: J.numpy.var(A, ddof=1, correction=1),
    "mean_out": lambda J: J.numpy.mean(A, out=np.zeros(())),
    "var_where_not_bool": lambda J: J.numpy.var(A, where=I),
}


@pytest.mark.parametrize("name", sorted(MOMENT_ERRORS))
def test_moment_errors(name):
    check_raises(MOMENT_ERRORS[name])


def test_moment_methods_take_jax_arguments():
    def program(J):
        x = J.numpy.asarray(A)
        return (x.var(0, None, None, 1, where=MASK_VAR), x.std(axis=1, correction=1),
                x.mean(1, where=MASK_VAR, keepdims=True))
    assert_same(program(minijax), program(jax))


CNAN = (WNAN + 1j).astype(np.complex64)
WNAN4 = np.array([[1., np.nan, 3., 4.], [np.nan, 2., np.nan, 7.]], np.float32)

NAN_MOMENT_CASES = {
    "nanvar_complex": lambda J: jnp(J).nanvar(CNAN, axis=1),
    "nanstd_complex": lambda J: jnp(J).nanstd(CNAN),
    "nanvar_bf16": lambda J: jnp(J).nanvar(WNAN4.astype(jax.numpy.bfloat16) * 3, axis=1),
    "nanmean_where": lambda J: jnp(J).nanmean(WNAN4, axis=1, where=WNAN4 > 1),
    "nanvar_where_ddof": lambda J: jnp(J).nanvar(WNAN4, axis=1, where=WNAN4 < 5, ddof=1),
    "nanstd_mean": lambda J: jnp(J).nanstd(WNAN4, axis=0, mean=jnp(J).nanmean(WNAN4, axis=0,
                                                                             keepdims=True)),
    "nansum_where": lambda J: jnp(J).nansum(WNAN4, axis=0, where=WNAN4 > 2, initial=1.0),
    "nanvar_float_ddof": lambda J: jnp(J).nanvar(WNAN4, axis=1, ddof=1.5),
}


@pytest.mark.parametrize("name", sorted(NAN_MOMENT_CASES))
def test_nan_moments_against_jax(name):
    check(NAN_MOMENT_CASES[name], rtol=1e-5, atol=1e-6)
