"""`pmap`, built as JAX 0.10 builds it: `jit` of a `shard_map` over a 1-D mesh of the devices.

Each device gets one slice of the mapped axis, with that axis removed (`shard_map` keeps it,
of size 1: the body squeezes it away and puts it back on the outputs). Collectives over
`axis_name` (`lax.psum`, ...) are `shard_map`'s. chapters/20-shard-map.md teaches shard_map.
Mirrors jax/_src/pmap.py.
"""

from __future__ import annotations

import functools
from typing import Callable

from minijax import api_util, core, traceback_util
from minijax.api import devices as all_devices
from minijax.lax import lax
from minijax.mesh import Mesh
from minijax.pjit import jit
from minijax.shard_map import _axes_to_pspec, shard_map
from minijax.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten

_DEFAULT_AXIS = "_internal_pmap_axis_name"  # JAX's name for an unnamed pmap axis


# JAX: jax/_src/pmap.py pmap — differs: one process; `backend` accepts only None or 'cpu'
def pmap(fun: Callable, axis_name=None, *, in_axes=0, out_axes=0,
         static_broadcasted_argnums=(), devices=None, backend=None, axis_size=None,
         donate_argnums=()) -> Callable:
    """Map `fun` over axis `in_axes` of its arguments, one slice per device, in parallel.

    Args:
      fun: the per-device function; inside it `axis_name` names the mapped axis for
        collectives (`lax.psum(x, axis_name)`).
      in_axes / out_axes: an int, None or a pytree prefix of the positional arguments /
        outputs (as `vmap`'s); keyword arguments are mapped along axis 0.
      static_broadcasted_argnums: positional arguments passed to every device as they are
        (hashable; a new value compiles again).
      devices: the devices to map over (default `minijax.devices()`), the first n used for a
        mapped axis of size n; axis_size: if given, must equal the mapped size.
      donate_argnums: as `jit`'s: the donated Arrays are deleted (JAX donates a copy, and
        keeps the argument, when it first has to move it onto the mesh).
    Returns: the mapped function. f32[n,k] in, with in_axes=0: `fun` sees f32[k]; its f32[m]
      result comes back as f32[n,m], laid out over the n devices.
    Raises TypeError for axes that are not ints or None, ValueError when no argument is
    mapped, sizes disagree, or the size exceeds the devices (shard_map's error).
    """
    api_util.check_callable(fun)
    if devices is not None and not devices:
        raise ValueError("'devices' argument to pmap must be non-empty, or None.")
    if backend not in (None, "cpu"):
        raise ValueError(f"pmap: minijax has only the 'cpu' backend, not {backend!r}")
    for what, axes in (("in_axes", in_axes), ("out_axes", out_axes)):
        if not all(type(a) is int for a in tree_leaves(axes)):  # JAX's message
            raise TypeError(f"pmap {what} must be an int, None, or (nested) container with "
                            f"those types as leaves, but got {axes}.")
    name = _DEFAULT_AXIS if axis_name is None else axis_name
    statics = api_util.ensure_index_tuple(static_broadcasted_argnums)
    donate = api_util.ensure_index_tuple(donate_argnums)
    cache: dict = {}

    @functools.wraps(fun)
    @traceback_util.api_boundary
    def pmapped(*args, **kwargs):
        static_vals = tuple((i, api_util.hashable_static(args[i], "static_broadcasted_argnums"))
                            for i in statics if i < len(args))
        dyn = [a for i, a in enumerate(args) if i not in statics]
        axes = in_axes
        if isinstance(in_axes, (tuple, list)):
            axes = tuple(a for i, a in enumerate(in_axes) if i not in statics)
        flat, in_tree = tree_flatten((tuple(dyn), kwargs))
        flat_axes = _flat_in_axes(axes, tuple(dyn), kwargs)
        size = _mapped_size(flat, flat_axes)
        if axis_size is not None and axis_size != size:
            raise ValueError(f"Specified axis_size {axis_size} doesn't match received "
                             f"axis_size {size}.")
        devs = tuple(devices if devices is not None else all_devices())[:size]
        key = (in_tree, flat_axes, static_vals, devs)
        jitted = cache.get(key)
        if jitted is None:
            jitted = cache[key] = _pmapped_flat(fun, name, in_tree, flat_axes, out_axes,
                                                static_vals, devs, donate, len(args))
        return jitted(*flat)

    return pmapped


def _flat_in_axes(in_axes, dyn: tuple, kwargs: dict) -> tuple:
    prefix = (in_axes if isinstance(in_axes, tuple) else in_axes, 0)
    entries, prefix_tree = tree_flatten(prefix, is_leaf=lambda x: x is None)
    try:
        subtrees = prefix_tree.flatten_up_to((dyn, kwargs))
    except ValueError as e:
        raise ValueError(f"pmap in_axes specification must be a tree prefix of the "
                         f"corresponding value, got specification {in_axes}: {e}") from None
    return tuple(a for a, sub in zip(entries, subtrees) for a in [a] * len(tree_leaves(sub)))


def _mapped_size(flat: list, flat_axes: tuple) -> int:
    sizes = {core.get_aval(x).shape[ax] for x, ax in zip(flat, flat_axes) if ax is not None}
    if not sizes:  # JAX's message
        raise ValueError("pmap requires at least one argument with a mapped axis.")
    if len(sizes) > 1:
        raise ValueError(f"pmap got inconsistent sizes for array axes to be mapped: "
                         f"{sorted(sizes)}")
    return sizes.pop()


# JAX: jax/_src/pmap.py _cached_shard_map
def _pmapped_flat(fun, name, in_tree, flat_axes, out_axes, static_vals, devs, donate, nargs):
    mesh = Mesh(list(devs), (name,))

    def body(*flat):
        flat = [x if ax is None else lax.squeeze(x, [ax]) for x, ax in zip(flat, flat_axes)]
        dyn, kwargs = tree_unflatten(in_tree, flat)
        dyn_it, args = iter(dyn), []
        statics = dict(static_vals)
        for i in range(nargs):
            args.append(statics[i] if i in statics else next(dyn_it))
        out = fun(*args, **kwargs)
        return tree_map(lambda ax, sub: sub if ax is None else tree_map(
            lambda x: lax.expand_dims(x, [ax]), sub), out_axes, out, is_leaf=lambda x: x is None)

    in_specs = tuple(_axes_to_pspec(name, ax) for ax in flat_axes)
    out_specs = tree_map(functools.partial(_axes_to_pspec, name), out_axes,
                         is_leaf=lambda x: x is None)
    mapped = shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                       check_vma=False)
    flat_donate = _flat_donation(donate, in_tree, static_vals)
    return jit(mapped, donate_argnums=flat_donate)


def _flat_donation(donate: tuple, in_tree, static_vals) -> tuple:
    """The flat argument positions of the donated positional arguments."""
    if not donate:
        return ()
    statics = {i for i, _ in static_vals}
    dyn_args, _ = tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    dyn_positions = [i for i in range(len(dyn_args) + len(statics)) if i not in statics]
    out: list[int] = []
    for pos, sub in zip(dyn_positions, dyn_args):
        if pos in donate:
            out.extend(tree_leaves(sub))
    return tuple(out)
