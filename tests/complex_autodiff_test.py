"""Derivatives through complex numbers, against JAX: `holomorphic=True` for grad, jacfwd,
jacrev and hessian; JAX's convention for a real function of complex inputs (the conjugated
gradient df/dx - i df/dy); the lax primitives real, imag, complex, conj and complex abs; and
the dtype errors of each transformation.

One program, two modules: each program runs with `J=jax` and `J=minijax`.
"""

import jax
import numpy as np
import pytest

import minijax
from minijax.test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): finite-difference gradient checks on complex inputs.
pytestmark = pytest.mark.slow

Z = np.array([1 + 2j, -0.5 + 0.25j, 3 - 1j], np.complex64)
X = np.array([0.5, -1.0, 2.0], np.float32)


def _same(got, want, rtol=1e-5, atol=1e-6):
    g, gt = minijax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert str(gt) == str(wt)
    for a, b in zip(g, w):
        assert np.asarray(a).dtype == np.asarray(b).dtype, (a, b)
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def check(program, *args, jit=True):
    _same(program(minijax)(*args), program(jax)(*args))
    if jit:
        _same(minijax.jit(program(minijax))(*args), program(jax)(*args))


HOLOMORPHIC = {
    "square": lambda J: lambda z: (z * z).sum(),
    "sin_exp": lambda J: lambda z: (J.numpy.sin(z) * J.numpy.exp(0.5 * z)).sum(),
    "poly_div": lambda J: lambda z: (z ** 3 / (z + 2.0)).sum(),
}


@pytest.mark.parametrize("name", HOLOMORPHIC)
def test_holomorphic_grad_and_jacobians(name):
    f = HOLOMORPHIC[name]
    check(lambda J: J.grad(f(J), holomorphic=True), Z)
    check(lambda J: J.value_and_grad(f(J), holomorphic=True), Z)
    check(lambda J: J.jacfwd(lambda z: f(J)(z) * z, holomorphic=True), Z)
    check(lambda J: J.jacrev(lambda z: f(J)(z) * z, holomorphic=True), Z)
    check(lambda J: J.hessian(f(J), holomorphic=True), Z, jit=False)


REAL_OF_COMPLEX = {
    "abs2": lambda J: lambda z: (J.numpy.abs(z) ** 2).sum(),
    "abs": lambda J: lambda z: J.numpy.abs(z).sum(),
    "z_conj_z": lambda J: lambda z: J.numpy.real(z * J.numpy.conj(z)).sum(),
    "real": lambda J: lambda z: J.numpy.real(z * (2 + 3j)).sum(),
    "imag": lambda J: lambda z: J.numpy.imag(J.numpy.sin(z)).sum(),
    "mixed": lambda J: lambda z: (J.numpy.real(z) * J.numpy.imag(z) ** 2).sum(),
    "via_complex": lambda J: lambda z: J.numpy.abs(J.lax.complex(J.numpy.real(z),
                                                                  -J.numpy.imag(z))).sum(),
}


@pytest.mark.parametrize("name", REAL_OF_COMPLEX)
def test_real_function_of_complex_inputs(name):
    f = REAL_OF_COMPLEX[name]
    check(lambda J: J.grad(f(J)), Z)
    check(lambda J: J.jacrev(lambda z: f(J)(z) * J.numpy.arange(2.0)), Z)
    check(lambda J: J.vmap(J.grad(f(J))), np.stack([Z, 2 * Z]), jit=False)
    check(lambda J: lambda z: J.jvp(f(J), (z,), (z * 1j,)), Z)


def test_complex_outputs_of_real_inputs():
    check(lambda J: J.jacfwd(lambda x: x * (1 + 2j) + J.numpy.exp(x * 1j)), X)
    check(lambda J: lambda x: J.vjp(lambda x: J.lax.complex(x, x * x), x)[1](Z), X)
    check(lambda J: J.grad(lambda x: J.numpy.abs(J.lax.complex(x, 2 * x)).sum()), X)
    check(lambda J: J.grad(lambda x: J.numpy.real(J.lax.conj(x) * (1 + 1j)).sum()), X)


def test_lax_complex_primitives_values_and_jaxprs():
    def program(J):
        lax = J.lax
        return lambda z, x: (lax.real(z), lax.imag(z), lax.conj(z), lax.conj(x),
                             lax.complex(x, x), lax.abs(z))
    check(program, Z, X)
    def round_trip(J):
        return lambda z: J.lax.conj(J.lax.complex(J.lax.real(z), J.lax.imag(z)))
    for J in (jax, minijax):
        jaxpr = str(J.make_jaxpr(round_trip(J))(Z))
        assert "conj[input_dtype=complex64]" in jaxpr and "complex" in jaxpr, jaxpr
    # finite differences too: the vjp identity <vjp(ct), t> = <ct, jvp(t)> with complex values
    check_grads(lambda z: minijax.numpy.abs(minijax.numpy.sin(z)), (Z,), order=2)
    check_grads(lambda z: minijax.numpy.exp(z) * minijax.lax.conj(z), (Z,), order=1)


@pytest.mark.parametrize("bad", [
    lambda J: J.grad(lambda z: (z * z).sum())(Z),                       # complex output
    lambda J: J.grad(lambda x: x.sum(), holomorphic=True)(X),            # real input
    lambda J: J.grad(lambda z: J.numpy.abs(z).sum(), holomorphic=True)(Z),  # real output
    lambda J: J.jacfwd(lambda z: z)(Z),                                  # complex input
    lambda J: J.jacfwd(lambda z: J.numpy.abs(z), holomorphic=True)(Z),   # real output
    lambda J: J.jacfwd(lambda x: x, holomorphic=True)(X),
    lambda J: J.jacrev(lambda x: x * 1j)(X),                             # complex output
    lambda J: J.jacrev(lambda z: z, holomorphic=True)(X),
    lambda J: J.lax.real(X),
    lambda J: J.lax.complex(X, X.astype(np.int32)),
])
def test_dtype_errors_like_jax(bad):
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            bad(J)


@pytest.mark.parametrize("name", ["abs", "imag", "z_conj_z", "via_complex"])
def test_grad_jaxprs_print_like_jax(name):
    f = REAL_OF_COMPLEX[name]
    got = str(minijax.make_jaxpr(minijax.grad(f(minijax)))(Z))
    assert got == str(jax.make_jaxpr(jax.grad(f(jax)))(Z))


def test_real_and_imag_cotangents_are_strongly_typed_as_jax():
    # JAX's transposes of real/imag pad with a NumPy zero: the complex cotangent of a weakly
    # typed Python complex is not weak (the autodiff cookbook's `grad(f)(3. + 4j)`)
    def run(J):
        def f(z):
            return J.numpy.real(z) ** 2 + J.numpy.imag(z) ** 2
        g = J.grad(f)(3. + 4j)
        ct = J.vjp(J.numpy.imag, 3. + 4j)[1](1.0)[0]
        return [(repr(v), v.weak_type) for v in (g, ct)], str(J.make_jaxpr(J.grad(f))(3. + 4j))
    assert run(minijax) == run(jax)
