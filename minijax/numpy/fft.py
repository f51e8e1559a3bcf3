"""`jnp.fft`: NumPy's discrete Fourier transforms on the `fft` primitive (minijax/lax/fft.py).

Each function moves the transformed axes to the end, crops or zero-pads them to the lengths
`s` (or `n`) asks for, binds `lax.fft` (at most three axes at a time, XLA's limit: more are
done in rounds) and scales by `norm`: "backward" (the default: only the inverse divides by the
number of points), "ortho" (both by its square root) or "forward" (only the forward divides).
Outputs are complex64 (float32 for irfft and hfft; 64-bit under x64). Mirrors
jax/_src/numpy/fft.py.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from minijax import core, dtypes, lax
from minijax.lax.fft import FftType
from minijax.lax.lax import _const
from minijax.numpy import lax_numpy, ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import canonicalize_axis

_NORMS = ("backward", "ortho", "forward")


def _scale(y, name: str, lengths: Sequence[int], norm: str | None, inverse: bool):
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"jnp.fft.{name}: invalid norm {norm!r}; expected one of {_NORMS}")
    n = math.prod(lengths)
    factor = {"backward": 1.0, "ortho": math.sqrt(n) if inverse else 1 / math.sqrt(n),
              "forward": n if inverse else 1 / n}[norm]
    return y if factor == 1.0 else lax.mul(y, _const(y, factor))


def _fft_nd(x, fft_type: FftType, lengths: tuple[int, ...]):
    """`lax.fft` over the last len(lengths) axes, in rounds of three axes (XLA's limit)."""
    if len(lengths) <= 3:
        return lax.fft(x, fft_type, lengths)
    ndim, k = core.get_aval(x).ndim, len(lengths) - 3
    lead = tuple(range(ndim - len(lengths), ndim - len(lengths) + k))
    back = tuple(range(ndim - k, ndim))
    inner = FftType.IFFT if fft_type in (FftType.IFFT, FftType.IRFFT) else FftType.FFT
    if fft_type in (FftType.FFT, FftType.RFFT):  # the last three first, the rest as complex
        x = lax.fft(x, fft_type, lengths[-3:])
        x = lax_numpy.moveaxis(_fft_nd(lax_numpy.moveaxis(x, lead, back), inner, lengths[:k]),
                               back, lead)
        return x
    x = lax_numpy.moveaxis(_fft_nd(lax_numpy.moveaxis(x, lead, back), inner, lengths[:k]),
                           back, lead)
    return lax.fft(x, fft_type, lengths[-3:])


def _fft_core(name: str, fft_type: FftType, a, s, axes, norm):
    x = asarray(a)
    ndim = core.get_aval(x).ndim
    if s is not None:
        s = tuple(int(n) for n in s)
        if any(n <= 0 for n in s):
            raise ValueError(f"jnp.fft.{name}: lengths s={s} must be positive")
        if axes is not None and len(s) != len(axes):
            raise ValueError(f"jnp.fft.{name}: s={s} and axes={tuple(axes)} have different "
                             "lengths")
    if axes is None:
        axes = tuple(range(ndim - (ndim if s is None else len(s)), ndim))
    axes = tuple(canonicalize_axis(ax, ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"jnp.fft.{name} does not support repeated axes, got {axes}")
    last = tuple(range(ndim - len(axes), ndim))
    x = lax_numpy.moveaxis(x, axes, last)
    shape = core.get_aval(x).shape
    if s is None:
        s = tuple(shape[ax] for ax in last)
        if fft_type == FftType.IRFFT and s:
            s = (*s[:-1], max(0, 2 * (s[-1] - 1)))
    if s:
        want = list(shape[:ndim - len(s)]) + list(s)
        if fft_type == FftType.IRFFT:
            want[-1] = s[-1] // 2 + 1
        x = lax.slice(x, (0,) * ndim, tuple(min(w, d) for w, d in zip(want, shape)))
        pads = [(0, w - min(w, d), 0) for w, d in zip(want, shape)]
        if any(p[1] for p in pads):
            x = lax.pad(x, _const(x, 0), pads)
    y = _fft_nd(x, fft_type, tuple(s)) if s else lax.fft(x, fft_type, ())
    y = _scale(y, name, s, norm, inverse=fft_type in (FftType.IFFT, FftType.IRFFT))
    return lax_numpy.moveaxis(y, last, axes)


def _one_axis(n, axis):
    return None if n is None else (n,), (axis,)


def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The 1-D discrete Fourier transform of `a` along `axis` (`c64[...]`, axis of length n:
    cropped or zero-padded). Raises ValueError for a bad `n` or `norm`."""
    return _fft_core("fft", FftType.FFT, a, *_one_axis(n, axis), norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of `fft` along `axis` (`c64[...]`)."""
    return _fft_core("ifft", FftType.IFFT, a, *_one_axis(n, axis), norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The 1-D transform of real `a`: the n // 2 + 1 non-negative frequencies (`c64`)."""
    return _fft_core("rfft", FftType.RFFT, a, *_one_axis(n, axis), norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of `rfft`: real `f32[...]` with n (default 2 * (m - 1)) points on `axis`."""
    return _fft_core("irfft", FftType.IRFFT, a, *_one_axis(n, axis), norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The transform of a Hermitian-symmetric signal given by its first half (`f32`):
    `irfft(conj(a))` scaled as a forward transform."""
    a = ufuncs.conj(asarray(a))
    m = core.get_aval(a).shape[canonicalize_axis(axis, core.get_aval(a).ndim)]
    nn = 2 * (m - 1) if n is None else n
    y = _fft_core("hfft", FftType.IRFFT, a, *_one_axis(n, axis), "forward")
    return _scale(y, "hfft", (nn,), norm, inverse=False)


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of `hfft`: `conj(rfft(a))` scaled as an inverse transform (`c64`)."""
    a = asarray(a)
    nn = core.get_aval(a).shape[canonicalize_axis(axis, core.get_aval(a).ndim)] \
        if n is None else n
    y = ufuncs.conj(_fft_core("ihfft", FftType.RFFT, a, *_one_axis(n, axis), "forward"))
    return _scale(y, "ihfft", (nn,), norm, inverse=True) if norm not in (None, "backward") \
        else y


def fftn(a, s=None, axes=None, norm: str | None = None):
    """The N-D transform over `axes` (default: the last len(s) axes, or all)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm: str | None = None):
    """The inverse of `fftn`."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm: str | None = None):
    """The N-D transform of real `a`, halved along the last of `axes`."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm: str | None = None):
    """The inverse of `rfftn` (real output)."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm: str | None = None):
    """`fftn` over two axes (default: the last two)."""
    return _fft_core("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm: str | None = None):
    """`ifftn` over two axes."""
    return _fft_core("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm: str | None = None):
    """`rfftn` over two axes."""
    return _fft_core("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm: str | None = None):
    """`irfftn` over two axes."""
    return _fft_core("irfft2", FftType.IRFFT, a, s, axes, norm)


def _freq_dtype(dtype):
    return dtypes.canonicalize_dtype(np.float32 if dtype is None else dtype)


def fftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point `fft`: `[0, 1, ..., -(n // 2), ..., -1] / (d n)`
    (`f32[n]`). Raises ValueError unless n is a positive integer."""
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"jnp.fft.fftfreq: n must be a positive integer, got {n!r}")
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return lax.div(asarray(k, _freq_dtype(dtype)), asarray(asarray(d) * n, _freq_dtype(dtype)))


def rfftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point `rfft`: `[0, ..., n // 2] / (d n)`."""
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"jnp.fft.rfftfreq: n must be a positive integer, got {n!r}")
    k = np.arange(n // 2 + 1)
    return lax.div(asarray(k, _freq_dtype(dtype)), asarray(asarray(d) * n, _freq_dtype(dtype)))


def _shift(x, axes, sign: int):
    x = asarray(x)
    shape = core.get_aval(x).shape
    axes = tuple(range(len(shape))) if axes is None else \
        (axes,) if isinstance(axes, int) else tuple(axes)
    shifts = tuple(sign * (shape[ax] // 2) for ax in axes)
    return lax_numpy.roll(x, shifts, axes)


def fftshift(x, axes=None):
    """`x` with the zero frequency moved to the centre of `axes` (default: all)."""
    return _shift(x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of `fftshift`."""
    return _shift(x, axes, -1)
