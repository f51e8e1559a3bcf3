"""The eager path: how a primitive runs when no transformation is active.

`core.EvalTrace.process_primitive` hands every primitive to `apply_primitive`. A primitive with
a NumPy rule (`Primitive.impl`, registered with `def_impl`) runs through a small callable built
once per (primitive, input avals, params) by `primitive_callable`: the abstract-evaluation rule
runs when that callable is built (so its checks and error messages cost nothing on later
calls), the NumPy function it calls is chosen then too (`specialized_impls`: e.g. dot_general
with plain matrix-product dimension numbers calls NumPy's `dot` itself), and each call converts
the operands to NumPy, runs that function and wraps the result as an `Array` of the output
aval, committed if an operand was. A higher-order primitive (one whose params hold jaxprs: jit,
cond, scan, while, remat, custom_jvp/vjp) evaluates its jaxprs by binding their equations, so
its impl gets the concrete minijax values as they are.

Mirrors jax/_src/dispatch.py (`apply_primitive`, `xla_primitive_callable`) — differs: JAX
compiles each primitive with XLA and runs it through jit's dispatch; minijax runs NumPy on the
host, which for small arrays costs a fraction of a compiled call. Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import enum
import functools
import inspect
import warnings
from typing import Any, Callable, Sequence

import numpy as np
from numpy._core._ufunc_config import _extobj_contextvar as _np_errors

from minijax import array as array_mod, compiler, core, dtypes, xla_bridge
from minijax.ad_util import Zero
from minijax.array import Array
from minijax.config import config
from minijax.interpreters import ad, batching, mlir, pxla
from minijax.mesh import get_concrete_mesh
from minijax.named_sharding import NamedSharding, Sharding
from minijax.partition_spec import _Unconstrained
from minijax.pjit import jit, sharding_constraint_p
from minijax.sharding_impls import SingleDeviceSharding
from minijax.tree_util import tree_map
from minijax.util import BoundedCache
from minijax.xla_bridge import default_device

# (primitive, eager context, avals, params...) -> callable on the concrete operands. Bounded:
# an eager loop over many shapes empties it rather than growing without end.
_callables: BoundedCache = BoundedCache(4096)

# XLA computes NaN, inf and wrapped integers without a word, and so does JAX; NumPy warns
# (`invalid value encountered in log`). The eager impls are minijax's NumPy calls, so the
# warnings NumPy attributes to minijax's own modules are dropped: one filter, nothing on the
# hot path (an `np.errstate` around each op would cost a microsecond). NaNs are found with
# `jax_debug_nans` (chapters/15-debugging.md), as in JAX.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"minijax(\.|$)")

# primitive -> rule(*avals, **params) giving the NumPy function of the operands alone that
# computes the primitive for exactly those avals and params, or None for the general impl.
specialized_impls: dict[core.Primitive, Callable] = {}


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
    # The hot path: the primitive's last eager signature again (a loop of one operation hits
    # it every time), for one or two Arrays: the NumPy function runs inline on their NumPy
    # values (or a one-primitive XLA program on the Arrays), with no key to build or hash.
    # Tuple and dict equality check identity first, and eager results share their callable's
    # output aval, so the test is a few comparisons.
    # `prim._eager_last` is the tuple `_last_call` builds; unpacking it into names is also the
    # fastest way to read it (faster than indexing, and a NamedTuple's fields cost more).
    last = prim._eager_last
    n = len(args)
    if n == 2:
        x, y = args
        if type(x) is Array and type(y) is Array:
            avals = (x.aval, y.aval)
            xv, yv = x._npy, y._npy
            if last is not None and x._sharding is None and y._sharding is None:
                last_avals, last_params, context, fn, out_aval, dtype = last
                if last_avals == avals and last_params == params \
                        and context is config.eager_context:
                    if dtype is _ON_XLA:  # a one-primitive XLA program: it takes the Arrays
                        return fn(x, y)
                    if xv is not None and yv is not None:
                        val = fn(xv, yv)
                        if dtype is not None:  # the impl gives NumPy scalars or another dtype
                            val = np.asarray(val, dtype=dtype)
                        return Array(out_aval, val, None, x._committed or y._committed)
        else:
            avals = tuple(map(_eager_aval, args))
    elif n == 1 and type(args[0]) is Array:
        x = args[0]
        avals = (x.aval,)
        xv = x._npy
        if last is not None and x._sharding is None:
            last_avals, last_params, context, fn, out_aval, dtype = last
            if last_avals == avals and last_params == params \
                    and context is config.eager_context:
                if dtype is _ON_XLA:
                    return fn(x)
                if xv is not None:
                    val = fn(xv)
                    if dtype is not None:
                        val = np.asarray(val, dtype=dtype)
                    return Array(out_aval, val, None, x._committed)
    else:
        avals = tuple(map(_eager_aval, args))
    return _apply_by_signature(prim, args, avals, params)


# JAX: jax/_src/dispatch.py apply_primitive (its xla_primitive_callable lookup)
def _apply_by_signature(prim: core.Primitive, args: Sequence[Any], avals: tuple,
                        params: dict):
    """`apply_primitive` past its hot path: the callable cached per (primitive, eager options,
    avals, placement, params), built on a miss, run; its signature kept for the hot path."""
    if prim.user_defined:
        return _apply_user_primitive(prim, args, avals, params)
    if prim is device_put_p:  # its impl gets the Arrays (as JAX's): buffers copied, not fetched
        return _device_put_impl(*args, **params)
    # operands on an Auto mesh run on the mesh: their avals alone do not say so, the key must
    # (but a sharding constraint's impl lays its result out exactly as asked, as JAX's runs
    # `jit(out_shardings=...)`: its type then follows, where a mesh program would keep it;
    # one with P.UNCONSTRAINED (vmap's) is a mesh program in JAX too)
    on_mesh = array_mod.sharded_arrays_made and (
        prim is not sharding_constraint_p or any(
            isinstance(p, _Unconstrained) for p in params["sharding"].spec)) and \
        _on_auto_mesh(args)
    on_device = not on_mesh and _default_platform != _CPU and _eager_on_device(prim, args)
    try:
        key = (prim, config.eager_context, avals, on_mesh, on_device, *params.items())
        run = _callables.get(key)
    except TypeError:  # an unhashable param: no caching
        key, run = None, None
    if run is None:
        # (a scatter's `update_jaxpr` names its combiner, which the numpy impl applies itself)
        # (call_exported's impl compiles for its arguments' layouts: it gets the Arrays too)
        if prim.impl_takes_arrays or any(core.jaxprs_in_param(p) for k, p in params.items()
                                         if k not in getattr(prim, "combiner_params", ())):
            return _apply_higher_order(prim, args, params)
        if on_mesh:
            return _mesh_callable(prim, key, params, len(args))(*args)
        if on_device:
            prim.abstract_eval(*avals, **params)  # bad operands are refused as on the host
            run = _checked(prim, _xla_callable(prim, avals, params))
        else:
            run = _checked(prim, primitive_callable(prim, avals, params))
        if key is not None:
            _callables.put(key, run)
    out = run(*args)
    fast = getattr(run, "fast", None)
    if key is not None and fast is not None and 0 < len(args) <= 2:
        # remembered after a call succeeded, so the result's shape has been checked; `fast`
        # is there for one result not laid out on a mesh, without debug checks
        prim._eager_last = _last_call(avals, params, *fast)
    return out


def _apply_higher_order(prim: core.Primitive, args: Sequence[Any], params: dict):
    """Params holding jaxprs: the impl binds their equations (no key: it would keep them)."""
    out = prim.impl(*args, **params)
    if config.jax_debug_nans or config.jax_debug_infs:
        core.check_special(prim.name, out if prim.multiple_results else [out])
    return out


# JAX: jax/_src/core.py EvalTrace.process_primitive (it calls the impl, never the abstract
# eval) — differs: the impl gets NumPy values and its results are wrapped as Arrays, as for
# minijax's own primitives
def _apply_user_primitive(prim: core.Primitive, args, avals, params: dict):
    """A primitive defined outside minijax, evaluated eagerly: its impl alone runs, so that a
    primitive with no abstract evaluation rule yet can be called, as in JAX."""
    vals, committed = _numpy_args(args, avals)
    out = prim.impl(*vals, **params)

    def wrap(o):
        o = np.asarray(o)
        aval = core.get_aval(o)
        return wrap_numpy(core.to_numpy(o, aval), aval, committed)
    return [wrap(o) for o in out] if prim.multiple_results else wrap(out)


def _last_call(avals: tuple, params: dict, fn: Callable, out_aval: core.ShapedArray,
               dtype) -> tuple:
    """What apply_primitive's hot path checks and runs for a primitive's last eager call: (in
    avals, params, eager context, NumPy function of the operands, out aval, the dtype to
    convert its results to or None)."""
    return (avals, dict(params), config.eager_context, fn, out_aval, dtype)


core.eager_apply = apply_primitive  # EvalTrace.process_primitive hands each primitive here


# JAX: jax/_src/dispatch.py apply_primitive (every eager op a one-primitive executable on
# the default device) — differs: only where that device is not a CPU. On a CPU, NumPy gives
# XLA's bits for most primitives at a third of the cost (see XLA_EAGER_PRIMITIVES); on a TPU
# it would copy each operand to the host and back and compute bfloat16 in software (`x @ y`
# on two 4096 x 4096 bf16 arrays: minutes instead of a millisecond), so there every eager
# operation runs on the device, as in JAX, and its result stays there.
_HOST_PRIMITIVES = frozenset({"device_put", "pure_callback", "io_callback", "debug_callback"})
_default_platform: list = []  # the default device's platform, asked once
_CPU = ["cpu"]


def _eager_on_device(prim: core.Primitive, args) -> bool:
    """Whether `prim` runs eagerly on XLA: the default device is not a CPU (a TPU, a GPU) and
    `prim` lowers there; its results then stay in that device's memory."""
    if not _default_platform:
        _default_platform.append(default_device().platform)
    platform = _default_platform[0]
    return platform != "cpu" and prim.name not in _HOST_PRIMITIVES and mlir.has_lowering(
        prim, platform)


def _on_auto_mesh(args) -> bool:
    """Whether an operand is laid out over several devices not all of whose layout is in its
    type (a mesh with Auto axes): its result's layout is then XLA's choice, so the op runs on
    the mesh; or is committed to a device other than the default one: the op runs there."""
    for x in args:
        s = type(x) is Array and x._sharding
        if not s:
            continue
        if isinstance(s, SingleDeviceSharding):
            if s._device != default_device() and s.memory_kind == "device":
                return True  # committed to another device: the op runs there, as in JAX
        elif s.num_devices > 1 and (x.aval.sharding is None
                                    or not s.mesh.are_all_axes_explicit):
            return True
    return False


# JAX: jax/_src/dispatch.py apply_primitive (its jit of the one primitive) — minijax does it
# only for operands on an Auto mesh, so that `x + 1` keeps x's layout as in JAX, or on another
# device, so that the result stays there
_mesh_callables: BoundedCache = BoundedCache(4096)


def _mesh_callable(prim: core.Primitive, key, params: dict, nargs: int) -> Callable:
    """`prim` with `params` as a jitted function: compiled for the operands' mesh, its
    results laid out as XLA's sharding propagation decides (cached per signature)."""
    run = _mesh_callables.get(key) if key is not None else None
    if run is None:
        def op(*args):
            return prim.bind(*args, **params)
        # named as JAX's errors name an eager op's operands ("argument x of add")
        op.__name__ = op.__qualname__ = prim.name
        op.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in "xy"[:nargs]])
        run = jit(op)
        if key is not None:
            _mesh_callables.put(key, run)
    return run


def _checked(prim: core.Primitive, run: Callable) -> Callable:
    """`run`, checking its results for NaNs / infinities when jax_debug_nans / _infs are on
    (the callables are keyed on those options: they are decided here, not on every call)."""
    if not (config.jax_debug_nans or config.jax_debug_infs):
        return run

    def checked(*args):
        out = run(*args)
        core.check_special(prim.name, out if prim.multiple_results else [out])
        return out
    return checked


# Measured (tests/eager_accuracy_test.py sweeps every eager primitive on float32, bfloat16 and
# int32 operands, eager against jit and JAX bit for bit; docs/conformance.md has its table): on
# floating-point operands, the NumPy rules of these primitives round differently from XLA's
# kernels — transcendental functions use other approximations (sin: 12% of float32 results 1
# ulp apart), sums, products, matmuls, convolutions and factorizations add in another order (a
# float32 column sum of 2,000,000 rows: relative error 2.4e-5 for NumPy's running sum, 4.8e-8
# for XLA's; an 8 x 8 matmul differs in the last bit). Eagerly they run on XLA, as every
# primitive does in JAX, so eager results are jit's. The other rules (add, mul, div, sqrt, max,
# comparisons, casts, moves of data, scatters adding in update order...) give XLA's bits, and
# stay on NumPy, 3-10x cheaper per call.
XLA_EAGER_PRIMITIVES = frozenset({
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "exp", "exp2", "expm1", "log", "log1p", "logistic", "pow", "integer_pow",
    "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "lgamma", "digamma", "reduce_sum",
    "reduce_prod", "cumsum", "cumprod", "cumlogsumexp", "reduce_window_sum",
    "dot_general", "ragged_dot_general", "conv_general_dilated",
    "fft", "cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"})


def _runs_on_xla(prim: core.Primitive, avals: Sequence[core.ShapedArray]) -> bool:
    return prim.name in XLA_EAGER_PRIMITIVES and all(a.sharding is None for a in avals) and any(
        dtypes.is_float(a.dtype) for a in avals)  # bfloat16 too, which NumPy calls no float


# JAX: jax/_src/dispatch.py xla_primitive_callable
def _xla_callable(prim: core.Primitive, avals: Sequence[core.ShapedArray],
                  params: dict) -> Callable:
    """`prim` with `params` compiled alone by XLA for operands of types `avals`: a function
    of the operands returning Arrays (their values stay on the device until read)."""
    def op(*args):
        return prim.bind(*args, **params)
    op.__name__ = op.__qualname__ = prim.name
    structs = [core.ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in avals]
    execute = jit(op, keep_unused=True).lower(*structs).compile()._executor  # every operand
    execute.jaxpr = None  # jax_debug_nans: one primitive, nothing to run again op by op

    def run(*args):
        try:
            outs = execute(args)
        except FloatingPointError as e:  # named as an eager primitive, not as a jit
            raise FloatingPointError(str(e).replace(f"jit({prim.name})", prim.name)) from None
        return outs if prim.multiple_results else outs[0]
    if type(execute) is not pxla.ExecuteReplicated or execute.handlers is None or \
            execute.has_effects or execute.donated is not None or prim.multiple_results or \
            not config._plain_dispatch:
        return run
    # The common case, run inline (measured: 1 us of the ~9 an eager `dot` costs): one result,
    # operands that are Arrays on the default device (their buffers as they are, NumPy values
    # transferred once and kept), no debug checks. Anything else goes through the executor.
    executable, handlers, (out_aval,) = execute.executable, execute.handlers, execute.out_avals

    def run_plain(*args):
        if not config._plain_dispatch:
            return run(*args)
        committed = False
        for x in args:
            if type(x) is not Array or x._sharding is not None:
                return run(*args)
            committed = committed or x._committed
        bufs = [x._buf if x._buf is not None else x.device_buffer() for x in args]
        out, = executable.execute_sharded(bufs).consume_with_handlers(handlers)
        return Array(out_aval, None, out, committed)
    run_plain.fast = (run_plain, out_aval, _ON_XLA)  # apply_primitive's hot path calls it
    return run_plain


_ON_XLA = object()  # in a hot-path entry: its function takes the Arrays and returns the result


# JAX: jax/_src/dispatch.py xla_primitive_callable — differs: a NumPy call, not an executable,
# but for the primitives whose NumPy rules round otherwise than XLA (XLA_EAGER_PRIMITIVES)
def primitive_callable(prim: core.Primitive, avals: Sequence[core.ShapedArray],
                       params: dict) -> Callable:
    """A function of concrete operands of types `avals` that runs `prim`'s NumPy rule and
    returns Arrays; the abstract-evaluation rule runs here, once (errors are raised here)."""
    out = prim.abstract_eval(*avals, **params)
    if _runs_on_xla(prim, avals):
        return _xla_callable(prim, avals, params)
    rule = specialized_impls.get(prim)
    impl = rule(*avals, **params) if rule is not None else None
    if impl is None:
        impl = functools.partial(prim.impl, **params) if params else prim.impl
    impl = _as_xla(impl, _can_warn(prim, avals, out))
    in_avals = tuple(avals)

    if prim.multiple_results:
        out_avals = tuple(out)

        def run_multiple(*args):
            vals, committed = _numpy_args(args, in_avals)
            outs = impl(*vals)
            if len(outs) != len(out_avals):
                raise AssertionError(f"{prim.name}: impl gave {len(outs)} results, abstract "
                                     f"evaluation {len(out_avals)}")
            return [wrap_numpy(o, a, committed) for o, a in zip(outs, out_avals)]
        if any(a.sharding is not None for a in out_avals):
            return _laid_out(run_multiple, True)
        return run_multiple

    out_aval, dtype, shape = out, out.dtype, out.shape
    checked = False

    def run(*args):
        nonlocal checked
        vals, committed = _numpy_args(args, in_avals)
        val = impl(*vals)
        if type(val) is Array:  # an impl that places its result (a sharding constraint)
            return val
        exact = type(val) is np.ndarray and val.dtype is dtype
        if not exact:  # NumPy scalars, upcasts
            val = np.asarray(val, dtype=dtype)
        if not checked:
            # NumPy's result type and shape depend only on the operands' types and the
            # params: the first call checks them, for every later call of this signature,
            # and leaves what apply_primitive's hot path runs inline (the dtype to convert
            # to, or None when the impl's results need no conversion)
            if val.shape != shape:
                raise AssertionError(f"{prim.name}: impl produced shape {val.shape}, "
                                     f"expected {out_aval.str_short()}")
            checked = True
            if out_aval.sharding is None:  # laid out on a mesh: not for the hot path
                run.fast = (impl, out_aval, None if exact else dtype)
        return Array(out_aval, val, None, committed)
    if out_aval.sharding is not None:
        return _laid_out(run, False)
    return run


# np.errstate(all="ignore") builds its settings on every entry (about 1 us, as much as an eager
# add): the eager rules that can warn set NumPy's own context variable to settings built once
with np.errstate(all="ignore"):
    _IGNORE_ERRORS = _np_errors.get()


def _can_warn(prim: core.Primitive, avals: Sequence[core.ShapedArray], out) -> bool:
    """Whether NumPy may warn computing `prim` on `avals`: floating-point values (overflow,
    inf - inf, 0/0, NaN to an integer) or an integer division by zero."""
    return prim.name in ("div", "rem") or not all(
        np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_ for a in
        (*avals, *(out if prim.multiple_results else [out])) if isinstance(a, core.ShapedArray))


def _as_xla(impl: Callable, quiet: bool) -> Callable:
    """`impl` failing as XLA's kernels do: with `quiet`, NumPy's floating-point warnings are
    off (`1/0`, `log(0)`, a float16 overflow give inf/nan silently, so `python -W error` sees
    JAX's behaviour), and an allocation that cannot fit raises JAX's RuntimeError saying
    RESOURCE_EXHAUSTED (minijax.errors.JaxRuntimeError), not NumPy's MemoryError."""
    def run(*vals):
        token = _np_errors.set(_IGNORE_ERRORS) if quiet else None
        try:
            return impl(*vals)
        except MemoryError as e:
            # local: minijax/errors.py imports core, which imports this module
            from minijax.errors import resource_exhausted
            raise resource_exhausted(e) from None
        finally:
            if token is not None:
                _np_errors.reset(token)
    return run


def _laid_out(run: Callable, multiple: bool) -> Callable:
    """Sharding in types, eagerly: a result whose aval carries a sharding is laid out that
    way on the mesh of the operands (or the mesh in context). JAX runs such an op as a
    small program on the mesh; minijax computes it with NumPy and places the result."""

    def placed(*args):
        meshes = {x._sharding.mesh.abstract_mesh: x._sharding.mesh for x in args
                  if type(x) is Array and isinstance(x._sharding, NamedSharding)}
        outs = run(*args)
        res = []
        for o in (outs if multiple else [outs]):
            s = o.aval.sharding
            mesh = None if s is None else meshes.get(s.mesh, get_concrete_mesh())
            if mesh is not None and o._sharding is None:  # else placed by its impl already
                o = Array(o.aval, o._npy, None, True, NamedSharding(mesh, s.spec))
            res.append(o)
        return res if multiple else res[0]
    return placed


def _numpy_args(args, in_avals) -> tuple[list, bool]:
    vals, committed = [], False
    for x, a in zip(args, in_avals):
        if type(x) is Array:
            committed = committed or x._committed
            vals.append(x._value())  # fetched from the device (once: the value is cached)
        else:
            vals.append(core.to_numpy(x, a))
    return vals, committed


def wrap_numpy(val, aval: core.ShapedArray, committed: bool = False) -> Array:
    """An impl's result (a NumPy array or scalar) as an Array of exactly `aval`; an Array
    (placed by its impl) as it is."""
    if type(val) is Array and val.aval.shape == aval.shape and val.dtype == aval.dtype:
        return val
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


# JAX: jax/_src/dispatch.py _device_put_impl — differs: a pytree, placed leaf by leaf
def place(x, device):
    """`device_put(x, device)` of concrete values (no tracers) and a device, a sharding or
    None: returns minijax Arrays, committed unless `device` is None (a minijax Array then
    comes back as it is). Raises what `compiler.device_put_sharded_tree` raises."""
    if device is not None and not isinstance(device, Sharding) \
            and not xla_bridge.plain_default(device):
        device = SingleDeviceSharding(device)
    if isinstance(device, NamedSharding) or (
            isinstance(device, SingleDeviceSharding) and (
                device.memory_kind != "device" or not xla_bridge.plain_default(device._device))):
        # blocks, another memory kind or another device
        return compiler.device_put_sharded_tree(x, device)
    if isinstance(device, SingleDeviceSharding):
        device = device._device

    def put(v):
        if isinstance(v, Array):
            if device is None:
                return v
            if v._sharding is not None and v._sharding.memory_kind != "device":
                # back from host memory: a copy, buffer to buffer where the blocks allow
                buf = compiler.copy_buffer(v, SingleDeviceSharding(device))
                if buf is None:
                    buf = compiler.device_put(v._value())
                return Array(v.aval, None, buf, committed=True)
            buf = v.device_buffer()
            arr = Array(v.aval, v._npy, buf, committed=True)
        else:
            aval = core.get_aval(v)
            compiler.guard_host_to_device(aval, None, explicit=True)
            arr = Array(aval, npy=core.to_numpy(v, aval), committed=device is not None)
        arr.device_buffer()
        return arr
    return tree_map(put, x)


# JAX: jax/_src/dispatch.py device_put_p — differs: the avals do not record the memory space
# (JAX's `f32<host>[...]`); on the CPU backend, as in JAX, the lowering is the identity
device_put_p = core.Primitive("device_put")
device_put_p.multiple_results = True


def _device_put_impl(*xs, devices, srcs):
    outs = []
    for x, d in zip(xs, devices):
        if isinstance(d, MemorySpace):
            sharding = x.sharding if isinstance(x, Array) else None
            if sharding is None:
                sharding = SingleDeviceSharding(default_device())
            d = sharding.with_memory_kind(d.value)
        outs.append(place(x, d))
    return outs


def _device_put_abstract_eval(*avals, devices, srcs):
    return list(avals)


def _device_put_jvp(primals, tangents, *, devices, srcs):
    outs = device_put_p.bind(*primals, devices=devices, srcs=srcs)
    nz = [(i, t) for i, t in enumerate(tangents) if not isinstance(t, Zero)]
    t_outs = device_put_p.bind(*[t for _, t in nz], devices=tuple(devices[i] for i, _ in nz),
                               srcs=tuple(srcs[i] for i, _ in nz)) if nz else []
    it = iter(t_outs)
    return outs, [t if isinstance(t, Zero) else next(it) for t in tangents]


def _device_put_transpose(cts, *xs, devices, srcs):
    # back to where each value came from; a None source means "leave it where it is"
    return [ct if isinstance(ct, Zero) or s is None else
            device_put_p.bind(ct, devices=(s,), srcs=(d,))[0]
            for ct, d, s in zip(cts, devices, srcs)]


def _device_put_batch_rule(vals, dims, *, devices, srcs):
    return device_put_p.bind(*vals, devices=devices, srcs=srcs), list(dims)


def _device_put_lowering(ctx, *xs, devices, srcs):
    return list(xs)


def _register_device_put() -> None:
    device_put_p.def_impl(_device_put_impl)
    device_put_p.def_abstract_eval(_device_put_abstract_eval)
    ad.primitive_jvps[device_put_p] = _device_put_jvp
    ad.primitive_transposes[device_put_p] = _device_put_transpose
    batching.primitive_batchers[device_put_p] = _device_put_batch_rule
    mlir.register_lowering(device_put_p, _device_put_lowering)


_register_device_put()
