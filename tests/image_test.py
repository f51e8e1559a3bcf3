"""minijax.image (resize, scale_and_translate) against jax.image: every method, growing and
shrinking, with and without antialiasing, eagerly, under jit and grad."""

import jax
import numpy as np
import pytest

import minijax

RNG = np.random.default_rng(0)
IMG = RNG.standard_normal((7, 9, 3)).astype(np.float32)
PIXELS = RNG.integers(0, 255, (5, 6)).astype(np.uint8)
METHODS = ["nearest", "linear", "bilinear", "cubic", "lanczos3", "lanczos5"]


@pytest.mark.parametrize("method", METHODS)
def test_resize_as_jax(method):
    # growing one axis and shrinking the other (antialiasing matters only there), with and
    # without antialiasing (each JAX call compiles: few cases)
    for shape, antialias in [((14, 5, 3), True), ((3, 4, 3), False)]:
        want = jax.image.resize(IMG, shape, method, antialias=antialias)
        got = minijax.image.resize(IMG, shape, method, antialias=antialias)
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    want, got = (J.image.resize(PIXELS, (9, 4), method) for J in (jax, minijax))
    assert got.dtype == want.dtype  # nearest keeps uint8, the kernels give float32
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-5, atol=1e-3)


@pytest.mark.slow
def test_resize_method_enum_scale_and_translate_jit_grad_and_errors_as_jax():
    got = minijax.image.resize(IMG, (4, 5, 3), minijax.image.ResizeMethod.CUBIC)
    np.testing.assert_allclose(got, jax.image.resize(IMG, (4, 5, 3), jax.image.ResizeMethod.CUBIC),
                               rtol=1e-5, atol=1e-5)

    def moved(J):
        return J.image.scale_and_translate(IMG, (10, 12, 3), (0, 1), np.array([1.5, 1.3]),
                                           np.array([0.5, -1.0]), "lanczos3")
    np.testing.assert_allclose(moved(minijax), moved(jax), rtol=1e-5, atol=1e-5)

    def jitted_grad(J):
        loss = lambda x: (J.image.resize(x, (4, 5, 3), "cubic") ** 2).sum()
        return J.jit(loss)(IMG), J.grad(loss)(IMG)
    for g, w in zip(jitted_grad(minijax), jitted_grad(jax)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    for bad in (lambda J: J.image.resize(IMG, (3, 3), "linear"),
                lambda J: J.image.resize(IMG, (3, 3, 3), "bogus")):
        with pytest.raises(ValueError) as want:
            bad(jax)
        with pytest.raises(ValueError, match=want.value.args[0].replace("(", r"\(")
                           .replace(")", r"\)")):
            bad(minijax)
