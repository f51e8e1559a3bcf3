"""The eager path: how a primitive runs when no transformation is active.

`core.EvalTrace.process_primitive` hands every primitive to `apply_primitive`. A primitive with
a NumPy rule (`Primitive.impl`, registered with `def_impl`) runs through a small callable built
once per (primitive, input avals, params) by `primitive_callable`: the abstract-evaluation rule
runs when that callable is built (so its checks and error messages cost nothing on later
calls), and each call converts the operands to NumPy, runs the rule, and wraps the result as
an `Array` of the output aval, committed if an operand was. A higher-order primitive (one whose
params hold jaxprs: jit, cond, scan, while, remat, custom_jvp/vjp) evaluates its jaxprs by
binding their equations, so its impl gets the concrete minijax values as they are.

Mirrors jax/_src/dispatch.py (`apply_primitive`, `xla_primitive_callable`) — differs: JAX
compiles each primitive with XLA and runs it through jit's dispatch; minijax runs NumPy on the
host, which for small arrays costs a fraction of a compiled call. Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Callable, Sequence

import numpy as np

from minijax import core
from minijax.array import Array
from minijax.config import config

# (primitive, x64, avals..., params...) -> callable on the concrete operands. Bounded: an
# eager loop over many shapes empties it rather than growing without end.
_callables: dict[tuple, Callable] = {}
_MAX_CALLABLES = 4096


def _eager_aval(x) -> core.ShapedArray:
    if isinstance(x, core.Tracer):  # JAX: jax/_src/core.py check_eval_args
        raise core._escaped_error(x)
    return core.get_aval(x)


# JAX: jax/_src/dispatch.py apply_primitive
def apply_primitive(prim: core.Primitive, args: Sequence[Any], params: dict):
    """Evaluate `prim` on concrete `args` (Arrays, NumPy values, Python scalars).

    Returns an `Array` (a list of them for multiple results). Raises what the primitive's
    abstract-evaluation rule raises for bad operands, and UnexpectedTracerError for a tracer
    whose transformation has ended.
    """
    # the hot path: the primitive's last signature again (the same aval objects, which eager
    # results share: each callable gives all its results one aval), run inline without a key
    # or a dict lookup. Arrays holding NumPy values only; anything else takes the path below.
    n = len(args)
    if n == 2:
        x, y = args
        if type(x) is Array and type(y) is Array:
            last = prim._eager_last
            if last is not None and last[0] is x.aval and last[1] is y.aval \
                    and last[2] == params and last[3] is config.jax_enable_x64:
                xv, yv = x._npy, y._npy
                if xv is not None and yv is not None:
                    val = last[4](xv, yv)
                    if type(val) is not np.ndarray or val.dtype is not last[6]:
                        val = np.asarray(val, dtype=last[6])
                    return Array(last[5], val, None, x._committed or y._committed)
            avals = (x.aval, y.aval)
        else:
            avals = [x.aval if type(x) is Array else _eager_aval(x) for x in args]
    elif n == 1 and type(args[0]) is Array:
        x = args[0]
        last = prim._eager_last
        if last is not None and last[0] is x.aval and last[1] is None and last[2] == params \
                and last[3] is config.jax_enable_x64 and x._npy is not None:
            val = last[4](x._npy)
            if type(val) is not np.ndarray or val.dtype is not last[6]:
                val = np.asarray(val, dtype=last[6])
            return Array(last[5], val, None, x._committed)
        avals = (x.aval,)
    else:
        avals = [x.aval if type(x) is Array else _eager_aval(x) for x in args]
    try:
        key = (prim, config.jax_enable_x64, *avals, *params.items()) if params else \
            (prim, config.jax_enable_x64, *avals)
        run = _callables.get(key)
    except TypeError:  # an unhashable param: no caching
        key, run = None, None
    if run is None:
        if any(core.jaxprs_in_param(p) for p in params.values()):
            # higher-order: the impl binds the equations of its jaxprs on the values as they
            # are (no caching: the key holds jaxprs, which must not be kept alive here)
            return prim.impl(*args, **params)
        run = primitive_callable(prim, avals, params)
        if key is not None:
            if len(_callables) >= _MAX_CALLABLES:
                _callables.clear()
            _callables[key] = run
    out = run(args)
    if key is not None and 0 < n <= 2 and hasattr(run, "fast"):
        # remember this signature for the hot path above (after a first successful call:
        # the result's shape is checked; one result, not laid out on a mesh: `run.fast`)
        prim._eager_last = (avals[0], avals[1] if n == 2 else None, dict(params),
                            config.jax_enable_x64, *run.fast)
    return out


# JAX: jax/_src/dispatch.py xla_primitive_callable — differs: a NumPy call, not an executable
def primitive_callable(prim: core.Primitive, avals: Sequence[core.ShapedArray],
                       params: dict) -> Callable:
    """A function of concrete operands of types `avals` that runs `prim`'s NumPy rule and
    returns Arrays; the abstract-evaluation rule runs here, once (errors are raised here)."""
    out = prim.abstract_eval(*avals, **params)
    impl = prim.impl
    if params:
        impl = functools.partial(impl, **params)
    in_avals = tuple(avals)

    def numpy_args(args):
        # the common case, Arrays that hold NumPy values, in one pass; anything else below
        vals, committed = [], False
        for x in args:
            if type(x) is not Array or x._npy is None:
                return _numpy_args_slow(args, in_avals)
            vals.append(x._npy)
            if x._committed:  # as in JAX, an op on a committed array is committed
                committed = True
        return vals, committed

    if prim.multiple_results:
        out_avals = tuple(out)

        def run_multiple(args):
            vals, committed = numpy_args(args)
            outs = impl(*vals)
            if len(outs) != len(out_avals):
                raise AssertionError(f"{prim.name}: impl gave {len(outs)} results, abstract "
                                     f"evaluation {len(out_avals)}")
            return [wrap_numpy(o, a, committed) for o, a in zip(outs, out_avals)]
        if any(a.sharding is not None for a in out_avals):
            return _laid_out(run_multiple, True)
        return run_multiple

    out_aval, dtype, shape = out, out.dtype, out.shape

    def run(args):
        # numpy_args, unrolled for one and two operands: this is the eager hot path
        if len(args) == 2:
            x, y = args
            if type(x) is Array and type(y) is Array and x._npy is not None \
                    and y._npy is not None:
                val = impl(x._npy, y._npy)
                committed = x._committed or y._committed
            else:
                vals, committed = _numpy_args_slow(args, in_avals)
                val = impl(*vals)
        elif len(args) == 1 and type(args[0]) is Array and args[0]._npy is not None:
            val = impl(args[0]._npy)
            committed = args[0]._committed
        else:
            vals, committed = numpy_args(args)
            val = impl(*vals)
        if type(val) is not np.ndarray or val.dtype is not dtype:  # NumPy scalars, upcasts
            val = np.asarray(val, dtype=dtype)
        if not shape_checked:
            # NumPy's result shape depends only on the operands' shapes and the params: the
            # first call checks it, for every later call of this callable
            if val.shape != shape:
                raise AssertionError(f"{prim.name}: impl produced shape {val.shape}, "
                                     f"expected {out_aval.str_short()}")
            shape_checked.append(True)
        return Array(out_aval, val, None, committed)
    shape_checked: list[bool] = []
    if out_aval.sharding is not None:  # laid out on a mesh: not for the inline hot path
        return _laid_out(run, False)
    run.fast = (impl, out_aval, dtype)  # what apply_primitive's hot path runs inline
    return run


def _laid_out(run: Callable, multiple: bool) -> Callable:
    """Sharding in types, eagerly: a result whose aval carries a sharding is laid out that
    way on the mesh of the operands (or the mesh in context). JAX runs such an op as a
    small program on the mesh; minijax computes it with NumPy and places the result."""
    from minijax import sharding as msh

    def placed(args):
        meshes = {x._sharding.mesh.abstract_mesh: x._sharding.mesh for x in args
                  if type(x) is Array and isinstance(x._sharding, msh.NamedSharding)}
        outs = run(args)
        res = []
        for o in (outs if multiple else [outs]):
            s = o.aval.sharding
            mesh = None if s is None else meshes.get(s.mesh, msh.get_concrete_mesh())
            if mesh is not None:
                o = Array(o.aval, o._npy, None, True, msh.NamedSharding(mesh, s.spec))
            res.append(o)
        return res if multiple else res[0]
    return placed


def _numpy_args_slow(args, in_avals) -> tuple[list, bool]:
    vals, committed = [], False
    for x, a in zip(args, in_avals):
        if type(x) is Array:
            committed = committed or x._committed
            vals.append(x._value())  # fetched from the device (once: the value is cached)
        else:
            vals.append(core.to_numpy(x, a))
    return vals, committed


def wrap_numpy(val, aval: core.ShapedArray, committed: bool = False) -> Array:
    """An impl's result (a NumPy array or scalar) as an Array of exactly `aval`."""
    if type(val) is not np.ndarray or val.dtype != aval.dtype:
        val = np.asarray(val, dtype=aval.dtype)
    if val.shape != aval.shape:
        raise AssertionError(f"impl produced shape {val.shape}, expected {aval.str_short()}")
    return Array(aval, val, None, committed)


# ---------------------------------------------------------------------------------------------
# device_put inside a transformation (chapters/24-memory-offloading.md)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py MemorySpace — differs: lives here, next to device_put_p
class MemorySpace(enum.Enum):
    """A `device_put` target that names only a memory space: the value stays on its devices,
    in that memory. What remat's offloading policies move residuals with."""
    Device = "device"
    Host = "pinned_host"

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    @classmethod
    def of_kind(cls, kind: str) -> "MemorySpace":
        """The space of a memory kind ("device"; "pinned_host" or "unpinned_host": Host)."""
        return cls.Device if kind == "device" else cls.Host


# JAX: jax/_src/dispatch.py device_put_p — differs: the avals do not record the memory space
# (JAX's `f32<host>[...]`); on the CPU backend, as in JAX, the lowering is the identity
device_put_p = core.Primitive("device_put")
device_put_p.multiple_results = True


def _device_put_impl(*xs, devices, srcs):
    from minijax import api
    outs = []
    for x, d in zip(xs, devices):
        if isinstance(d, MemorySpace):
            sharding = x.sharding if isinstance(x, Array) else None
            if sharding is None:
                from minijax import sharding as msh
                from minijax.compiler import default_device
                sharding = msh.SingleDeviceSharding(default_device())
            d = sharding.with_memory_kind(d.value)
        outs.append(api.device_put(x, d))
    return outs


def _device_put_abstract_eval(*avals, devices, srcs):
    return list(avals)


def _device_put_jvp(primals, tangents, *, devices, srcs):
    from minijax.ad_util import Zero
    outs = device_put_p.bind(*primals, devices=devices, srcs=srcs)
    nz = [(i, t) for i, t in enumerate(tangents) if not isinstance(t, Zero)]
    t_outs = device_put_p.bind(*[t for _, t in nz], devices=tuple(devices[i] for i, _ in nz),
                               srcs=tuple(srcs[i] for i, _ in nz)) if nz else []
    it = iter(t_outs)
    return outs, [t if isinstance(t, Zero) else next(it) for t in tangents]


def _device_put_transpose(cts, *xs, devices, srcs):
    # back to where each value came from; a None source means "leave it where it is"
    from minijax.ad_util import Zero
    return [ct if isinstance(ct, Zero) or s is None else
            device_put_p.bind(ct, devices=(s,), srcs=(d,))[0]
            for ct, d, s in zip(cts, devices, srcs)]


def _device_put_batch_rule(vals, dims, *, devices, srcs):
    return device_put_p.bind(*vals, devices=devices, srcs=srcs), list(dims)


def _device_put_lowering(ctx, *xs, devices, srcs):
    return list(xs)


def _register_device_put() -> None:
    from minijax.interpreters import ad, batching, mlir
    device_put_p.def_impl(_device_put_impl)
    device_put_p.def_abstract_eval(_device_put_abstract_eval)
    ad.primitive_jvps[device_put_p] = _device_put_jvp
    ad.primitive_transposes[device_put_p] = _device_put_transpose
    batching.primitive_batchers[device_put_p] = _device_put_batch_rule
    mlir.register_lowering(device_put_p, _device_put_lowering)


_register_device_put()
