"""`lax.fft` and `jnp.fft` against JAX: values, shapes and dtypes of every function, under jit,
and gradients and vmap through the `fft` primitive's linear rules (minijax/lax/fft.py)."""

import jax
import numpy as np
import pytest
from lax_numpy_test_util import check

import minijax
import minijax.test_util

RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 6, 5)).astype(np.float32)
XC = (X + 1j * RNG.standard_normal((4, 6, 5))).astype(np.complex64)
X5 = RNG.standard_normal((2, 3, 2, 3, 4)).astype(np.complex64)

CASES = {
    "fft": ("fft", XC, {}), "fft_n_axis": ("fft", X, dict(n=8, axis=1)),
    "ifft_crop_ortho": ("ifft", XC, dict(n=3, norm="ortho")),
    "rfft_axis0_forward": ("rfft", X, dict(axis=0, norm="forward")),
    "irfft": ("irfft", XC, {}), "irfft_odd": ("irfft", XC, dict(n=7)),
    "hfft": ("hfft", XC, {}), "hfft_ortho": ("hfft", XC, dict(norm="ortho")),
    "ihfft": ("ihfft", X, {}), "ihfft_forward": ("ihfft", X, dict(norm="forward")),
    "fftn": ("fftn", XC, {}), "ifftn_s": ("ifftn", XC, dict(s=(3, 4))),
    "rfftn_axes": ("rfftn", X, dict(axes=(0, 2))), "irfftn_s": ("irfftn", XC, dict(s=(4, 6, 8))),
    "fftn_5d": ("fftn", X5, {}), "irfftn_5d": ("irfftn", X5, {}),
    "fft2": ("fft2", XC, {}), "ifft2_axes": ("ifft2", XC, dict(axes=(0, 1))),
    "rfft2": ("rfft2", X, {}), "irfft2": ("irfft2", XC, {}),
    "fftshift": ("fftshift", X, {}), "ifftshift_axis": ("ifftshift", X, dict(axes=1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jnp_fft_matches_jax(name):
    fn, x, kw = CASES[name]
    check(lambda J: getattr(J.numpy.fft, fn)(x, **kw), rtol=1e-4, atol=1e-4)


def test_fftfreq_matches_jax():
    check(lambda J: (J.numpy.fft.fftfreq(5, 0.1), J.numpy.fft.fftfreq(6),
                     J.numpy.fft.rfftfreq(7, 2.0), J.numpy.fft.rfftfreq(8)))


@pytest.mark.parametrize("fft_type", ["FFT", "IFFT", "RFFT", "IRFFT"])
def test_lax_fft_grad_vmap_and_jit(fft_type):
    x = (X if fft_type == "RFFT" else
         np.fft.rfftn(X, axes=(1, 2)).astype(np.complex64) if fft_type == "IRFFT" else XC)
    lengths = (6, 5)
    out_shape = jax.lax.fft(x, fft_type, lengths).shape
    w = RNG.standard_normal(out_shape).astype(np.float32)

    def loss(J):
        return lambda v: (J.numpy.real(J.lax.fft(v, fft_type, lengths)) * w).sum()

    np.testing.assert_allclose(minijax.grad(loss(minijax))(x),
                               jax.jit(jax.grad(loss(jax)))(x),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(minijax.jit(lambda v: minijax.lax.fft(v, fft_type, lengths))(x),
                               jax.lax.fft(x, fft_type, lengths), rtol=1e-4, atol=1e-4)
    per_example = np.stack([np.asarray(minijax.lax.fft(x[:, :, i], fft_type, (6,)))
                            for i in range(x.shape[2])], 1) if fft_type != "IRFFT" else None
    if per_example is not None:
        got = minijax.vmap(lambda v: minijax.lax.fft(v, fft_type, (6,)), in_axes=2,
                           out_axes=1)(x)
        np.testing.assert_allclose(got, per_example, rtol=1e-5, atol=1e-5)


def test_check_grads_through_rfft_and_irfft():
    f = lambda v: minijax.numpy.fft.irfft(minijax.numpy.fft.rfft(v) * (1 + 1j), n=5)
    minijax.test_util.check_grads(f, (X[0, 0],), order=2, modes=("fwd", "rev"), atol=1e-2,
                                  rtol=1e-2)


def test_bad_input_errors_name_the_operation():
    with pytest.raises(ValueError, match="rfft"):
        minijax.lax.fft(XC, "rfft", (5,))
    with pytest.raises(TypeError, match="unknown FFT type"):
        minijax.lax.fft(XC, "dct", (5,))
    with pytest.raises(ValueError, match="norm"):
        minijax.numpy.fft.fft(X, norm="sideways")
    with pytest.raises(ValueError, match="repeated axes"):
        minijax.numpy.fft.fftn(X, axes=(0, 0))


@pytest.mark.parametrize("in_axes", [0, 1, 2])
def test_fft_vmap_over_each_axis_and_check_jaxpr(in_axes):
    """vmap of jnp.fft.rfft2 / ifft against a per-example loop, and check_jaxpr of the
    batched, jvp'd and transposed programs."""
    f = lambda v: (minijax.numpy.fft.rfft2(v.real), minijax.numpy.fft.ifft(v, n=4))
    got = minijax.vmap(f, in_axes=in_axes)(XC)
    rows = [f(np.take(XC, i, axis=in_axes)) for i in range(XC.shape[in_axes])]
    for g, want in zip(got, zip(*rows)):
        np.testing.assert_allclose(g, np.stack(want), rtol=1e-5, atol=1e-5)
    loss = lambda v: minijax.numpy.abs(f(v)[0]).sum()
    for fn in (minijax.vmap(f, in_axes=in_axes), minijax.grad(loss),
               lambda v: minijax.jvp(f, (v,), (v,))):
        minijax.core.check_jaxpr(minijax.make_jaxpr(fn)(XC).jaxpr)
