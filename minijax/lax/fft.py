"""The `fft` primitive: discrete Fourier transforms over the trailing dimensions of an array.

One primitive with four kinds (`FftType`): complex to complex forwards (FFT) and backwards
(IFFT, scaled by 1/n), real to half-spectrum (RFFT, last length n -> n // 2 + 1) and back
(IRFFT). Every kind is linear, so its jvp applies it to the tangent; the DFT matrix is
symmetric, so FFT and IFFT are their own transposes, while RFFT and IRFFT transpose into each
other with a mask that counts the half-spectrum's duplicated entries twice. Lowers to
`stablehlo.fft`. `jnp.fft` (minijax/numpy/fft.py) builds NumPy's API on it. Mirrors
jax/_src/lax/fft.py.
"""

from __future__ import annotations

import enum
import math
from typing import Sequence

import numpy as np

from minijax import core, dtypes
from minijax.ad_util import Zero
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import batching, mlir
from minijax.interpreters.ad import deflinear
from minijax.lax import lax


# JAX: jax/_src/lax/fft.py FftType
class FftType(enum.IntEnum):
    """The kind of transform `fft` computes (XLA's names)."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


def _real_dtype(dtype) -> np.dtype:
    return np.dtype(np.float64 if np.dtype(dtype) in (np.float64, np.complex128) else np.float32)


def _complex_dtype(dtype) -> np.dtype:
    return np.dtype(np.complex128 if _real_dtype(dtype) == np.float64 else np.complex64)


# JAX: jax/_src/lax/fft.py fft
def fft(x, fft_type: FftType | str, fft_lengths: Sequence[int]):
    """The transform `fft_type` over the last `len(fft_lengths)` dimensions of `x`.

    Args:
      x: `T[..., *fft_lengths]` (for IRFFT: `c64[..., *fft_lengths[:-1], fft_lengths[-1]//2+1]`);
        converted to complex (FFT, IFFT, IRFFT) or to a float dtype (RFFT) first.
      fft_type: an `FftType` or its name (`"fft"`, `"ifft"`, `"rfft"`, `"irfft"`).
      fft_lengths: the transform's lengths, one per trailing dimension.
    Returns: `c64[...]` of the same shape (FFT, IFFT), `c64[..., n//2+1]` (RFFT) or
      `f32[..., *fft_lengths]` (IRFFT); 64-bit under x64.
    Raises: TypeError for an unknown `fft_type`, ValueError for a complex RFFT input or shapes
      that do not match `fft_lengths`. Mirrors jax/_src/lax/fft.py fft.
    """
    if isinstance(fft_type, str):
        try:
            fft_type = FftType[fft_type.upper()]
        except KeyError:
            raise TypeError(f"lax.fft: unknown FFT type {fft_type!r}; expected one of "
                            f"{[t.name for t in FftType]}") from None
    elif not isinstance(fft_type, FftType):
        raise TypeError(f"lax.fft: unknown FFT type value {fft_type!r}")
    dtype = core.get_aval(x).dtype
    if fft_type == FftType.RFFT:
        if dtypes.issubdtype(dtype, np.complexfloating):
            raise ValueError("lax.fft: only real valued inputs are supported for rfft, got "
                             f"{np.dtype(dtype).name}")
        x = lax.convert_element_type(x, dtypes.canonicalize_dtype(_real_dtype(dtype)))
    else:
        x = lax.convert_element_type(x, dtypes.canonicalize_dtype(_complex_dtype(dtype)))
    if not fft_lengths:  # XLA has no rank-0 transform
        return x
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=tuple(int(n) for n in fft_lengths))


def _fft_impl(x, *, fft_type, fft_lengths):
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == FftType.FFT:
        return np.fft.fftn(x, axes=axes).astype(x.dtype)
    if fft_type == FftType.IFFT:
        return np.fft.ifftn(x, axes=axes).astype(x.dtype)
    if fft_type == FftType.RFFT:
        return np.fft.rfftn(x, axes=axes).astype(_complex_dtype(x.dtype))
    return np.fft.irfftn(x, s=fft_lengths, axes=axes).astype(_real_dtype(x.dtype))


def _fft_abstract_eval(x: ShapedArray, *, fft_type, fft_lengths) -> ShapedArray:
    k = len(fft_lengths)
    if k > x.ndim:
        raise ValueError(f"lax.fft: input {x.str_short()} must have at least as many "
                         f"dimensions as fft_lengths {fft_lengths}")
    lead, minor = x.shape[:x.ndim - k], tuple(x.shape[x.ndim - k:])
    complex_in = dtypes.issubdtype(x.dtype, np.complexfloating)
    if fft_type == FftType.RFFT:
        if x.dtype not in (np.float32, np.float64):
            raise ValueError(f"lax.fft: RFFT input must be float32 or float64, got "
                             f"{x.str_short()}")
        if minor != fft_lengths:
            raise ValueError(f"lax.fft: RFFT input {x.str_short()}'s minor dimensions must "
                             f"equal fft_lengths {fft_lengths}")
        return ShapedArray((*lead, *fft_lengths[:-1], fft_lengths[-1] // 2 + 1),
                           _complex_dtype(x.dtype))
    if not complex_in:
        raise ValueError(f"lax.fft: {fft_type.name} input must be complex, got "
                         f"{x.str_short()}")
    if fft_type == FftType.IRFFT:
        if minor[:-1] != fft_lengths[:-1] or minor[-1] != fft_lengths[-1] // 2 + 1:
            raise ValueError(f"lax.fft: IRFFT input {x.str_short()} must end in "
                             f"{(*fft_lengths[:-1], fft_lengths[-1] // 2 + 1)} for "
                             f"fft_lengths {fft_lengths}")
        return ShapedArray((*lead, *fft_lengths), _real_dtype(x.dtype))
    if minor != fft_lengths:
        raise ValueError(f"lax.fft: {fft_type.name} input {x.str_short()}'s minor "
                         f"dimensions must equal fft_lengths {fft_lengths}")
    return ShapedArray(x.shape, x.dtype)


def _half_spectrum_mask(t, n: int):
    """`[1, 2, ..., 2, 1]` (the last 1 only for even n) along t's last axis, in t's dtype:
    how many times each entry of an n-point half spectrum stands in the full spectrum."""
    aval = core.get_aval(t)
    mask = np.full((aval.shape[-1],), 2.0)
    mask[0] = 1.0
    if n % 2 == 0:
        mask[-1] = 1.0
    return lax.broadcast_in_dim(mask.astype(aval.dtype), aval.shape, (aval.ndim - 1,))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    n = fft_lengths[-1]
    if fft_type == FftType.RFFT:
        mask = _half_spectrum_mask(ct, n)
        out = fft(lax.div(lax.conj(ct), mask), FftType.IRFFT, fft_lengths)
        return [lax.mul(out, lax._const(out, math.prod(fft_lengths)))]
    if fft_type == FftType.IRFFT:
        y = fft(ct, FftType.RFFT, fft_lengths)
        mask = _half_spectrum_mask(y, n)
        return [lax.conj(lax.mul(y, lax.mul(mask, lax._const(y, 1 / math.prod(fft_lengths)))))]
    return [fft(ct, fft_type, fft_lengths)]


def _fft_batch_rule(vals, dims, *, axis_size, fft_type, fft_lengths):
    (x,), (d,) = vals, dims
    return fft_p.bind(batching.moveaxis(x, d, 0), fft_type=fft_type, fft_lengths=fft_lengths), 0


def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    return mlir.hlo.fft(x, mlir.hlo.FftTypeAttr.get(fft_type.name),
                        mlir.ir.DenseI64ArrayAttr.get(list(fft_lengths)))


# JAX: jax/_src/lax/fft.py fft_p
fft_p = Primitive("fft")
fft_p.def_impl(_fft_impl)
fft_p.def_abstract_eval(_fft_abstract_eval)
deflinear(fft_p, _fft_transpose)
batching.primitive_batchers[fft_p] = _fft_batch_rule
mlir.register_lowering(fft_p, _fft_lowering)
