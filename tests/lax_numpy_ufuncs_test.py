"""Elementwise jnp functions (minijax/numpy/ufuncs.py, and lax_numpy.py's isclose and
nan_to_num) against jax.numpy.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import numpy as np
import pytest
from lax_numpy_test_util import (
    G1,
    HALF,
    SPECIAL,
    A,
    B,
    I,
    P,
    U,
    check,
    check_grad,
    check_jit_and_vmap,
    jnp,
)

CASES = {
    "tan": lambda J: jnp(J).tan(U),
    "arcsin": lambda J: jnp(J).arcsin(U),
    "arccos": lambda J: jnp(J).arccos(np.concatenate([U.ravel(), [-1.0, 1.0]])),
    "arctan": lambda J: jnp(J).arctan(A * 4),
    "arctan2": lambda J: jnp(J).arctan2(A, P),
    "arctan2_int": lambda J: jnp(J).arctan2(I, 2),
    "expm1": lambda J: jnp(J).expm1(A * 1e-3),
    "sinh": lambda J: jnp(J).sinh(A),
    "sinh_small": lambda J: jnp(J).sinh(A * 1e-4),
    "cosh": lambda J: jnp(J).cosh(A),
    "arcsinh": lambda J: jnp(J).arcsinh(A * 3),
    "arccosh": lambda J: jnp(J).arccosh(G1),
    "arctanh": lambda J: jnp(J).arctanh(U),
    "exp2": lambda J: jnp(J).exp2(A),
    "exp2_int": lambda J: jnp(J).exp2(I),
    "log2": lambda J: jnp(J).log2(P),
    "log10": lambda J: jnp(J).log10(P),
    "deg2rad": lambda J: jnp(J).deg2rad(A * 90),
    "rad2deg": lambda J: jnp(J).rad2deg(A),
    "cbrt": lambda J: jnp(J).cbrt(A * 5),
    "hypot": lambda J: jnp(J).hypot(A, P),
    "hypot_weak": lambda J: jnp(J).hypot(A, 2.0),
    "logaddexp": lambda J: jnp(J).logaddexp(A, P),
    "logaddexp_inf": lambda J: jnp(J).logaddexp(SPECIAL, SPECIAL),
    "logaddexp2": lambda J: jnp(J).logaddexp2(A, P),
    "heaviside": lambda J: jnp(J).heaviside(SPECIAL, 0.5),
    "fmax": lambda J: jnp(J).fmax(SPECIAL, SPECIAL[::-1]),
    "fmin": lambda J: jnp(J).fmin(SPECIAL, SPECIAL[::-1]),
    "fmax_int": lambda J: jnp(J).fmax(I, 1),
    "positive": lambda J: jnp(J).positive(jnp(J).asarray(I)),
    "float_power": lambda J: jnp(J).float_power(P, 2),
    "float_power_int": lambda J: jnp(J).float_power(np.abs(I), 2),
    "signbit": lambda J: jnp(J).signbit(SPECIAL),
    "signbit_int": lambda J: jnp(J).signbit(I),
    "copysign": lambda J: jnp(J).copysign(A, SPECIAL[:4]),
    "real": lambda J: jnp(J).real(A),
    "imag": lambda J: jnp(J).imag(A),
    "conj": lambda J: jnp(J).conj(I),
    "isinf": lambda J: jnp(J).isinf(SPECIAL),
    "isinf_int": lambda J: jnp(J).isinf(I),
    "isposinf": lambda J: jnp(J).isposinf(SPECIAL),
    "isneginf": lambda J: jnp(J).isneginf(SPECIAL),
    "nan_to_num": lambda J: jnp(J).nan_to_num(SPECIAL),
    "nan_to_num_args": lambda J: jnp(J).nan_to_num(SPECIAL, nan=7.0, posinf=1.0, neginf=-1.0),
    "nan_to_num_int": lambda J: jnp(J).nan_to_num(I),
    "isclose": lambda J: jnp(J).isclose(SPECIAL, SPECIAL[::-1] + 1e-7),
    "isclose_self": lambda J: jnp(J).isclose(SPECIAL, SPECIAL),
    "isclose_nan": lambda J: jnp(J).isclose(SPECIAL, SPECIAL, equal_nan=True),
    "isclose_int": lambda J: jnp(J).isclose(I, 3),
    "allclose": lambda J: jnp(J).allclose(A, A + 1e-7),
    "allclose_false": lambda J: jnp(J).allclose(A, A + 1e-2),
    "round": lambda J: jnp(J).round(HALF),
    "round_decimals": lambda J: jnp(J).round(A * 100, 1),
    "round_int": lambda J: jnp(J).round(jnp(J).asarray(I)),
    "around": lambda J: jnp(J).around(A, 2),
    "trunc": lambda J: jnp(J).trunc(HALF),
    "trunc_int": lambda J: jnp(J).trunc(jnp(J).asarray(I)),
    "logical_xor": lambda J: jnp(J).logical_xor(B, I < 3),
    "logical_xor_num": lambda J: jnp(J).logical_xor(I, A),
    "bitwise_xor": lambda J: jnp(J).bitwise_xor(I, 5),
    "bitwise_not": lambda J: jnp(J).bitwise_not(I),
    "pow": lambda J: jnp(J).pow(P, 1.5),
    "fabs": lambda J: jnp(J).fabs(I),
    "fmod": lambda J: jnp(J).fmod(I, np.array([2, -3, 4, 5], np.int32)),
    "fmod_float": lambda J: jnp(J).fmod(A * 5, 1.5),
    "divmod": lambda J: jnp(J).divmod(I, 3),
    "left_shift": lambda J: jnp(J).left_shift(I, 2),
    "right_shift": lambda J: jnp(J).right_shift(I, 1),
    "right_shift_uint": lambda J: jnp(J).right_shift(np.abs(I).astype(np.uint32), 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=2e-5, atol=2e-6)


def test_weak_types():
    # a Python scalar stays weakly typed through dtype-preserving functions
    for name in ("positive", "trunc", "round", "sinh", "isinf", "cbrt", "signbit", "exp2",
                 "arcsin", "arctan", "expm1"):
        check(lambda J, name=name: getattr(jnp(J), name)(2.5))
    check(lambda J: jnp(J).cumsum(jnp(J).asarray(2.0) * A))
    check(lambda J: jnp(J).hypot(3.0, 4.0))
    check(lambda J: jnp(J).copysign(3.0, -1.0))
    check(lambda J: jnp(J).logaddexp(1.0, 2.0))


GRADS = {
    "logaddexp": (lambda J, x: jnp(J).logaddexp(x, A.T[:3]).sum(), A[:, :3]),
    "hypot": (lambda J, x: jnp(J).hypot(x, P).sum(), A),
    "sinh_cosh_tan": (lambda J, x: (jnp(J).sinh(x) + jnp(J).cosh(x) + jnp(J).tan(x)).sum(), U),
    "arc": (lambda J, x: (jnp(J).arcsinh(x) + jnp(J).arctanh(x) + jnp(J).arcsin(x) +
                          jnp(J).arccos(x) + jnp(J).arctan(x)).sum(), U),
    "arctan2": (lambda J, x: jnp(J).arctan2(x, P).sum(), A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    check_grad(*GRADS[name])


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "logaddexp": lambda J, x: jnp(J).logaddexp(x, 1.0),
 "isclose": lambda J, x: jnp(J).isclose(x, 0.5),
 "signbit": lambda J, x: jnp(J).signbit(x),
 "round": lambda J, x: jnp(J).round(x, 1),
 "nan_to_num": lambda J, x: jnp(J).nan_to_num(x / 0.),
 "arcsin": lambda J, x: jnp(J).arcsin(x / 5),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    check_jit_and_vmap(JIT_VMAP[name])
