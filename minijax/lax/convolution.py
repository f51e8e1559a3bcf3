"""Convolution: `conv_general_dilated`, XLA's convolution with strides, padding, dilations and
feature groups.

The primitive is bilinear in (lhs, rhs), so its jvp applies it to each tangent and its two
transposes are convolutions again (JAX's `_conv_general_dilated_transpose_lhs/rhs`): the lhs
cotangent convolves the output cotangent with the spatially reversed kernel, the rhs cotangent
convolves the input with the output cotangent. The numpy impl lays out windows with
`sliding_window_view` and contracts them with `einsum`. Built on it, as in JAX: the
transposed convolution (`conv_transpose`), the patches a convolution sees and the unshared
convolution (`conv_general_dilated_patches/_local`, JAX's jax/_src/lax/other.py). Mirrors
jax/_src/lax/convolution.py. Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from minijax import core
from minijax.ad_util import Zero
from minijax.core import Primitive
from minijax.interpreters import ad, batching, mlir
from minijax.interpreters.ad import is_undefined_primal
from minijax.interpreters.batching import not_mapped
from minijax.lax import lax


# JAX: jax/_src/lax/convolution.py ConvDimensionNumbers
class ConvDimensionNumbers(NamedTuple):
    """Each spec lists dimension indices: lhs (batch N, feature C, spatial...), rhs (out
    feature O, in feature I, spatial...), out (N, C, spatial...)."""
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


# JAX: jax/_src/lax/convolution.py conv_dimension_numbers
def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """None (NC..., OI..., NC...), a ConvDimensionNumbers, or three strings like
    ('NHWC', 'HWIO', 'NHWC') -> ConvDimensionNumbers. Raises TypeError on bad specs."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for spec, (a, b) in zip(dimension_numbers, pairs):
        if len(spec) != len(lhs_shape) or spec.count(a) != 1 or spec.count(b) != 1 or len(
                set(spec)) != len(spec):
            raise TypeError(f"convolution dimension_numbers {dimension_numbers}: {spec} must "
                            f"have {len(lhs_shape)} distinct characters including {a} and {b}")
    if not set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}:
        raise TypeError(f"convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {dimension_numbers}.")

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return ConvDimensionNumbers(*(perm(s, p) for s, p in zip(dimension_numbers, pairs)))


def _dilate_shape(shape, dilation):
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


# JAX: jax/_src/lax/lax.py padtype_to_pads
def padtype_to_pads(in_shape, window_shape, window_strides, padding: str):
    """'SAME' (output size ceil(in / stride)) or 'VALID' (no padding) -> (lo, hi) pairs."""
    if padding.upper() == "VALID":
        return [(0, 0)] * len(in_shape)
    if padding.upper() != "SAME":
        raise TypeError(f"Unknown padding type: {padding}.")
    out = [-(-i // s) for i, s in zip(in_shape, window_strides)]
    total = [max((o - 1) * s + w - i, 0)
             for o, s, w, i in zip(out, window_strides, window_shape, in_shape)]
    return [(t // 2, t - t // 2) for t in total]


def _spatial(shape, spec):
    return tuple(shape[i] for i in spec[2:])


def _dilate(x, dilation, first_axis: int):
    if all(d == 1 for d in dilation):
        return x
    shape = list(x.shape)
    index = [slice(None)] * x.ndim
    for k, d in enumerate(dilation):
        shape[first_axis + k] = _dilate_shape([x.shape[first_axis + k]], [d])[0]
        index[first_axis + k] = slice(None, None, d)
    out = np.zeros(shape, x.dtype)
    out[tuple(index)] = x
    return out


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, precision, preferred_element_type):
    ls, rs, os_ = dimension_numbers
    dtype = preferred_element_type or lhs.dtype  # NumPy computes at full precision
    lhs, rhs = np.asarray(lhs, dtype), np.asarray(rhs, dtype)
    x = _dilate(np.transpose(lhs, ls), lhs_dilation, 2)  # N, C, spatial
    w = _dilate(np.transpose(rhs, rs), rhs_dilation, 2)  # O, I, spatial
    nsp = x.ndim - 2
    x = np.pad(x, [(0, 0)] * 2 + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    x = x[(slice(None),) * 2 + tuple(slice(-min(lo, 0), x.shape[2 + k] + min(hi, 0))
                                     for k, (lo, hi) in enumerate(padding))]
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=tuple(range(2, 2 + nsp)))
    win = win[(slice(None),) * 2 + tuple(slice(None, None, s) for s in window_strides)]
    g = feature_group_count
    n, c = win.shape[:2]
    win = win.reshape((n, g, c // g) + win.shape[2:])
    w = w.reshape((g, w.shape[0] // g) + w.shape[1:])
    sp = "hijklm"[:nsp]
    kk = "tuvwxy"[:nsp]
    out = np.einsum(f"ngc{sp}{kk},goc{kk}->ngo{sp}", win, w)
    out = out.reshape((n, -1) + out.shape[3:]).astype(dtype)
    return np.transpose(out, np.argsort(os_))


def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, precision,
                        preferred_element_type):
    ls, rs, os_ = dimension_numbers
    where = lambda: f"conv_general_dilated({lhs.str_short()}, {rhs.str_short()})"  # on error
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{where()}: lhs and rhs must have the same dtype")
    g = feature_group_count
    c, i_feat, o = lhs.shape[ls[1]], rhs.shape[rs[1]], rhs.shape[rs[0]]
    if c != i_feat * g or o % g:
        raise ValueError(f"{where()}: lhs features ({c}) must be rhs input features ({i_feat}) "
                        f"x feature_group_count ({g}), and rhs output features ({o}) divisible "
                        f"by it")
    lhs_sp = _dilate_shape(_spatial(lhs.shape, ls), lhs_dilation)
    rhs_sp = _dilate_shape(_spatial(rhs.shape, rs), rhs_dilation)
    out_sp = [max((d + lo + hi - k) // s + 1, 0) if d + lo + hi >= k else 0
              for d, (lo, hi), k, s in zip(lhs_sp, padding, rhs_sp, window_strides)]
    canonical = (lhs.shape[ls[0]], o) + tuple(out_sp)
    shape = [0] * lhs.ndim
    for j, a in enumerate(os_):
        shape[a] = canonical[j]
    return lhs.update(shape=tuple(shape), dtype=preferred_element_type or lhs.dtype,
                      weak_type=lhs.weak_type and rhs.weak_type)


def _conv_jvp_lhs(g, lhs, rhs, **params):
    return conv_general_dilated_p.bind(g, rhs, **params)


def _conv_jvp_rhs(g, lhs, rhs, **params):
    return conv_general_dilated_p.bind(lhs, g, **params)


def _spec_transpose(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


# JAX: jax/_src/lax/convolution.py _conv_general_vjp_lhs_padding
def _conv_general_vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape,
                                  padding, lhs_dilation, rhs_dilation):
    lhs_d = _dilate_shape(in_shape, lhs_dilation)
    rhs_d = _dilate_shape(window_dimensions, rhs_dilation)
    out_d = _dilate_shape(out_shape, window_strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rhs_d, padding)]
    after = [l + r - 1 - o - b for l, r, o, b in zip(lhs_d, rhs_d, out_d, before)]
    return tuple(zip(before, after))


# JAX: jax/_src/lax/convolution.py _conv_general_vjp_rhs_padding
def _conv_general_vjp_rhs_padding(in_shape, window_dimensions, window_strides, out_shape,
                                  padding, lhs_dilation, rhs_dilation):
    lhs_d = _dilate_shape(in_shape, lhs_dilation)
    rhs_d = _dilate_shape(window_dimensions, rhs_dilation)
    out_d = _dilate_shape(out_shape, window_strides)
    hi = [o - l + r - lo - 1 for o, l, r, (lo, _) in zip(out_d, lhs_d, rhs_d, padding)]
    return tuple((lo, h) for (lo, _), h in zip(padding, hi))


def _split(x, axis: int, groups: int):
    if groups == 1:  # the whole of x: no slice (JAX's transpose emits none either)
        return [x]
    shape = core.get_aval(x).shape
    size = shape[axis] // groups
    return [lax.slice(x, [size * k if a == axis else 0 for a in range(len(shape))],
                      [size * (k + 1) if a == axis else d for a, d in enumerate(shape)])
            for k in range(groups)]


def _transpose_lhs_one_group(g, lhs_shape, rhs, *, window_strides, padding, lhs_dilation,
                             rhs_dilation, dimension_numbers, precision):
    ls, rs, os_ = dimension_numbers
    rhs_shape = core.get_aval(rhs).shape
    pads = _conv_general_vjp_lhs_padding(
        _spatial(lhs_shape, ls), _spatial(rhs_shape, rs), window_strides,
        _spatial(core.get_aval(g).shape, os_), padding, lhs_dilation, rhs_dilation)
    return conv_general_dilated(
        g, lax.rev(rhs, rs[2:]), window_strides=lhs_dilation, padding=pads,
        lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
        dimension_numbers=ConvDimensionNumbers(os_, _spec_transpose(rs), ls), precision=precision)


def _transpose_rhs_one_group(g, lhs, rhs_shape, *, window_strides, padding, lhs_dilation,
                             rhs_dilation, dimension_numbers, precision):
    ls, rs, os_ = dimension_numbers
    pads = _conv_general_vjp_rhs_padding(
        _spatial(core.get_aval(lhs).shape, ls), _spatial(rhs_shape, rs), window_strides,
        _spatial(core.get_aval(g).shape, os_), padding, lhs_dilation, rhs_dilation)
    dn = ConvDimensionNumbers(_spec_transpose(ls), _spec_transpose(os_), _spec_transpose(rs))
    return conv_general_dilated(lhs, g, window_strides=rhs_dilation, padding=pads,
                                lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
                                dimension_numbers=dn, precision=precision)


def _conv_transpose(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                    dimension_numbers, feature_group_count, precision, preferred_element_type):
    # with feature groups, each group is transposed on its own and the results concatenated
    # (JAX folds the groups into batch_group_count instead, which minijax does not have)
    ls, rs, os_ = dimension_numbers
    params = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
                  precision=precision)
    G = feature_group_count
    if is_undefined_primal(lhs):
        if type(ct) is Zero:
            return [Zero(lhs.aval), None]
        shape = list(lhs.aval.shape)
        shape[ls[1]] //= G
        parts = [_transpose_lhs_one_group(g, tuple(shape), r, **params)
                 for g, r in zip(_split(ct, os_[1], G), _split(rhs, rs[0], G))]
        return [parts[0] if G == 1 else lax.concatenate(parts, ls[1]), None]
    if type(ct) is Zero:
        return [None, Zero(rhs.aval)]
    shape = list(rhs.aval.shape)
    shape[rs[0]] //= G
    parts = [_transpose_rhs_one_group(g, x, tuple(shape), **params)
             for g, x in zip(_split(ct, os_[1], G), _split(lhs, ls[1], G))]
    return [None, parts[0] if G == 1 else lax.concatenate(parts, rs[0])]


# JAX: jax/_src/lax/convolution.py _reshape_axis_into
def _reshape_axis_into(src: int, dst: int, x):
    """Merge axis `src` into axis `dst` (an index among the other axes), `src` major."""
    shape = core.get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new_shape = [d for i, d in enumerate(shape) if i != src]
    new_shape[dst] *= shape[src]
    return lax.reshape(x, new_shape, tuple(perm))


# JAX: jax/_src/lax/convolution.py _reshape_axis_out_of
def _reshape_axis_out_of(src: int, size1: int, x):
    shape = list(core.get_aval(x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return lax.reshape(x, shape)


def _conv_batch_rule(vals, dims, *, axis_size, **params):
    (lhs, rhs), (ld, rd) = vals, dims
    ls, rs, os_ = params["dimension_numbers"]
    B = axis_size
    if rd is not_mapped:  # the batch joins N
        out = conv_general_dilated_p.bind(_reshape_axis_into(ld, ls[0], lhs), rhs, **params)
        return _reshape_axis_out_of(os_[0], B, out), os_[0]
    if params["feature_group_count"] != 1:
        raise NotImplementedError("conv_general_dilated: vmap over the kernel with "
                                  "feature_group_count > 1 is not implemented in minijax — "
                                  "see chapters/05-batching.md")
    rhs = _reshape_axis_into(rd, rs[0], rhs)  # the batch joins O, major
    if ld is not_mapped:
        out = conv_general_dilated_p.bind(lhs, rhs, **params)
    else:  # and C: one feature group per example
        lhs = _reshape_axis_into(ld, ls[1], lhs)
        out = conv_general_dilated_p.bind(lhs, rhs, **dict(params, feature_group_count=B))
    return _reshape_axis_out_of(os_[1], B, out), os_[1]


# JAX: jax/_src/lax/convolution.py _conv_general_dilated_lower
def _conv_lowering(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, precision, preferred_element_type):
    ls, rs, os_ = dimension_numbers
    dnums = mlir.hlo.ConvDimensionNumbers.get(
        input_batch_dimension=ls[0], input_feature_dimension=ls[1],
        input_spatial_dimensions=list(ls[2:]), kernel_output_feature_dimension=rs[0],
        kernel_input_feature_dimension=rs[1], kernel_spatial_dimensions=list(rs[2:]),
        output_batch_dimension=os_[0], output_feature_dimension=os_[1],
        output_spatial_dimensions=list(os_[2:]))
    pads = mlir.ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(-1, 2))
    # the precision tells an accelerator how many bf16 passes to make (a CPU ignores it)
    config = mlir.ir.ArrayAttr.get([mlir.hlo.PrecisionAttr.get(p.name) for p in
                                    precision or (lax.Precision.DEFAULT,) * 2])
    return mlir.hlo.convolution(
        mlir.aval_to_ir_type(ctx.avals_out[0]), lhs, rhs, dnums, feature_group_count, 1,
        window_strides=list(window_strides), padding=pads, lhs_dilation=list(lhs_dilation),
        rhs_dilation=list(rhs_dilation), window_reversal=[False] * len(window_strides),
        precision_config=config)


# JAX: jax/_src/lax/convolution.py conv_general_dilated
def conv_general_dilated(lhs, rhs, window_strides: Sequence[int], padding,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None, dimension_numbers=None,
                         feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None):
    """General n-d convolution (cross-correlation, as XLA's).

    Args:
      lhs: `T[N,C,spatial...]` in the layout `dimension_numbers[0]` names.
      rhs: `T[O,I,spatial...]` (layout `dimension_numbers[1]`), with `C == I *
        feature_group_count` and `O` divisible by `feature_group_count`.
      window_strides: one stride per spatial dim.
      padding: 'SAME', 'VALID' or one `(lo, hi)` pair per spatial dim (may be negative).
      lhs_dilation / rhs_dilation: input (transposed-conv) and kernel (atrous) dilations.
      dimension_numbers: None, a ConvDimensionNumbers or strings like
        `('NCHW', 'OIHW', 'NCHW')` / `('NHWC', 'HWIO', 'NHWC')`.
    Returns: `T[N,O,out_spatial...]` in the layout `dimension_numbers[2]` names, with
      `out = floor((dilated_in + lo + hi - dilated_window) / stride) + 1`.
      precision: None, a `Precision` (or its name) or a pair of them: the passes an
        accelerator makes (a TPU's default is one bf16 pass; "highest" is float32); unset,
        `jax_default_matmul_precision`. Lowered as the op's `precision_config`.
      preferred_element_type: the result dtype (e.g. float32 for bfloat16 operands).
    Raises TypeError for mismatched dtypes/features or bad specs; NotImplementedError for
    `batch_group_count != 1` or a dot algorithm as `precision` (not in minijax).
    """
    if batch_group_count != 1:
        raise NotImplementedError("conv_general_dilated: batch_group_count is not supported "
                                  "by minijax")
    precision = lax.canonicalize_precision(precision)
    if precision is not None and not isinstance(precision, tuple):
        raise NotImplementedError(f"conv_general_dilated: precision={precision}: minijax "
                                  "takes Precision values only, not dot algorithms")
    if preferred_element_type is not None:
        preferred_element_type = np.dtype(preferred_element_type)
    l_shape, r_shape = core.get_aval(lhs).shape, core.get_aval(rhs).shape
    dn = conv_dimension_numbers(l_shape, r_shape, dimension_numbers)
    nsp = len(l_shape) - 2
    lhs_dilation = tuple(int(d) for d in lhs_dilation or (1,) * nsp)
    rhs_dilation = tuple(int(d) for d in rhs_dilation or (1,) * nsp)
    window_strides = tuple(int(s) for s in window_strides)
    for what, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)) + (() if isinstance(padding, str) else
                                                       (("padding", tuple(padding)),)):
        if len(v) != nsp:  # as JAX: ValueError
            raise ValueError(f"conv_general_dilated: {what} must have one entry per spatial "
                             f"dimension ({nsp}), got {v}")
    if isinstance(padding, str):
        padding = padtype_to_pads(_dilate_shape(_spatial(l_shape, dn.lhs_spec), lhs_dilation),
                                  _dilate_shape(_spatial(r_shape, dn.rhs_spec), rhs_dilation),
                                  window_strides, padding)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=int(feature_group_count), precision=precision,
        preferred_element_type=preferred_element_type)


conv_general_dilated_p = Primitive("conv_general_dilated")
conv_general_dilated_p.def_impl(_conv_impl)
conv_general_dilated_p.def_abstract_eval(_conv_abstract_eval)
ad.defjvp(conv_general_dilated_p, _conv_jvp_lhs, _conv_jvp_rhs)
ad.primitive_transposes[conv_general_dilated_p] = _conv_transpose
batching.primitive_batchers[conv_general_dilated_p] = _conv_batch_rule
mlir.register_lowering(conv_general_dilated_p, _conv_lowering)


# JAX: jax/_src/lax/convolution.py conv
def conv(lhs, rhs, window_strides: Sequence[int], padding, precision=None,
         preferred_element_type=None):
    """`conv_general_dilated` without dilation, in the NCHW / OIHW layout: lhs `T[N,C,...]`,
    rhs `T[O,C,...]`; `padding` is 'SAME', 'VALID' or `(lo, hi)` pairs. Returns `T[N,O,...]`."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


# JAX: jax/_src/lax/convolution.py conv_with_general_padding
def conv_with_general_padding(lhs, rhs, window_strides: Sequence[int], padding,
                              lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision=None,
                              preferred_element_type=None):
    """`conv_general_dilated` in the NCHW / OIHW layout, with dilations: lhs `T[N,C,...]`,
    rhs `T[O,C,...]`. Returns `T[N,O,...]`."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


# ---------------------------------------------------------------------------------------------
# Shape arithmetic, as public helpers (JAX exports them from lax)
# ---------------------------------------------------------------------------------------------

# The forms conv's `dimension_numbers` may take (JAX: convolution.py
# ConvGeneralDilatedDimensionNumbers)
ConvGeneralDilatedDimensionNumbers = tuple[str, str, str] | ConvDimensionNumbers | None


# JAX: jax/_src/lax/convolution.py conv_general_permutations
def conv_general_permutations(dimension_numbers):
    """For specs like ('NHWC', 'HWIO', 'NHWC'): the three permutations that bring the lhs,
    rhs and output to NC..., OI..., NC... (spatial dims in the rhs spec's order)."""
    rank = len(dimension_numbers[0])
    return tuple(conv_dimension_numbers((0,) * rank, (0,) * rank, dimension_numbers))


def _stride_dim(d: int, window: int, stride: int) -> int:
    return max(0, (d - window) // stride + 1)


# JAX: jax/_src/lax/convolution.py conv_shape_tuple
def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1):
    """The output shape of a convolution of NC... `lhs_shape` with OI... `rhs_shape`:
    `pads` is (lo, hi) pairs or 'SAME'/'VALID'. TypeError for the wrong number of pads."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
    space = tuple(_stride_dim(p, k, s) for p, k, s in zip(padded, rhs_shape[2:], strides))
    return (int(lhs_shape[0]) // batch_group_count, int(rhs_shape[0])) + space


def _permuted(shape, perm):
    return tuple(int(shape[p]) for p in perm)


def _unpermuted(shape, perm):
    return tuple(shape[perm.index(i)] for i in range(len(perm)))


# JAX: jax/_src/lax/convolution.py conv_general_shape_tuple
def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """`conv_shape_tuple` for operands laid out as `dimension_numbers` (three spec strings)
    says, the result in the output spec's layout."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(_permuted(lhs_shape, lhs_perm), _permuted(rhs_shape, rhs_perm),
                           window_strides, padding)
    return _unpermuted(out, out_perm)


def _conv_transpose_padding(k: int, s: int, padding: str | tuple[int, int]) -> tuple[int, int]:
    # the padding of the dilated input that makes a transposed conv invert 'SAME'/'VALID'
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(0, k - s)
        lo = k - 1
    elif isinstance(padding, tuple):  # a forward conv's (lo, hi): the padding undoing it
        lo, total = k - 1 - padding[0], 2 * (k - 1) - padding[0] - padding[1]
    else:
        raise ValueError(f"Padding mode must be `SAME` or `VALID`, got {padding!r}")
    return lo, total - lo


_TRANSPOSE_LAYOUTS = {1: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


# JAX: jax/_src/lax/convolution.py conv_transpose
def conv_transpose(lhs, rhs, strides: Sequence[int], padding, rhs_dilation=None,
                   dimension_numbers=None, transpose_kernel: bool = False, precision=None,
                   preferred_element_type=None, use_consistent_padding: bool = False):
    """A transposed ("fractionally strided") convolution, computed directly: `lhs` dilated by
    `strides` and convolved with `rhs` at stride 1, so `(N, H, W, C)` grows to about
    `(N, H*s, W*s, O)`.

    Args:
      lhs, rhs: arrays of equal rank n+2, laid out as `dimension_numbers` says; unset, the
        TensorFlow layouts `('NHWC', 'HWIO', 'NHWC')` (and their 1-d/3-d analogues).
      strides: the forward convolution's strides (the input's dilation here).
      padding: 'SAME' or 'VALID' (the forward convolution's), or `(lo, hi)` per spatial dim:
        the transposed convolution's own padding, or with `use_consistent_padding` the
        forward one's.
      rhs_dilation: the kernel's dilation; transpose_kernel: flip the kernel's spatial dims and
        swap its I and O (what the gradient of a forward conv does).
      precision, preferred_element_type: as `conv_general_dilated`.
    Returns the convolution, in `dimension_numbers[2]`'s layout.
    Raises ValueError for a rank above 5 without `dimension_numbers` or a bad padding mode,
    TypeError/ValueError from `conv_general_dilated` for mismatched operands.
    Mirrors jax/_src/lax/convolution.py: conv_transpose.
    """
    l_shape, r_shape = core.get_aval(lhs).shape, core.get_aval(rhs).shape
    if len(l_shape) != len(r_shape) or len(l_shape) < 2:
        raise ValueError(f"conv_transpose: lhs and rhs must have the same rank >= 2, got "
                         f"shapes {l_shape} and {r_shape}")
    if dimension_numbers is None:
        if len(l_shape) not in _TRANSPOSE_LAYOUTS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_LAYOUTS[len(l_shape)]
    dn = conv_dimension_numbers(l_shape, r_shape, dimension_numbers)
    nsp = len(l_shape) - 2
    rhs_dilation = tuple(rhs_dilation or (1,) * nsp)
    if use_consistent_padding or padding in ("SAME", "VALID"):
        k_sizes = [(r_shape[d] - 1) * r + 1 for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        modes = [padding] * nsp if isinstance(padding, str) else [tuple(p) for p in padding]
        padding = [_conv_transpose_padding(k, s, m) for k, s, m in zip(k_sizes, strides, modes)]
    if transpose_kernel:
        rhs = lax.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(len(r_shape)))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = lax.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * nsp, padding, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


# JAX: jax/_src/lax/convolution.py conv_transpose_shape_tuple
def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of `conv_transpose` (the input dilated by the strides)."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs, rhs = _permuted(lhs_shape, lhs_perm), _permuted(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding)
                   for k, s in zip(rhs[2:], window_strides)]
    space = tuple((i - 1) * s - k + 2 + lo + hi
                  for i, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], window_strides, padding))
    return _unpermuted((lhs[0], rhs[0]) + space, out_perm)


# ---------------------------------------------------------------------------------------------
# The patches a convolution sees, and the unshared convolution (JAX: jax/_src/lax/other.py)
# ---------------------------------------------------------------------------------------------
# The patches are a grouped convolution with a one-hot kernel: one group per input channel, one
# output channel per window position, so output channel `c * prod(filter_shape) + k` holds input
# channel `c` at window position `k` (row-major over the filter's spatial dims). No primitive of
# their own: grad, vmap and jit come from the convolution's rules.
def _moveaxis(x, src: Sequence[int], dst: Sequence[int]):
    """`x` with its axes `src` moved to `dst` (as `np.moveaxis`), through `lax.transpose`."""
    ndim = core.get_aval(x).ndim
    perm = [d for d in range(ndim) if d not in src]
    for s, d in sorted(zip(src, dst), key=lambda p: p[1]):
        perm.insert(d, s)
    return x if perm == list(range(ndim)) else lax.transpose(x, tuple(perm))


# JAX: jax/_src/lax/other.py conv_general_dilated_patches
def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """The patches of `lhs` that a convolution with a `filter_shape` window would see.

    Args:
      lhs: `T[N, C, spatial...]` (rank n+2, laid out as `dimension_numbers[0]` says).
      filter_shape: the n spatial sizes of the window.
      window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, precision,
        preferred_element_type: as `conv_general_dilated` (the kernel layout in
        `dimension_numbers[1]` orders the window's spatial dims).
    Returns `T[N, C * prod(filter_shape), out_spatial...]` in `dimension_numbers[2]`'s layout:
      feature `c * prod(filter_shape) + k` is input channel `c` at window position `k`.
    Raises what `conv_general_dilated` raises for strides, padding or dilations that do not
    match the rank. Mirrors jax/_src/lax/other.py: conv_general_dilated_patches.
    """
    lhs = lax.asarray(lhs)
    filter_shape = tuple(int(d) for d in filter_shape)
    shape, dtype = core.get_aval(lhs).shape, core.get_aval(lhs).dtype
    if len(filter_shape) != len(shape) - 2:
        raise ValueError(f"conv_general_dilated_patches: filter_shape {filter_shape} must have "
                         f"one size per spatial dimension of lhs {shape}")
    dn = conv_dimension_numbers(shape, (1, 1) + filter_shape, dimension_numbers)
    size, channels = math.prod(filter_shape), shape[dn.lhs_spec[1]]
    # the kernel in OI<spatial> order: O = (channel, window position), I = 1 (one group each)
    eye = np.eye(size, dtype=dtype).reshape(1, size, size)
    kernel = np.broadcast_to(eye, (channels, size, size)).reshape(
        (channels * size, 1) + filter_shape)
    kernel = np.moveaxis(kernel, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    pair = lax.canonicalize_precision(precision) if precision is not None else None
    if isinstance(pair, tuple):  # the lhs's precision; the one-hot kernel is exact anyway
        precision = (pair[0], lax.Precision.DEFAULT)
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation,
                                rhs_dilation, dn, feature_group_count=channels,
                                precision=precision, preferred_element_type=preferred_element_type)


# JAX: jax/_src/lax/other.py conv_general_dilated_local
def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape: Sequence[int],
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """An unshared convolution: a different kernel at every output location.

    Args:
      lhs: `T[N, C, spatial...]` (layout `dimension_numbers[0]`).
      rhs: `T[O, C * prod(filter_shape), out_spatial...]` in `dimension_numbers[1]`'s layout:
        its "I" dim runs over the patch features as `conv_general_dilated_patches` orders
        them, its spatial dims over the output locations.
      window_strides, padding, filter_shape, lhs_dilation, rhs_dilation, dimension_numbers:
        as `conv_general_dilated_patches`; precision: one Precision or a pair (lhs, rhs).
    Returns `T[N, O, out_spatial...]` in `dimension_numbers[2]`'s layout.
    Raises ValueError for a precision that is not one Precision or a pair, TypeError from
    `dot_general` when `rhs` does not fit the patches. Mirrors jax/_src/lax/other.py:
    conv_general_dilated_local.
    """
    lhs = lax.asarray(lhs)
    pair = lax.canonicalize_precision(precision)
    if pair is not None and not (isinstance(pair, tuple) and len(pair) == 2):
        raise ValueError(f"Unsupported precision for conv_general_dilated_local: {precision}")
    patches = conv_general_dilated_patches(
        lhs, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
        dimension_numbers, precision=None if pair is None else pair[0])
    _, rhs_spec, out_spec = conv_dimension_numbers(
        core.get_aval(lhs).shape, (1, 1) + tuple(filter_shape), dimension_numbers)
    # contract the patch features; the spatial dims are batch dims, paired in output order
    lhs_b = list(out_spec[2:])
    rhs_b = [rhs_spec[2:][i] for i in sorted(range(len(lhs_b)), key=lambda k: lhs_b[k])]
    dn = (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_b), rhs_b))
    out = lax.dot_general(patches, rhs, dn, precision=precision)
    return _moveaxis(out, (out.ndim - 2, out.ndim - 1), (out_spec[0], out_spec[1]))
