"""Automatic batching: `vmap` with BatchTrace.

A BatchTracer carries a value with one extra axis (its `batch_dim`) or with none (`not_mapped`,
a value shared by all examples). Each primitive's batching rule says how to compute the batched
output from batched inputs, and where the output's batch axis ends up.
Mirrors jax/_src/interpreters/batching.py. Taught in chapters/05-batching.md.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from minijax import core
from minijax.core import ShapedArray, Tracer
from minijax.interpreters import partial_eval as pe
from minijax.util import safe_zip

_CHAPTER = "chapters/05-batching.md"

# JAX: jax/_src/interpreters/batching.py NotMapped — JAX marks unbatched values with None too
not_mapped = None

# JAX: jax/_src/interpreters/batching.py primitive_batchers
primitive_batchers: dict[core.Primitive, Callable] = {}
# Collectives over a vmapped named axis: rule(axis_name, axis_size, vals, dims, **params),
# called when the primitive names this vmap's axis (even if no operand is batched)
# JAX: jax/_src/interpreters/batching.py fancy_primitive_batchers (axis_data)
axis_primitive_batchers: dict[core.Primitive, Callable] = {}


# JAX: jax/_src/interpreters/batching.py BatchTracer
class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim")

    def __init__(self, trace: "BatchTrace", val, batch_dim: int | None) -> None:
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self) -> ShapedArray:
        aval = core.get_aval(self.val)
        if self.batch_dim is not_mapped:
            return aval
        d = self.batch_dim
        shape = aval.shape[:d] + aval.shape[d + 1:]
        s = getattr(aval, "sharding", None)  # sharding in types (a Ref's aval has none)
        if s is None:
            return aval.update(shape=shape)
        spec = tuple(s.spec)  # the batch dimension's entry goes too
        s = type(s)(s.mesh, type(s.spec)(*spec[:d], *spec[d + 1:]))
        return aval.update(shape=shape, sharding=s)

    def _short_repr(self) -> str:  # JAX: jax/_src/interpreters/batching.py BatchTracer
        return f"VmapTracer(aval={self.aval}, batched={core.get_aval(self.val)})"


# JAX: jax/_src/interpreters/batching.py BatchTrace
class BatchTrace(core.Trace):
    """vmap's interpreter: each primitive's batching rule runs in the parent trace on the
    underlying batched values."""

    def __init__(self, parent_trace: core.Trace, axis_size: int, axis_name=None,
                 fun_name: str = "fun", spmd_axis_name: tuple | None = None) -> None:
        super().__init__()
        self.parent_trace = parent_trace
        self.axis_size = axis_size
        self.axis_name = axis_name
        self.fun_name = fun_name
        self.spmd_axis_name = spmd_axis_name  # JAX: AxisData.spmd_name

    def describe(self) -> str:
        return f" while batching the function {self.fun_name} (vmap)"

    def to_batch_info(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.batch_dim
        core.check_not_escaped(x)
        return x, not_mapped

    def process_primitive(self, primitive, tracers, params):
        vals, dims = zip(*map(self.to_batch_info, tracers)) if tracers else ((), ())
        if self.axis_name is not None and primitive in axis_primitive_batchers and \
                self.axis_name in _axis_names(params):
            with core.set_current_trace(self.parent_trace):
                out, out_dim = axis_primitive_batchers[primitive](
                    self.axis_name, self.axis_size, list(vals), list(dims), **params)
            return self._wrap(out, out_dim)
        if all(d is not_mapped for d in dims):
            return primitive.bind_with_trace(self.parent_trace, vals, params)
        rule = primitive_batchers.get(primitive)
        if rule is None:
            raise NotImplementedError(
                f"Batching rule for '{primitive.name}' not implemented — see {_CHAPTER}")
        _spmd_axis_names.append(self.spmd_axis_name)  # (a try, not a `with`: every rule)
        try:
            with core.set_current_trace(self.parent_trace):
                if _takes_axis_size(rule):
                    out, out_dim = rule(list(vals), list(dims), axis_size=self.axis_size,
                                        **params)
                else:  # a rule written to JAX's signature, `rule(vals, dims, **params)`
                    out, out_dim = rule(vals, dims, **params)
        finally:
            _spmd_axis_names.pop()
        if primitive.multiple_results:
            return [self._wrap(o, d) for o, d in safe_zip(out, out_dim)]
        return self._wrap(out, out_dim)

    # JAX: jax/_src/interpreters/batching.py BatchTrace.process_custom_jvp_call — differs:
    # a batched input stages the function (the default), whose batching rule batches the rules
    def process_custom_derivative_call(self, primitive, fun, tracers, rules):
        vals, dims = zip(*map(self.to_batch_info, tracers)) if tracers else ((), ())
        if self.axis_name is None and all(d is not_mapped for d in dims):
            # nothing batched: the parent applies it (fun sees concrete values, as in JAX)
            return self.parent_trace.process_custom_derivative_call(primitive, fun, vals, rules)
        return super().process_custom_derivative_call(primitive, fun, tracers, rules)

    def _wrap(self, val, dim):
        return val if dim is not_mapped else BatchTracer(self, val, dim)


# JAX: jax/_src/interpreters/batching.py AxisData (its spmd_name), which JAX's rules receive with
# the trace; here the rules that use it (sharding constraints, shard_map) ask for it, and
# batch_jaxpr hands it to the vmap of a nested jaxpr
_spmd_axis_names: list = [None]


def spmd_axis_name() -> tuple | None:
    """The `spmd_axis_name` of the vmap whose batching rule is running (None if it has
    none): the mesh axes its batch dimension is split over."""
    return _spmd_axis_names[-1]


def _axis_names(params: dict) -> tuple:
    names = params.get("axes", params.get("axis_name", ()))
    return names if isinstance(names, tuple) else (names,)


def _run_batched(fun: Callable, args, in_dims, axis_size: int, axis_name, fun_name: str,
                 spmd_axis_name: tuple | None = None) -> list[tuple[Any, int | None]]:
    """Call `fun` on BatchTracers of a fresh BatchTrace; return (value, batch_dim) per output.
    A named axis (`vmap(axis_name=...)`) is bound for the collectives inside."""
    trace = BatchTrace(core.current_trace(), axis_size, axis_name, fun_name, spmd_axis_name)
    named = () if axis_name is None else ((axis_name, axis_size),)
    try:
        in_tracers = [trace._wrap(x, d) for x, d in safe_zip(args, in_dims)]
        with core.set_current_trace(trace), core.extend_axis_env_nd(named):
            outs = fun(*in_tracers)
        pairs = [trace.to_batch_info(o) for o in outs]
    finally:
        trace.invalidate()
    del in_tracers, outs  # what is left of the trace's tracers after this has leaked
    trace.check_leaks()
    return pairs


def vmap_flat(fun: Callable, args: Sequence[Any], in_dims: Sequence[int | None],
              axis_size: int, out_dims_wanted: Callable[[int], Sequence[int | None]],
              axis_name=None, fun_name: str = "fun", spmd_axis_name: tuple | None = None
              ) -> list:
    """Batch a flat function. `in_dims[i]` is the batch axis of args[i] (None: not batched).
    `out_dims_wanted(n_out)` gives where each output's batch axis must go (None: unbatched,
    which requires the output not to depend on the batch). `spmd_axis_name`: the mesh axes
    the batch dimension is split over (vmap's). Returns the outputs."""
    pairs = _run_batched(fun, args, in_dims, axis_size, axis_name, fun_name, spmd_axis_name)
    wanted = out_dims_wanted(len(pairs))
    result = []
    for i, ((val, dim), want) in enumerate(safe_zip(pairs, wanted)):
        if want is None:
            if dim is not not_mapped:
                raise ValueError(
                    f"vmap has mapped output (output {i}, batched at axis {dim}) but "
                    "out_axes is None: an output with out_axes=None must not depend on the "
                    "mapped inputs")
            result.append(val)
        else:
            result.append(matchaxis(axis_size, dim, want, val))
    return result


# ---------------------------------------------------------------------------------------------
# Helpers for rules
# ---------------------------------------------------------------------------------------------

def moveaxis(x, src: int, dst: int):
    from minijax.lax import lax  # not at the top: lax.lax imports this module
    if src == dst:
        return x
    nd = core.get_aval(x).ndim
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return lax.transpose(x, tuple(perm))


# JAX: jax/_src/interpreters/batching.py broadcast
def broadcast(x, size: int, axis: int):
    """`x` with a new axis of `size` at `axis`; its own dimensions keep their order (numbered
    with numpy, as JAX's, so the printed `broadcast_dimensions` are JAX's `np.int64`s)."""
    from minijax.lax import lax  # not at the top: lax.lax imports this module
    shape = list(core.get_aval(x).shape)
    shape.insert(axis, size)
    return lax.broadcast_in_dim(x, tuple(shape), tuple(np.delete(np.arange(len(shape)), axis)))


# JAX: jax/_src/interpreters/batching.py bdim_at_front
def bdim_at_front(x, dim: int | None, axis_size: int):
    """`x` with its batch axis at 0, broadcasting unbatched values to `axis_size`."""
    if dim is not_mapped:
        return broadcast(x, axis_size, 0)
    return moveaxis(x, dim, 0)


# JAX: jax/_src/interpreters/batching.py matchaxis
def matchaxis(axis_size: int, src: int | None, dst: int, x):
    """Move (or create, by broadcasting) the batch axis of `x` from `src` to `dst`."""
    nd = core.get_aval(x).ndim + (src is not_mapped)
    if not -nd <= dst < nd:
        raise ValueError(f"axis {dst} is out of bounds for array of dimension {nd}")
    dst = dst + nd if dst < 0 else dst
    if src is not_mapped:
        return broadcast(x, axis_size, dst)
    return moveaxis(x, src, dst)


@functools.lru_cache(maxsize=None)
def _takes_axis_size(rule: Callable) -> bool:
    """minijax's rules take the batch size as the keyword `axis_size`; a rule written to
    JAX's public signature `(vals, dims, **params)` with its params named (a tutorial's)
    cannot take it, and is called without it."""
    try:
        params = inspect.signature(rule).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return True
    return any(p.name == "axis_size" or p.kind is p.VAR_KEYWORD for p in params)


# JAX: jax/_src/interpreters/batching.py defvectorized
def defvectorized(primitive: core.Primitive) -> None:
    """Elementwise unary primitives: apply as-is; the batch axis stays where it is."""
    def rule(vals, dims, *, axis_size, **params):
        (x,), (d,) = vals, dims
        return primitive.bind(x, **params), d
    primitive_batchers[primitive] = rule


# JAX: jax/_src/interpreters/batching.py defbroadcasting
def defbroadcasting(primitive: core.Primitive) -> None:
    """Elementwise n-ary primitives (operands of equal rank, or rank 0): bind as they are when
    the batched operands agree on shape and batch axis, else move every batch axis to the
    front and give unbatched operands a leading axis of size 1."""
    def rule(vals, dims, *, axis_size, **params):
        avals = [core.get_aval(v) for v in vals]
        # JAX: jax/_src/interpreters/batching.py broadcast_batcher — operands batched along
        # one axis with one shape (and unbatched scalars) need no moving: bind them as they are
        mapped = [(a.shape, d) for a, d in zip(avals, dims) if d is not not_mapped]
        if mapped and all((a.shape, d) == mapped[0] for a, d in zip(avals, dims) if a.ndim):
            return primitive.bind(*vals, **params), mapped[0][1]
        # as JAX's: every batch axis moved to the front (unbatched arrays given a leading 1)
        # first, then each batched scalar expanded against the arrays: (B,) -> (B, 1, ..., 1)
        args = [x if d is not_mapped and a.ndim == 0 else
                broadcast(x, 1, 0) if d is not_mapped else moveaxis(x, d, 0)
                for x, a, d in zip(vals, avals, dims)]
        rank = max(core.get_aval(x).ndim for x in args)
        args = [_expand_trailing(x, rank) if d is not not_mapped else x
                for x, d in zip(args, dims)]
        return primitive.bind(*args, **params), 0
    primitive_batchers[primitive] = rule


# JAX: jax/_src/interpreters/batching.py defreducer
def defreducer(primitive: core.Primitive) -> None:
    """Reductions over the param `axes` (reduce_sum, argmax, ...): the batch axis stays where
    it is, the reduced axes are renumbered around it, and the output's batch axis is where the
    batch axis lands among the kept ones."""
    def rule(vals, dims, *, axis_size, axes, **params):
        (x,), (d,) = vals, dims
        axes = tuple(np.where(np.less(axes, d), axes, np.add(axes, 1)))
        out_dim = int(list(np.delete(np.arange(core.get_aval(x).ndim), axes)).index(d))
        return primitive.bind(x, axes=axes, **params), out_dim
    primitive_batchers[primitive] = rule


# JAX: jax/_src/interpreters/batching.py _handle_scalar_broadcasting
def _expand_trailing(x, rank: int):
    from minijax.lax import lax  # not at the top: lax.lax imports this module
    ndim = core.get_aval(x).ndim
    return x if ndim == rank else lax.expand_dims(x, tuple(range(ndim, rank)))


# JAX: jax/_src/interpreters/batching.py batch — differs: a flat function, out dims returned
def batch_flat(fun: Callable, args: Sequence[Any], in_dims: Sequence[int | None],
               axis_size: int, fun_name: str = "fun",
               instantiate: bool | Sequence[bool] = False) -> tuple[list, list[int | None]]:
    """Run the flat function `fun` batched (`args[i]` batched at `in_dims[i]`). Returns its
    outputs and where their batch axis is: 0, or None for an output that depends on no batched
    input (left unbatched, unlike `vmap_flat`, which places every output where it is asked) —
    unless `instantiate` (one bool, or one per output) asks for it batched (broadcast)."""
    pairs = _run_batched(fun, args, in_dims, axis_size, None, fun_name, spmd_axis_name())
    inst = [instantiate] * len(pairs) if isinstance(instantiate, bool) else list(instantiate)
    return ([v if d is not_mapped and not i else matchaxis(axis_size, d, 0, v)
             for (v, d), i in safe_zip(pairs, inst)],
            [not_mapped if d is not_mapped and not i else 0 for (_, d), i in safe_zip(pairs, inst)])


# JAX: jax/_src/interpreters/batching.py batch_jaxpr
def batch_jaxpr(closed: core.ClosedJaxpr, dims: Sequence[int | None], axis_size: int,
                instantiate: bool | Sequence[bool] = False
                ) -> tuple[core.ClosedJaxpr, list[int | None]]:
    """The jaxpr of `vmap(closed)`: input i carries its batch axis at `dims[i]` (None: not
    batched). Returns it with each output's batch axis: 0, or None for an output that depends
    on no batched input (it stays unbatched, so that e.g. `jacfwd`'s `out_axes=None` holds)
    unless `instantiate` asks for it. Used by the batching rules of every primitive that holds
    a jaxpr (jit_p, custom_jvp_call, remat2, cond, while, scan)."""
    in_avals = []
    for a, d in safe_zip(closed.in_avals, dims):
        if d is not_mapped:
            in_avals.append(a)
        else:
            shape = list(a.shape)
            shape.insert(d, axis_size)
            s = getattr(a, "sharding", None)  # sharding in types: the batch dimension unsplit
            if s is not None:
                spec = [*s.spec, *[None] * (a.ndim - len(s.spec))]
                s = type(s)(s.mesh, type(s.spec)(*spec[:d], None, *spec[d:]))
            in_avals.append(a.update(shape=tuple(shape), sharding=s))
    out_dims: list[int | None] = []

    def batched(*args):
        outs, out_dims[:] = batch_flat(
            lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs), args, dims,
            axis_size, instantiate=instantiate)
        return outs

    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(batched, in_avals, purpose="vmap")
    return core.ClosedJaxpr(jaxpr, consts), out_dims
