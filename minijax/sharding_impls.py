"""SingleDeviceSharding, and sharding in types: the layout an aval carries.

On a mesh with Explicit axes an aval carries its layout (`f32[8@x,4]`, `aval_sharding`); the
per-primitive rules that compute each result's are in minijax/lax/utils.py, registered with
`Primitive.def_sharding_rule` (minijax/core.py). Here: the sharding of one device, turning
`PartitionSpec`s and `out_sharding=` arguments into shardings, and reading back the layout the
partitioner chose for an output (`spec_for_device_map`). Placing arrays on devices is in
minijax/compiler.py (`device_put_sharded_tree`, as JAX's pxla.py shards arguments).

Mirrors jax/_src/sharding_impls.py, with the typing helpers JAX keeps in jax/_src/core.py
(`ShardingTypeError`, `update_aval_with_sharding`). Taught in chapters/12-sharding.md.
"""

from __future__ import annotations

import functools
import itertools

from minijax import core
from minijax.mesh import AbstractMesh, Mesh, get_abstract_mesh, get_concrete_mesh
from minijax.named_sharding import NamedSharding, Sharding, _check_memory_kind
from minijax.partition_spec import PartitionSpec, _axes_of


# JAX: jax/_src/sharding_impls.py SingleDeviceSharding
class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device, *, memory_kind: str | None = None) -> None:
        self._device = device
        self._device_assignment = (device,)
        self._memory_kind = _check_memory_kind(memory_kind, device)

    def with_memory_kind(self, kind: str) -> "SingleDeviceSharding":
        return SingleDeviceSharding(self._device, memory_kind=kind)

    def devices_indices_map(self, global_shape) -> dict:
        return {self._device: (slice(None),) * len(global_shape)}

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def __eq__(self, other) -> bool:
        return (isinstance(other, SingleDeviceSharding) and self._device == other._device
                and self.memory_kind == other.memory_kind)

    def __hash__(self) -> int:
        return hash(("SingleDeviceSharding", self._device, self.memory_kind))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


# JAX: jax/_src/sharding_impls.py make_single_device_sharding
def make_single_device_sharding(device, *, memory_kind: str | None = None):
    """`SingleDeviceSharding(device, memory_kind=)`."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)


# JAX: jax/_src/sharding_impls.py get_mesh
def get_mesh() -> "Mesh | None":
    """The mesh in context (`set_mesh`); outside `jit` only (ValueError while tracing, as
    JAX: inside, `get_abstract_mesh` is the one to ask). Differs: None with no mesh set, where
    JAX gives its empty `Mesh` (minijax's Mesh has at least one device)."""
    if core.current_trace() is not core.eval_trace:
        raise ValueError("`get_mesh` can only be used outside of `jax.jit`. Maybe you want "
                         "`jax.sharding.get_abstract_mesh()`?")
    return get_concrete_mesh()


def spec_for_device_map(mesh: Mesh, shape: tuple, index_of: dict) -> PartitionSpec:
    """The PartitionSpec over `mesh` whose layout is `index_of` (mesh position -> tuple of
    (start, stop) per dimension): how minijax reads back the layout the partitioner chose for
    an output. Tries the specs from simplest up (each mesh axis on one dimension or none).

    JAX: jax/_src/sharding_impls.py parse_flatten_op_sharding — differs: matches layouts by
    enumeration instead of unflattening the tile assignment."""
    ndim, names = len(shape), mesh.axis_names
    candidates = []
    for placement in itertools.product(range(ndim + 1), repeat=len(names)):
        per_dim: list[list[str]] = [[] for _ in range(ndim)]
        for a, d in zip(names, placement):
            if d < ndim:
                per_dim[d].append(a)
        for orders in itertools.product(*[itertools.permutations(p) for p in per_dim]):
            parts = [None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders]
            while parts and parts[-1] is None:
                parts.pop()
            candidates.append(PartitionSpec(*parts))
    candidates.sort(key=lambda s: sum(len(_axes_of(p)) for p in s))
    flat = list(mesh.devices.flat)
    for spec in candidates:
        s = NamedSharding(mesh, spec)
        try:
            m = s.devices_indices_map(shape)
        except ValueError:
            continue
        if all(tuple((sl.start or 0, n if sl.stop is None else sl.stop)
                     for sl, n in zip(m[d], shape)) == index_of[i] for i, d in enumerate(flat)):
            return spec
    raise NotImplementedError(f"the partitioner chose a layout of an array of shape {shape} "
                              f"that no PartitionSpec over {mesh} describes")


def canonicalize_sharding(s, api_name: str):
    """A bare PartitionSpec becomes a NamedSharding over the mesh in context (`set_mesh`);
    ValueError (JAX's message) if there is none. Other values are returned as they are."""
    if isinstance(s, PartitionSpec):
        mesh = get_concrete_mesh()
        if mesh is None:
            raise ValueError(f"Please set a mesh via `jax.set_mesh` if a PartitionSpec is "
                             f"passed to {api_name}")
        return NamedSharding(mesh, s)
    return s


# JAX: jax/_src/core.py ShardingTypeError
class ShardingTypeError(Exception):
    """A primitive's sharding rule cannot tell how its result is laid out (ambiguous or
    incompatible operand shardings); the message says which argument to add (`out_sharding`)
    or which `reshard` would fix it."""


# JAX: jax/_src/core.py update_aval_with_sharding + modify_spec_for_auto_manual
def aval_sharding(sharding, ndim: int) -> "NamedSharding | None":
    """The sharding the type of a value laid out by `sharding` carries: over the abstract
    mesh, one spec entry per dimension, naming only the mesh's Explicit axes (Auto axes are
    the partitioner's business, not the type's). None when the mesh has no Explicit axis:
    then the type says nothing about layout, as before sharding in types."""
    if not isinstance(sharding, NamedSharding) or not sharding.mesh.explicit_axes:
        return None  # (asked of every sharded result: answered before the cache's lookup)
    return _explicit_aval_sharding(sharding, ndim)


@functools.lru_cache(maxsize=1024)
def _explicit_aval_sharding(sharding, ndim: int) -> "NamedSharding":
    explicit = set(sharding.mesh.explicit_axes)
    spec = []
    for p in sharding.spec._normalized_spec_for_aval(ndim):
        axes = tuple(a for a in _axes_of(p) if a in explicit)
        spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return NamedSharding(sharding.mesh.abstract_mesh, PartitionSpec(*spec))


def _spec_of(aval) -> tuple:
    return tuple(aval.sharding.spec) if aval.sharding is not None else (None,) * aval.ndim


def canonicalize_out_sharding(s, api_name: str) -> "NamedSharding | None":
    """An `out_sharding=` argument as an aval's sharding: a NamedSharding over the abstract
    mesh (a PartitionSpec means the mesh in context, `set_mesh`). ValueError as JAX's when a
    PartitionSpec is given with no mesh set."""
    if s is None:
        return None
    if isinstance(s, PartitionSpec):
        mesh = get_abstract_mesh()
        if mesh.empty:
            raise ValueError(f"Using PartitionSpec when you are not under a mesh context is "
                             f"not allowed. Please pass a NamedSharding instance or enter "
                             f"into a mesh context via `jax.set_mesh`. Got {s}")
        return NamedSharding(mesh, s)
    if isinstance(s, NamedSharding):
        return s if isinstance(s.mesh, AbstractMesh) else NamedSharding(s.mesh.abstract_mesh,
                                                                        s.spec)
    raise TypeError(f"{api_name}: out_sharding must be a NamedSharding or PartitionSpec, "
                    f"got {s!r}")


def normalize_to_ndim(s: "NamedSharding | None", ndim: int) -> "NamedSharding | None":
    """`s` with its spec padded with None to `ndim` entries (how avals store it)."""
    if s is None or len(s.spec) == ndim:
        return s
    return NamedSharding(s.mesh, s.spec._normalized_spec_for_aval(ndim))


def unstacked(aval):
    """The aval of one slice of `aval` along its leading dimension (scan's xs), with the
    sharding of the other dimensions kept."""
    s = aval.sharding
    return aval.update(shape=aval.shape[1:], sharding=None if s is None else
                       NamedSharding(s.mesh, PartitionSpec(*tuple(s.spec)[1:])))


def stacked(aval, n: int):
    """`n` values of `aval` stacked along a new, unsplit leading dimension (scan's ys)."""
    s = aval.sharding
    return aval.update(shape=(n, *aval.shape), sharding=None if s is None else
                       NamedSharding(s.mesh, PartitionSpec(None, *s.spec)))
