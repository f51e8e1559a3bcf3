"""`minijax.image`: resizing images (`resize`, `scale_and_translate`, `ResizeMethod`).

Nearest-neighbour resizing picks, along each resized dimension, the input pixel whose cell
holds each output pixel's centre. The other methods are separable filters: along each
dimension an output pixel is a weighted sum of input pixels, the weights a kernel (triangle,
Keys cubic, Lanczos) of the distance between the output pixel's centre mapped back into the
input and each input pixel's centre. When shrinking with `antialias`, the kernel is widened by
the shrink factor, so it also low-pass filters. The weight matrices depend only on the sizes
(and the scale and translation), so they are computed with NumPy while tracing; the image is
then contracted with one `dot_general` per dimension. Mirrors jax/_src/image/scale.py.
"""

from __future__ import annotations

import enum

import numpy as np

from minijax import dtypes, lax, numpy as jnp
from minijax.numpy.util import canonicalize_shape


# JAX: jax/_src/image/scale.py ResizeMethod
class ResizeMethod(enum.Enum):
    """The interpolation of `resize`: NEAREST, LINEAR (a triangle kernel), LANCZOS3,
    LANCZOS5 (windowed sinc of radius 3 or 5) and CUBIC (Keys' cubic, a = -0.5)."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR",
                 "trilinear": "LINEAR", "triangle": "LINEAR", "lanczos3": "LANCZOS3",
                 "lanczos5": "LANCZOS5", "cubic": "CUBIC", "bicubic": "CUBIC",
                 "tricubic": "CUBIC"}
        if s not in names:
            raise ValueError(f'Unknown resize method "{s}"')
        return ResizeMethod[names[s]]


def _lanczos(radius: float):
    def kernel(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            y = radius * np.sin(np.pi * x) * np.sin(np.pi * x / radius) / (np.pi ** 2 * x ** 2)
        return np.where(x > radius, 0.0, np.where(x > 1e-3, y, 1.0))
    return kernel


def _keys_cubic(x):
    near = ((1.5 * x - 2.5) * x) * x + 1.0
    far = ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
    return np.where(x >= 2.0, 0.0, np.where(x >= 1.0, far, near))


_KERNELS = {ResizeMethod.LINEAR: lambda x: np.maximum(0.0, 1.0 - np.abs(x)),
            ResizeMethod.LANCZOS3: _lanczos(3.0), ResizeMethod.LANCZOS5: _lanczos(5.0),
            ResizeMethod.CUBIC: _keys_cubic}


# JAX: jax/_src/image/scale.py compute_weight_mat
def _weights(in_size: int, out_size: int, scale: float, translation: float, kernel,
             antialias: bool) -> np.ndarray:
    """f32[in_size, out_size]: how much input pixel i contributes to output pixel o. Each
    column sums to 1 (or is 0 where the output pixel's centre falls outside the input)."""
    inv = 1.0 / scale
    widen = max(inv, 1.0) if antialias else 1.0  # shrinking: a wider kernel, a low-pass
    centre = (np.arange(out_size) + 0.5) * inv - translation * inv - 0.5
    w = kernel(np.abs(centre[None, :] - np.arange(in_size)[:, None]) / widen)
    total = w.sum(0, keepdims=True)
    w = np.where(np.abs(total) > 1000.0 * np.finfo(np.float32).eps,
                 w / np.where(total != 0, total, 1), 0.0)
    inside = (centre >= -0.5) & (centre <= in_size - 0.5)
    return np.where(inside[None, :], w, 0.0).astype(np.float32)


def _contract(x, weights: dict):
    """x with each dimension d in `weights` replaced by its product with weights[d]."""
    for d, w in weights.items():
        w = lax.convert_element_type(w, jnp.result_type(x))
        y = lax.dot_general(x, w, (((d,), (0,)), ((), ())))  # the new dimension comes last
        x = jnp.moveaxis(y, -1, d)
    return x


# JAX: jax/_src/image/scale.py scale_and_translate
def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias: bool = True, precision=None):
    """`image` sampled at `(o + 0.5 - translation) / scale - 0.5` along each of
    `spatial_dims` (its output pixel o), into an array of `shape`. `scale` and `translation`
    are concrete, one per spatial dimension; `method` as in `resize`, not "nearest".
    Returns a floating array of `shape`. Raises ValueError for "nearest" or an unknown
    method."""
    method = ResizeMethod.from_string(method) if isinstance(method, str) else method
    if method == ResizeMethod.NEAREST:
        raise ValueError("scale_and_translate: the nearest method is not a kernel; use resize")
    image = jnp.asarray(image)
    if not dtypes.issubdtype(image.dtype, np.inexact):
        image = lax.convert_element_type(image, dtypes.canonicalize_dtype(np.float64))
    weights = {}
    for d, s, t in zip(spatial_dims, np.asarray(scale), np.asarray(translation)):
        d = d % image.ndim
        weights[d] = _weights(image.shape[d], shape[d], float(s), float(t), _KERNELS[method],
                              antialias)
    return _contract(image, weights)


# JAX: jax/_src/image/scale.py resize
def resize(image, shape, method, antialias: bool = True, precision=None):
    """`image` (any rank) resized to `shape` (same rank) with `method`: a `ResizeMethod` or
    its name ("nearest", "linear"/"bilinear", "cubic"/"bicubic", "lanczos3", "lanczos5").
    Dimensions whose size does not change are left as they are. Returns an array of `shape`,
    floating except for "nearest" (which keeps the dtype; `antialias` and `precision` are
    ignored there, as in JAX). Raises ValueError for a `shape` of another rank or an unknown
    method."""
    image = jnp.asarray(image)
    shape = canonicalize_shape(shape)
    if len(shape) != image.ndim:
        raise ValueError(f"shape must have length equal to the number of dimensions of x;  "
                         f"{shape} vs {image.shape}")
    method = ResizeMethod.from_string(method) if isinstance(method, str) else method
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    if method == ResizeMethod.NEAREST:
        for d in dims:
            m, n = image.shape[d], shape[d]
            # float32, in JAX's order: the same pixel where a centre falls on an edge
            take = np.floor((np.arange(n, dtype=np.float32) + 0.5) * np.float32(m) / np.float32(n))
            image = jnp.take(image, take.astype(np.int32), axis=d)
        return image
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return scale_and_translate(image, shape, dims, scale, [0.0] * len(dims), method,
                               antialias, precision)
