"""The foreign function interface: calling compiled code (C++ handlers written against XLA's
FFI headers) from traced programs.

A handler lives in a shared library; `pycapsule` wraps its symbol (a ctypes function pointer)
and `register_ffi_target` hands it to XLA's CPU backend under a name. `ffi_call(name, result
types)` returns a function that binds `ffi_call_p`, whose lowering is the typed custom call
JAX emits: `stablehlo.custom_call @name` with the keyword arguments as the dictionary
`mhlo.backend_config` (the FFI's attributes, decoded by the handler's `Attr<...>` binding),
row-major operand and result layouts, `api_version` 1 beside that dictionary, which XLA reads
as its typed FFI. Eagerly the primitive runs as a small jitted program, as in JAX. It has no
derivative (wrap it in `custom_vjp`); under `vmap` it follows `vmap_method`, as
`pure_callback` does. Mirrors jax/_src/ffi.py. Taught in chapters/32-ffi.md.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from minijax import core, effects, lax, xla_bridge
from minijax.callback import _VMAP_METHODS, _pp_avals  # shared with pure_callback
from minijax.interpreters import ad, batching, mlir
from minijax.lax.control_flow.loops import scan
from minijax.pjit import jit
from minijax.util import BoundedCache, merge_lists, partition_list

__all__ = ["ffi_call", "include_dir", "pycapsule", "register_ffi_target"]


# JAX: jax/_src/ffi.py pycapsule
def pycapsule(funcptr) -> Any:
    """A ctypes function pointer (`ctypes.cdll.LoadLibrary(path).Symbol`) as the opaque
    PyCapsule `register_ffi_target` takes. The capsule has no destructor: the library must
    stay loaded while XLA may call it."""
    new = ctypes.pythonapi.PyCapsule_New
    destructor = ctypes.CFUNCTYPE(None, ctypes.py_object)
    new.restype, new.argtypes = ctypes.py_object, (ctypes.c_void_p, ctypes.c_char_p, destructor)
    return new(ctypes.cast(funcptr, ctypes.c_void_p), None, destructor(0))


# JAX: jax/_src/ffi.py include_dir
def include_dir() -> str:
    """The folder of XLA's FFI headers that jaxlib installs (`xla/ffi/api/ffi.h` under it):
    compile handlers with `-I` pointing here."""
    return xla_bridge.ffi_include_dir()


# JAX: jax/_src/ffi.py register_ffi_target
def register_ffi_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1,
                        **kwargs: Any) -> None:
    """Register the handler `fn` (a PyCapsule, or a dict of them by FFI stage name) with
    XLA's `platform` backend as the custom-call target `name`. `api_version` 1 is the typed
    FFI, 0 the older untyped custom call. XLA reports a name registered twice."""
    xla_bridge.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def _row_major(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim - 1, -1, -1))


def _layouts(avals, layouts, what: str) -> tuple[tuple[int, ...], ...]:
    """Major-to-minor layouts (None: row-major) as XLA's minor-to-major tuples."""
    if layouts is None:
        return tuple(_row_major(a.ndim) for a in avals)
    if len(layouts) != len(avals):
        raise ValueError(f"The number of {what} ({len(avals)}) must equal the number of "
                         f"{what[:-1]} layouts ({len(layouts)}).")
    return tuple(_row_major(a.ndim) if lay is None else tuple(lay)[::-1]
                 for a, lay in zip(avals, layouts))


class _HashableArray:
    """A NumPy array attribute as a hashable param (compared by value, like JAX's
    HashableArray): `ffi_call(...)(x, table=np.arange(3))`."""

    def __init__(self, val: np.ndarray) -> None:
        self.val = np.array(val)
        self.val.setflags(write=False)

    def __hash__(self) -> int:
        return hash((self.val.shape, self.val.dtype, self.val.tobytes()))

    def __eq__(self, other) -> bool:
        return isinstance(other, _HashableArray) and self.val.dtype == other.val.dtype \
            and np.array_equal(self.val, other.val)

    def __repr__(self) -> str:
        return repr(self.val)


class _FrozenDict(tuple):
    """A dict attribute as a hashable param: its sorted items (JAX's FrozenDict)."""


def _hashable_attributes(kwargs: dict) -> tuple:
    out = []
    for k, v in sorted(kwargs.items()):
        if isinstance(v, np.ndarray):
            v = _HashableArray(v)
        elif isinstance(v, dict):
            v = _FrozenDict(sorted(v.items()))
        try:
            hash(v)
        except TypeError as e:
            raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}") from e
        out.append((k, v))
    return tuple(out)


# JAX: jax/_src/ffi.py ffi_call
def ffi_call(target_name: str, result_shape_dtypes, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts: Sequence | None = None,
             output_layouts=None, input_output_aliases: dict[int, int] | None = None,
             custom_call_api_version: int = 4, legacy_backend_config: str | None = None):
    """A function calling the FFI target `target_name` (registered with
    `register_ffi_target`) on its positional array arguments.

    Args:
      target_name: the registered name.
      result_shape_dtypes: one `ShapeDtypeStruct` (anything with .shape and .dtype), e.g.
        `ShapeDtypeStruct(x.shape, float32)` for an `f32[n,d]` result, or a list/tuple of
        them for several results (returned as a list/tuple).
      has_side_effect: keep the call even when its results are unused.
      vmap_method: how `vmap` batches the call, as for `pure_callback`: "sequential" /
        "sequential_unrolled" (one call per example, in a scan or unrolled), "expand_dims"
        (one call, unbatched arguments get a leading axis of 1), "broadcast_all" (one call,
        every argument carries the whole batch axis), "legacy_vectorized". None: vmap
        raises NotImplementedError.
      input_layouts, output_layouts: per argument/result, None (row-major) or a
        major-to-minor axis order XLA lays the buffer out in before the handler runs.
      input_output_aliases: {input index: output index} for results written in place.
      custom_call_api_version: 4, the typed FFI; lower numbers call a legacy custom call,
        whose opaque `legacy_backend_config` string replaces the attributes.
    Returns: `wrapped(*args, **attributes)`; the keyword arguments become the handler's
      attributes (NumPy scalars keep their type: `eps=np.float32(1e-5)` is an `f32`).
    Raises: ValueError for an unknown vmap_method, mismatched layouts or aliases, a
      result without shape/dtype, and under `jvp`/`grad`; TypeError for an attribute that
      cannot be hashed (arrays and dicts can); XLA's runtime error when the handler fails.
    """
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(_VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    multiple = isinstance(result_shape_dtypes, (list, tuple))
    results = list(result_shape_dtypes) if multiple else [result_shape_dtypes]
    for i, r in enumerate(results):
        if not hasattr(r, "shape") or not hasattr(r, "dtype"):
            raise ValueError("All elements of result_shape_dtypes must have 'shape' and "
                             f"'dtype' attributes. Got {r} at position {i}.")
    result_avals = tuple(core.ShapedArray(tuple(r.shape), np.dtype(r.dtype)) for r in results)
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("The use of the legacy_backend_config parameter requires "
                         f"custom_call_api_version < 4; got {custom_call_api_version}.")

    def wrapped(*args, **kwargs):
        in_avals = [core.get_aval(x) for x in args]
        in_lays = _layouts(in_avals, input_layouts, "input arguments")
        out_lays = _layouts(result_avals, output_layouts if multiple or output_layouts is None
                            else [output_layouts], "outputs")
        aliases = []
        for i, o in sorted((input_output_aliases or {}).items()):
            if not (0 <= i < len(args) and 0 <= o < len(result_avals)):
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' outside "
                                 f"the {len(args)} inputs and {len(result_avals)} outputs.")
            a, r = in_avals[i], result_avals[o]
            if (a.shape, a.dtype) != (r.shape, r.dtype) or in_lays[i] != out_lays[o]:
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' "
                                 f"referring to an input {a.str_short()} and an output "
                                 f"{r.str_short()} of another type or layout.")
            aliases.append((i, o))
        outs = ffi_call_p.bind(
            *args, result_avals=result_avals, vmap_method=vmap_method,
            target_name=target_name, has_side_effect=has_side_effect,
            input_layouts=in_lays, output_layouts=out_lays,
            input_output_aliases=tuple(aliases),
            custom_call_api_version=custom_call_api_version,
            legacy_backend_config=legacy_backend_config,
            attributes=_hashable_attributes(kwargs))
        if not multiple:
            return outs[0]
        return tuple(outs) if isinstance(result_shape_dtypes, tuple) else list(outs)

    return wrapped


# ---------------------------------------------------------------------------------------------
# ffi_call_p
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/ffi.py FfiEffect
class FfiEffect(effects.Effect):
    """The effect of an `ffi_call(..., has_side_effect=True)`: never removed."""

    def __str__(self) -> str:
        return "FFI"


_FfiEffect = FfiEffect()


# params -> the jitted one-equation program that runs the call eagerly (each jit caches its
# compiles per input signature)
_eager_programs: BoundedCache = BoundedCache(256)


def _ffi_call_impl(*args, **params):
    # JAX: jax/_src/dispatch.py simple_impl — the call runs as a program of one equation
    key = tuple(sorted(params.items()))
    run = _eager_programs.get(key)
    if run is None:
        run = _eager_programs.put(key, jit(lambda *xs: ffi_call_p.bind(*xs, **params)))
    return run(*args)


def _ffi_call_abstract_eval(*avals, result_avals, has_side_effect, **_):
    return list(result_avals), {_FfiEffect} if has_side_effect else effects.no_effects


def _ffi_call_jvp(primals, tangents, *, target_name, **_):
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                     "`jax.custom_jvp` or `jax.custom_vjp` to add support.")


# JAX: jax/_src/ffi.py ffi_batching_rule
def _ffi_call_batch_rule(vals, dims, *, axis_size, vmap_method, result_avals, **params):
    vals = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(vals, dims)]
    b_avals = tuple(a.update(shape=(axis_size, *a.shape)) for a in result_avals)

    def shifted(layouts, batched):  # the new leading axis is the most major
        return tuple(tuple(n + 1 for n in lay) + (0,) if b else lay
                     for lay, b in zip(layouts, batched))

    if vmap_method in ("sequential", "sequential_unrolled"):
        is_batched = [d is not None for d in dims]
        fixed, batched = partition_list(is_batched, vals)

        def one(_, xs):
            args = merge_lists(is_batched, fixed, xs)
            return (), ffi_call_p.bind(*args, vmap_method=vmap_method,
                                       result_avals=result_avals, **params)
        _, outs = scan(one, (), batched, unroll=vmap_method == "sequential_unrolled")
        return list(outs), [0] * len(outs)
    if vmap_method is None:
        raise NotImplementedError(
            "vmap is only supported for the ffi_call primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method}.")
    params["output_layouts"] = shifted(params["output_layouts"], [True] * len(b_avals))
    if vmap_method == "legacy_vectorized":
        params["input_layouts"] = shifted(params["input_layouts"], [d is not None for d in dims])
    else:
        size = axis_size if vmap_method == "broadcast_all" else 1
        vals = [lax.broadcast(x, (size,)) if d is None else x for x, d in zip(vals, dims)]
        params["input_layouts"] = shifted(params["input_layouts"], [True] * len(vals))
    outs = ffi_call_p.bind(*vals, vmap_method=vmap_method, result_avals=b_avals, **params)
    return list(outs), [0] * len(outs)


# JAX: jax/_src/interpreters/mlir.py ir_attribute
def _ir_attribute(v) -> Any:
    """A Python or NumPy value as the MLIR attribute the handler decodes: NumPy scalars keep
    their dtype, Python int/float become i64/f64, arrays dense elements."""
    ir = mlir.ir
    if isinstance(v, _FrozenDict):
        return ir.DictAttr.get({k: _ir_attribute(x) for k, x in v})
    if isinstance(v, _HashableArray):
        v = v.val
    if isinstance(v, (str, bytes)):
        return ir.StringAttr.get(v)
    if isinstance(v, (list, tuple)):
        return ir.ArrayAttr.get([_ir_attribute(x) for x in v])
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return ir.TypeAttr.get(mlir.dtype_to_ir_type(np.dtype(v)))
    if isinstance(v, (bool, int, float, complex)):
        v = np.array(v, {bool: np.bool_, int: np.int64, float: np.float64,
                         complex: np.complex128}[type(v)])
    v = np.asarray(v)
    t = mlir.dtype_to_ir_type(v.dtype)
    if v.ndim:
        return ir.DenseElementsAttr.get(np.ascontiguousarray(v), type=t, shape=v.shape)
    if isinstance(t, ir.IntegerType):
        return ir.IntegerAttr.get(t, int(v))
    if isinstance(t, ir.FloatType):
        return ir.FloatAttr.get(t, float(v))
    raise TypeError(f"ffi_call: no attribute for the value {v!r} of type {v.dtype}")


# JAX: jax/_src/ffi.py ffi_call_lowering (through build_ffi_lowering_function, custom_call)
def _ffi_call_lowering(ctx, *operands, target_name, has_side_effect, input_layouts,
                       output_layouts, input_output_aliases, custom_call_api_version,
                       legacy_backend_config, attributes, **_):
    ir, hlo = mlir.ir, mlir.hlo
    if custom_call_api_version >= 4:
        # the typed FFI: attributes in `mhlo.backend_config`, which XLA reads with version 1
        backend_config, api_version = "", 1
    elif attributes:
        raise ValueError("The use of ffi_call attributes requires a custom call API version "
                         f"of at least 4; got api_version={custom_call_api_version}.")
    else:
        backend_config, api_version = legacy_backend_config or "", custom_call_api_version
    n_out = len(ctx.avals_out)

    def layouts(ls):
        return ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(
            np.atleast_1d(np.asarray(lay, np.int64)), type=ir.IndexType.get()) for lay in ls])

    attrs = dict(
        call_target_name=ir.StringAttr.get(target_name),
        has_side_effect=ir.BoolAttr.get(has_side_effect),
        backend_config=ir.StringAttr.get(backend_config),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), api_version),
        called_computations=ir.ArrayAttr.get([]),
        output_operand_aliases=ir.ArrayAttr.get([hlo.OutputOperandAlias.get(
            output_tuple_indices=[o] if n_out > 1 else [], operand_index=i,
            operand_tuple_indices=[]) for i, o in input_output_aliases]),
        operand_layouts=layouts(input_layouts),
        result_layouts=layouts(output_layouts),
    )
    op = hlo.CustomCallOp.build_generic(
        results=[mlir.aval_to_ir_type(a) for a in ctx.avals_out], operands=list(operands),
        attributes=attrs)
    if custom_call_api_version >= 4:
        op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get(
            {k: _ir_attribute(v) for k, v in attributes})
    return list(op.results)


ffi_call_p = core.Primitive("ffi_call")
ffi_call_p.multiple_results = True
ffi_call_p.pp_param_formatters = {"result_avals": _pp_avals}
ffi_call_p.def_impl(_ffi_call_impl)
ffi_call_p.def_effectful_abstract_eval(_ffi_call_abstract_eval)
ad.primitive_jvps[ffi_call_p] = _ffi_call_jvp
batching.primitive_batchers[ffi_call_p] = _ffi_call_batch_rule
mlir.register_lowering(ffi_call_p, _ffi_call_lowering)
