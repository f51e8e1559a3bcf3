"""Shardings: how an array's elements are laid out on devices.

A `Sharding` maps each device to the slice of the global array it holds
(`devices_indices_map`). `NamedSharding(mesh, P("x", None))` splits dimension 0 over mesh axis
"x" and keeps dimension 1 whole; devices along the other mesh axes hold copies (replicas).
`SingleDeviceSharding(d)` puts the whole array on one device.

Mirrors jax/_src/sharding.py (Sharding), jax/_src/named_sharding.py (NamedSharding),
jax/_src/sharding_impls.py (SingleDeviceSharding) and jax/_src/partition_spec.py
(PartitionSpec). Taught in chapters/12-sharding.md.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from minijax.mesh import (  # noqa: F401 (re-exported)
    AbstractMesh, AxisType, Mesh, get_abstract_mesh, get_concrete_mesh, make_mesh, set_mesh,
)


# JAX: jax/_src/sharding.py IndivisibleError
class IndivisibleError(ValueError):
    """A dimension's size is not divisible by the number of shards its spec asks for."""


# JAX: jax/_src/named_sharding.py DuplicateSpecError
class DuplicateSpecError(Exception):
    """A PartitionSpec names one mesh axis for two dimensions."""

    def __init__(self, message, mesh=None, pspec=None):
        super().__init__(message)
        self.message, self.mesh, self.pspec = message, mesh, pspec


class _Unconstrained:
    def __repr__(self) -> str:
        return "UNCONSTRAINED"


def _canonicalize_partition(p):
    """One entry of a spec: None, an axis name, or a tuple of names (a 1-tuple is the name)."""
    if p is None or isinstance(p, _Unconstrained):
        return p
    if isinstance(p, (tuple, list)):
        p = tuple(p)
        for a in p:
            if not isinstance(a, str):
                raise TypeError(f"PartitionSpec entries must be None, axis names or tuples "
                                f"of axis names, got {p!r}")
        return p[0] if len(p) == 1 else p
    if isinstance(p, str):
        return p
    raise TypeError(f"PartitionSpec entries must be None, axis names or tuples of axis names, "
                    f"got {p!r}")


# JAX: jax/_src/partition_spec.py P — differs: compared by value (JAX interns instances and
# compares by identity, which gives the same answers); no unreduced/reduced axes yet
class PartitionSpec:
    """Per array dimension: None (not split), a mesh axis name, or a tuple of names (split
    over their product, major to minor). Trailing dimensions left out are not split.
    `P("x")` and `P("x", None)` describe the same layout but are different specs (as in JAX).
    """

    __slots__ = ("_partitions",)
    UNCONSTRAINED = _Unconstrained()

    def __init__(self, *partitions) -> None:
        object.__setattr__(self, "_partitions",
                           tuple(_canonicalize_partition(p) for p in partitions))

    def __setattr__(self, name, value):
        raise AttributeError("PartitionSpec is immutable")

    @property
    def partitions(self) -> tuple:
        return self._partitions

    def __eq__(self, other) -> bool:
        return isinstance(other, PartitionSpec) and self._partitions == other._partitions

    def __hash__(self) -> int:
        return hash(("P", self._partitions))

    def __repr__(self) -> str:
        return f"P({repr(self._partitions)[1:-1]})"

    def __getitem__(self, i):
        return self._partitions[i]

    def __iter__(self):
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)

    def __add__(self, other):
        if isinstance(other, (PartitionSpec, tuple)):
            return PartitionSpec(*self, *other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            return PartitionSpec(*other, *self)
        return NotImplemented

    def index(self, value) -> int:
        return self._partitions.index(_canonicalize_partition(value))

    def count(self, value) -> int:
        return self._partitions.count(_canonicalize_partition(value))

    def _normalized_spec_for_aval(self, ndim: int) -> "PartitionSpec":
        out = [None if isinstance(p, _Unconstrained) else p for p in self._partitions]
        return PartitionSpec(*out, *[None] * (ndim - len(out)))

    def _check_compatible_wrt_shape(self, shape) -> None:
        if len(shape) < len(self._partitions):
            extra = " For scalars the PartitionSpec should be P()" if not shape else ""
            raise ValueError(f"PartitionSpec {self} is only valid for values of rank at least "
                             f"{len(self._partitions)}, but was applied to a value of rank "
                             f"{len(shape)}.{extra}")


P = PartitionSpec


def _axes_of(p) -> tuple:
    if p is None or isinstance(p, _Unconstrained):
        return ()
    return p if isinstance(p, tuple) else (p,)


# JAX: jax/_src/sharding_impls.py SingleDeviceSharding — differs: JAX checks the kind in jaxlib
# (C++); here None stays None (read as "device")
def _check_memory_kind(kind: str | None, device) -> str | None:
    """`kind` if `device` can address it (or `kind` is None); ValueError (JAX's message)
    naming the kinds it can address otherwise."""
    if kind is None or device is None or not hasattr(device, "addressable_memories"):
        return kind
    kinds = [m.kind for m in device.addressable_memories()]
    if kind not in kinds:
        raise ValueError(f"Could not find memory addressable by device {device.device_kind}. "
                         f"Device {device.device_kind} can address the following memory "
                         f"kinds: {', '.join(kinds)}. Got memory kind: {kind}")
    return kind


# JAX: jax/_src/sharding.py Sharding
class Sharding:
    """Base class: a layout of arrays on a set of devices. Subclasses define
    `_device_assignment` (the devices, in the order the compiled program numbers them) and
    `devices_indices_map(shape)` (device -> tuple of slices)."""

    @property
    def memory_kind(self) -> str:
        """Which memory of its devices the array lives in: "device", "pinned_host" or
        "unpinned_host" on CPU (chapters/24-memory-offloading.md)."""
        return self.__dict__.get("_memory_kind") or "device"

    @property
    def device_set(self) -> set:
        return set(self._device_assignment)

    @property
    def num_devices(self) -> int:
        return len(self._device_assignment)

    @property
    def addressable_devices(self) -> set:
        return self.device_set

    @property
    def is_fully_addressable(self) -> bool:
        return True  # one process: every device is ours

    def addressable_devices_indices_map(self, global_shape) -> dict:
        return self.devices_indices_map(global_shape)

    def shard_shape(self, global_shape) -> tuple:
        """The shape of each device's shard of an array of `global_shape`."""
        idx = next(iter(self.devices_indices_map(tuple(global_shape)).values()))
        return tuple(len(range(*s.indices(n))) for s, n in zip(idx, global_shape))

    def is_equivalent_to(self, other: "Sharding", ndim: int) -> bool:
        """Same devices holding the same slices (for any array of rank `ndim`)."""
        shape = (math.prod(len(self._device_assignment) for _ in range(1)),) * ndim
        return (self._device_assignment == other._device_assignment and
                self.devices_indices_map(shape) == other.devices_indices_map(shape))


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


# JAX: jax/_src/named_sharding.py NamedSharding
class NamedSharding(Sharding):
    """A `PartitionSpec` over a `Mesh`: dimension i is split over the mesh axes `spec[i]`
    names; each device holds the block at its mesh coordinates.

    Raises ValueError naming the spec and mesh for an axis the mesh does not have, and
    DuplicateSpecError for an axis used twice.
    """

    def __init__(self, mesh: Mesh, spec: PartitionSpec, *, memory_kind: str | None = None):
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"NamedSharding: spec must be a PartitionSpec, got {spec!r}")
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding: mesh must be a Mesh, got {mesh!r}")
        self.mesh = mesh
        self.spec = spec
        devices = getattr(mesh, "devices", None)
        self._memory_kind = _check_memory_kind(
            memory_kind, None if devices is None else devices.flat[0])
        seen: set = set()
        for p in spec:
            for a in _axes_of(p):
                if a not in mesh.axis_names:
                    raise ValueError(f"Resource axis: {a} of {spec} is not found in mesh: "
                                     f"{mesh.axis_names}.")
                if a in seen:
                    raise DuplicateSpecError(
                        f"A single NamedSharding spec specification can map every mesh axis "
                        f"to at most one positional dimension, but {spec} has duplicate "
                        f"entries for `{a}`", mesh, spec)
                seen.add(a)

    @property
    def _device_assignment(self) -> tuple:
        return tuple(self.mesh.devices.flat)

    def with_memory_kind(self, kind: str) -> "NamedSharding":
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    @property
    def is_fully_replicated(self) -> bool:
        sizes = self.mesh.shape
        return all(sizes[a] == 1 for p in self.spec for a in _axes_of(p))

    def check_compatible_aval(self, shape, what: str = "value") -> None:
        """Raise ValueError if the spec is longer than the rank of `shape`, and
        IndivisibleError if a dimension is not divisible by its number of shards."""
        self.spec._check_compatible_wrt_shape(shape)
        factors = self._tiling(len(shape))
        for d, (n, f) in enumerate(zip(shape, factors)):
            if n % f and self.mesh.explicit_axes:
                # JAX checks Explicit meshes when typing the value (a plain ValueError)
                raise ValueError(
                    f"Sharding spec {tuple(self.spec)} implies that array axis {d} is "
                    f"partitioned {f} times, but does not evenly divide the dimension size "
                    f"{n}. Got shape: {tuple(shape)} and sharding {self}")
            if n % f:
                raise IndivisibleError(
                    f"Sharding {self} implies that array axis {d} is partitioned {f} times, "
                    f"but the dimension size is {n} (full shape: {tuple(shape)}, per-dimension "
                    f"tiling factors: {factors} should evenly divide the shape)")

    def _tiling(self, ndim: int) -> list[int]:
        sizes = self.mesh.shape
        spec = self.spec._normalized_spec_for_aval(ndim)
        return [math.prod(sizes[a] for a in _axes_of(p)) for p in spec]

    def devices_indices_map(self, global_shape) -> dict:
        """device -> tuple of slices, one per dimension (slice(None) for a whole one).

        The device at mesh coordinates c holds, along dimension i, block number
        sum over the axes a of spec[i] (major to minor) of c[a] times the sizes of the axes
        after a; blocks are shape[i] / (product of those axis sizes) long."""
        global_shape = tuple(global_shape)
        self.check_compatible_aval(global_shape)
        names, sizes = self.mesh.axis_names, self.mesh.shape
        spec = self.spec._normalized_spec_for_aval(len(global_shape))
        out = {}
        for coords in itertools.product(*[range(s) for s in self.mesh.axis_sizes]):
            at = dict(zip(names, coords))
            idx = []
            for p, n in zip(spec, global_shape):
                axes = _axes_of(p)
                if not axes:
                    idx.append(slice(None))
                    continue
                block, count = 0, 1
                for a in axes:
                    block, count = block * sizes[a] + at[a], count * sizes[a]
                step = n // count
                idx.append(slice(block * step, (block + 1) * step))
            out[self.mesh.devices[coords]] = tuple(idx)
        return out

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, NamedSharding) and self.mesh == other.mesh
                                 and self.spec == other.spec
                                 and self.memory_kind == other.memory_kind)

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(("NamedSharding", self.mesh, self.spec,
                                               self.memory_kind))
        return h

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec}, memory_kind={self.memory_kind})"

    __str__ = __repr__


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


# JAX: jax/_src/api.py device_put (the sharded case) and pxla.py _shard_np_array
def device_put_sharded_tree(x, sharding: Sharding):
    """`device_put(x, sharding)` for a pytree `x`: every leaf is checked against `sharding`
    first (rank, divisibility), then each is cut into blocks and placed (committed)."""
    from minijax import compiler, core
    from minijax.array import Array
    from minijax.tree_util import tree_flatten, tree_unflatten
    leaves, tree = tree_flatten(x)
    avals = [leaf.aval if isinstance(leaf, Array) else core.get_aval(leaf) for leaf in leaves]
    for aval in avals:  # all checks before any placement: nothing is left half-placed
        if not isinstance(sharding, NamedSharding):  # one device (in some memory kind)
            continue
        try:
            sharding.spec._check_compatible_wrt_shape(aval.shape)
        except ValueError as e:
            raise ValueError(f"One of device_put args is incompatible with its sharding "
                             f"annotation {sharding}: {e}") from None
        sharding.check_compatible_aval(aval.shape)
    out = []
    for leaf, aval in zip(leaves, avals):
        if isinstance(leaf, Array) and leaf._sharding == sharding:
            out.append(leaf)
            continue
        val = leaf._value() if isinstance(leaf, Array) else core.to_numpy(leaf, aval)
        buf = compiler.device_put_sharded(np.asarray(val), sharding)
        out.append(Array(aval, None, buf, True, sharding))
    return tree_unflatten(tree, out)


# JAX: jax/_src/array.py make_array_from_callback
def make_array_from_callback(shape, sharding: Sharding, data_callback, dtype=None):
    """An Array of global `shape` laid out by `sharding`, whose block on each device is
    `data_callback(index)` (index: a tuple of slices into the global array). The callback is
    called once per distinct block; its results must have the block's shape.
    Raises ValueError for a block of the wrong shape or a sharding that does not fit."""
    from minijax import core
    from minijax.array import Array
    shape = tuple(shape)
    index_map = sharding.devices_indices_map(shape)
    blocks: dict = {}
    out = None
    for d in sharding._device_assignment:
        idx = index_map[d]
        key = tuple((sl.start, sl.stop) for sl in idx)
        if key not in blocks:
            blocks[key] = np.asarray(data_callback(idx), dtype=dtype)
        b = blocks[key]
        if out is None:
            out = np.empty(shape, b.dtype)
        want = out[idx].shape
        if b.shape != want:
            raise ValueError(f"make_array_from_callback: the callback returned shape {b.shape} "
                             f"for index {idx}, expected {want}")
        out[idx] = b
    aval = core.ShapedArray(shape, out.dtype)
    if isinstance(sharding, SingleDeviceSharding):
        return Array(aval, out, None, True)
    return Array(aval, None, _place(out, sharding), True, sharding)


def _place(value, sharding):
    from minijax import compiler
    return compiler.device_put_sharded(value, sharding)


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
