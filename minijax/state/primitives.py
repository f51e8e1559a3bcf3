"""The state primitives: `get` (read a window of a ref), `swap` (write one, returning the old
contents) and `addupdate` (add into one). Mirrors jax/_src/state/primitives.py.

Each takes the ref, (for swap/addupdate) the value, then one start index per dimension of the
ref; the param `indexer` holds the static part: `("slice", size)` or `("index",)` per
dimension (see minijax/state/types.py: make_indexer). Each declares an effect on its ref
(`ReadEffect`, `WriteEffect`, `AccumEffect`) and prints as JAX's do: `b:f32[4] <- a[...]`,
`a[i:i+2] <- c`, `a[0] += d`. There is no eager evaluation: refs exist
only while tracing, and `discharge_state` rewrites these equations into `dynamic_slice` /
`dynamic_update_slice` on ordinary arrays.
"""

from __future__ import annotations

import numpy as np

from minijax import core, dtypes, lax, numpy as jnp
from minijax.ad_util import Zero
from minijax.interpreters import ad, batching
from minijax.state.types import (
    AbstractRef,
    AccumEffect,
    ReadEffect,
    WriteEffect,
    indexed_shape,
    make_indexer,
    pp_indexer,
)


def _no_eager(name):
    def impl(*args, **params):
        raise TypeError(f"state primitive '{name}' has no eager evaluation: refs exist only "
                        "while tracing (a pallas kernel, or a function traced with make_jaxpr "
                        "on AbstractRef inputs). Use minijax.state.discharge_state first.")
    return impl


def _check_ref(name, ref_aval, n_starts, spec):
    if not isinstance(ref_aval, AbstractRef):
        raise TypeError(f"{name}: the first operand must be a ref, got {ref_aval.str_short()}")
    if len(spec) != ref_aval.ndim or n_starts != ref_aval.ndim:
        raise TypeError(f"{name}: an indexer for a ref of rank {ref_aval.ndim} needs one "
                        f"entry per dimension, got {len(spec)} ({n_starts} start indices)")
    for d, (s, n) in enumerate(zip(spec, ref_aval.shape)):
        if s[0] == "slice" and s[1] > n:
            raise ValueError(f"{name}: a slice of {s[1]} elements does not fit dimension {d} "
                             f"of size {n} of {ref_aval.str_short()}")


# JAX: jax/_src/state/primitives.py get_p
get_p = core.Primitive("get")
get_p.def_impl(_no_eager("get"))
get_p.pp_param_formatters = {"indexer": pp_indexer}  # minijax/viz.py


@get_p.def_effectful_abstract_eval
def _get_abstract_eval(ref_aval, *starts, indexer):
    _check_ref("get", ref_aval, len(starts), indexer)
    return core.ShapedArray(indexed_shape(indexer), ref_aval.dtype), {ReadEffect(0)}


# JAX: jax/_src/state/primitives.py swap_p
swap_p = core.Primitive("swap")
swap_p.def_impl(_no_eager("swap"))
swap_p.pp_param_formatters = {"indexer": pp_indexer}  # minijax/viz.py


def _check_value(name, ref_aval, val_aval, indexer):
    shape = indexed_shape(indexer)
    if val_aval.shape == shape and val_aval.dtype != ref_aval.dtype:
        # JAX: jax/_src/state/primitives.py _swap_abstract_eval (its words)
        raise ValueError(f"Invalid dtype for `{name}`. Ref dtype: {ref_aval.dtype}. Value "
                         f"dtype: {val_aval.dtype}. ")
    if val_aval.shape != shape:
        raise TypeError(f"{name}: writing a value of type {val_aval.str_short()} into a "
                        f"window {pp_indexer(indexer)} of {ref_aval.str_short()}, which needs "
                        f"{core.ShapedArray(shape, ref_aval.dtype).str_short()}")


@swap_p.def_effectful_abstract_eval
def _swap_abstract_eval(ref_aval, val_aval, *starts, indexer):
    _check_ref("swap", ref_aval, len(starts), indexer)
    _check_value("swap", ref_aval, val_aval, indexer)
    return core.ShapedArray(val_aval.shape, val_aval.dtype), {WriteEffect(0)}


# JAX: jax/_src/state/primitives.py addupdate_p
addupdate_p = core.Primitive("addupdate")
addupdate_p.multiple_results = True
addupdate_p.def_impl(_no_eager("addupdate"))
addupdate_p.pp_param_formatters = {"indexer": pp_indexer}  # minijax/viz.py


@addupdate_p.def_effectful_abstract_eval
def _addupdate_abstract_eval(ref_aval, val_aval, *starts, indexer):
    _check_ref("addupdate", ref_aval, len(starts), indexer)
    _check_value("addupdate", ref_aval, val_aval, indexer)
    return [], {AccumEffect(0)}


# ---------------------------------------------------------------------------------------------
# Printing: `b:f32[4] <- a[...]`, `a[0] <- c`, `a[i:i+2] += d`, as JAX prints them
# ---------------------------------------------------------------------------------------------

def _pp_start(names, start) -> str:
    return str(int(start.val)) if isinstance(start, core.Literal) else names(start)


# JAX: jax/_src/state/primitives.py pp_ref_transforms, jax/_src/state/indexing.py _pp_slice
# — differs: `ref[:]` prints `[...]` like `ref[...]` (the indexer does not remember which)
def _pp_ref(names, ref, starts, indexer) -> str:
    shape = ref.aval.shape
    if all(s[0] == "slice" and s[1] == n and isinstance(i, core.Literal) and i.val == 0
           for s, i, n in zip(indexer, starts, shape)):
        return f"{names(ref)}[...]"
    dims = []
    for s, i, n in zip(indexer, starts, shape):
        start = _pp_start(names, i)
        if s[0] == "index":
            dims.append(start)
        elif isinstance(i, core.Var):
            dims.append(f"{start}:{start}+{s[1]}")
        else:
            end = int(i.val) + s[1]
            dims.append(f"{'' if start == '0' else start}:{'' if end == n else end}")
    return f"{names(ref)}[{','.join(dims)}]"


# JAX: jax/_src/state/primitives.py _get_pp_rule
def _get_pp_rule(eqn, names) -> str:
    (y,), (ref, *starts) = eqn.outvars, eqn.invars
    window = _pp_ref(names, ref, starts, eqn.params["indexer"])
    return f"{names(y)}:{y.aval.str_short()} <- {window}"


# JAX: jax/_src/state/primitives.py _swap_pp_rule
def _swap_pp_rule(eqn, names) -> str:
    (y,), (ref, v, *starts) = eqn.outvars, eqn.invars
    window = _pp_ref(names, ref, starts, eqn.params["indexer"])
    if isinstance(y, core.DropVar) or names.names.get(y) == "_":  # a set: the old value unused
        return f"{window} <- {names(v)}"
    return f"{names(y)}:{y.aval.str_short()}, {window} <- {window}, {names(v)}"


# JAX: jax/_src/state/primitives.py _addupdate_pp_rule
def _addupdate_pp_rule(eqn, names) -> str:
    ref, v, *starts = eqn.invars
    return f"{_pp_ref(names, ref, starts, eqn.params['indexer'])} += {names(v)}"


core.pp_eqn_rules[get_p] = _get_pp_rule
core.pp_eqn_rules[swap_p] = _swap_pp_rule
core.pp_eqn_rules[addupdate_p] = _addupdate_pp_rule


# ---------------------------------------------------------------------------------------------
# The user-facing functions, and `ref[idx]` / `ref[idx] = v` on traced refs
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/state/primitives.py _maybe_implicit_cast
def _cast_value(ref, val):
    """`val` as an array, converted to the ref's dtype only where JAX converts implicitly:
    an integer into an integer ref, a weakly typed float into a floating ref. Any other dtype
    is left for the primitive to reject (ValueError), as in JAX."""
    val = jnp.asarray(val)
    aval, sub = core.get_aval(val), dtypes.issubdtype
    ints = sub(ref.dtype, np.integer) and sub(aval.dtype, np.integer)
    floats = aval.weak_type and sub(ref.dtype, np.floating) and sub(aval.dtype, np.floating)
    if aval.dtype != ref.dtype and (ints or floats):
        val = lax.convert_element_type(val, ref.dtype)
    return val


def _broadcast_to(name, ref, val, shape):
    if tuple(val.shape) == tuple(shape):
        return val
    try:
        return jnp.broadcast_to(val, shape)
    except ValueError:
        raise ValueError(f"Invalid shape for `{name}`. Ref shape: {ref.shape}. Expected shape: "
                         f"{tuple(shape)}. Value shape: {tuple(val.shape)}.") from None


# JAX: jax/_src/state/primitives.py get_ref_and_transforms / ref_get
def ref_get(ref, idx=()):
    """`ref[idx]`: read a window of `ref`. Returns an array of the indexed shape."""
    spec, starts = make_indexer(idx, ref.shape, "ref[...]")
    return get_p.bind(ref, *starts, indexer=spec)


# JAX: jax/_src/state/primitives.py ref_swap
def ref_swap(ref, idx, value):
    """Write `value` into `ref[idx]` and return what was there."""
    spec, starts = make_indexer(idx, ref.shape, "ref[...] = v")
    value = _broadcast_to("swap", ref, _cast_value(ref, value), indexed_shape(spec))
    return swap_p.bind(ref, value, *starts, indexer=spec)


# JAX: jax/_src/state/primitives.py ref_set
def ref_set(ref, idx, value) -> None:
    """`ref[idx] = value` (value broadcast to the window and cast to the ref's dtype)."""
    ref_swap(ref, idx, value)


# JAX: jax/_src/state/primitives.py ref_addupdate
def ref_addupdate(ref, idx, value) -> None:
    """`ref[idx] += value`, as one primitive."""
    spec, starts = make_indexer(idx, ref.shape, "ref_addupdate")
    value = _broadcast_to("addupdate", ref, _cast_value(ref, value), indexed_shape(spec))
    addupdate_p.bind(ref, value, *starts, indexer=spec)




# ---------------------------------------------------------------------------------------------
# Forward mode: the same read or write on the tangent ref (minijax/experimental/pallas: the jvp
# of a kernel has a tangent ref per ref)
# ---------------------------------------------------------------------------------------------

def _tangent_ref(name, t):
    if type(t) is Zero:
        raise NotImplementedError(f"jvp of '{name}': a differentiated value written into a "
                                  "ref without a tangent")
    return t


# JAX: jax/_src/state/primitives.py _get_jvp
def _get_jvp(primals, tangents, *, indexer):
    ref, *starts = primals
    out = get_p.bind(ref, *starts, indexer=indexer)
    if type(tangents[0]) is Zero:
        return out, Zero(core.get_aval(out).to_tangent_aval())
    return out, get_p.bind(tangents[0], *starts, indexer=indexer)


# JAX: jax/_src/state/primitives.py _swap_jvp, _addupdate_jvp
def _write_jvp(prim, primals, tangents, *, indexer):
    ref, val, *starts = primals
    t_ref = _tangent_ref(prim.name, tangents[0])
    out = prim.bind(ref, val, *starts, indexer=indexer)
    t_out = prim.bind(t_ref, ad.instantiate_zeros(tangents[1]), *starts, indexer=indexer)
    return out, t_out


ad.primitive_jvps[get_p] = _get_jvp
ad.primitive_jvps[swap_p] = lambda p, t, **kw: _write_jvp(swap_p, p, t, **kw)
ad.primitive_jvps[addupdate_p] = lambda p, t, **kw: _write_jvp(addupdate_p, p, t, **kw)


# ---------------------------------------------------------------------------------------------
# Batching: a ref batched along one axis is read and written with a full slice along it
# ---------------------------------------------------------------------------------------------

def _insert_full_slice(ref_aval_shape, bdim, indexer, starts):
    spec = list(indexer)
    spec.insert(bdim, ("slice", ref_aval_shape[bdim]))
    starts = list(starts)
    starts.insert(bdim, 0)
    return tuple(spec), starts


def _out_bdim(indexer, bdim):
    # the batch axis' position among the kept (sliced) dimensions of the result
    return sum(1 for s in indexer[:bdim] if s[0] == "slice")


def _check_unbatched(name, dims):
    if any(d is not batching.not_mapped for d in dims):
        raise NotImplementedError(f"vmap of '{name}' with batched indices or a batched value "
                                  "written into an unbatched ref is not supported in minijax")


# JAX: jax/_src/state/primitives.py _get_vmap — differs: only the ref may be batched
def _get_batch_rule(vals, dims, *, axis_size, indexer):
    ref, *starts = vals
    _check_unbatched("get", dims[1:])
    bdim = dims[0]
    if bdim is batching.not_mapped:
        return get_p.bind(ref, *starts, indexer=indexer), batching.not_mapped
    spec, starts = _insert_full_slice(ref.shape, bdim, indexer, starts)
    return get_p.bind(ref, *starts, indexer=spec), _out_bdim(spec, bdim)


def _write_batch_rule(prim, vals, dims, *, axis_size, indexer):
    ref, val, *starts = vals
    _check_unbatched(prim.name, dims[2:])
    rdim, vdim = dims[0], dims[1]
    if rdim is batching.not_mapped:
        _check_unbatched(prim.name, [vdim])
        out = prim.bind(ref, val, *starts, indexer=indexer)
        return out, ([] if prim.multiple_results else batching.not_mapped)
    spec, starts = _insert_full_slice(ref.shape, rdim, indexer, starts)
    out_dim = _out_bdim(spec, rdim)
    val = batching.matchaxis(axis_size, vdim, out_dim, val)
    out = prim.bind(ref, val, *starts, indexer=spec)
    return out, ([] if prim.multiple_results else out_dim)


batching.primitive_batchers[get_p] = _get_batch_rule
batching.primitive_batchers[swap_p] = lambda vals, dims, **kw: _write_batch_rule(
    swap_p, vals, dims, **kw)
batching.primitive_batchers[addupdate_p] = lambda vals, dims, **kw: _write_batch_rule(
    addupdate_p, vals, dims, **kw)
