"""Sharding and NamedSharding: how an array's elements are laid out on devices.

A `Sharding` maps each device to the slice of the global array it holds
(`devices_indices_map`). `NamedSharding(mesh, P("x", None))` splits dimension 0 over mesh axis
"x" and keeps dimension 1 whole; devices along the other mesh axes hold copies (replicas).

Mirrors jax/_src/named_sharding.py (NamedSharding) and jax/_src/sharding.py (the `Sharding`
base class, here beside its main subclass because minijax/sharding.py is the public module,
jax/sharding.py). `SingleDeviceSharding` and the helpers built on these classes are in
minijax/sharding_impls.py. Taught in chapters/12-sharding.md.
"""

from __future__ import annotations

import itertools
import math

from minijax import xla_bridge
from minijax.mesh import AbstractMesh, AxisType, Mesh
from minijax.partition_spec import PartitionSpec, _axes_of, _Unconstrained


# JAX: jax/_src/sharding.py IndivisibleError
class IndivisibleError(ValueError):
    """A dimension's size is not divisible by the number of shards its spec asks for."""


# JAX: jax/_src/named_sharding.py DuplicateSpecError
class DuplicateSpecError(Exception):
    """A PartitionSpec names one mesh axis for two dimensions."""

    def __init__(self, message, mesh=None, pspec=None):
        super().__init__(message)
        self.message, self.mesh, self.pspec = message, mesh, pspec


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

    # JAX: jax/_src/sharding.py Sharding.addressable_devices — with several processes
    # (jax.distributed), the devices of this one
    @property
    def addressable_devices(self) -> set:
        me = xla_bridge.get_backend().process_index()
        return {d for d in self._device_assignment if d.process_index == me}

    @property
    def is_fully_addressable(self) -> bool:
        return len(self.addressable_devices) == len(self._device_assignment)

    def addressable_devices_indices_map(self, global_shape) -> dict:
        mine = self.addressable_devices
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if d in mine}

    def shard_shape(self, global_shape) -> tuple:
        """The shape of each device's shard of an array of `global_shape`."""
        idx = next(iter(self.devices_indices_map(tuple(global_shape)).values()))
        return tuple(len(range(*s.indices(n))) for s, n in zip(idx, global_shape))

    # JAX: jax/_src/sharding.py common_is_equivalent_to — differs: compares the slices each
    # device holds, not HloShardings
    def is_equivalent_to(self, other: "Sharding", ndim: int) -> bool:
        """Same devices in the same order, same memory kind, each holding the same slices of
        an array of rank `ndim`: `P('a')` and `P('a', None)` are one layout, and a spec may
        run past `ndim` with `None`s. Raises ValueError for a mesh axis past `ndim` (JAX:
        an internal IndexError)."""
        a, b = self._for_rank(ndim), other._for_rank(ndim)
        shape = (len(self._device_assignment),) * ndim
        return (a._device_assignment == b._device_assignment and a.memory_kind == b.memory_kind
                and a.devices_indices_map(shape) == b.devices_indices_map(shape))

    def _for_rank(self, ndim: int) -> "Sharding":
        return self



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
        if AxisType.Auto not in mesh.axis_types and any(
                isinstance(p, _Unconstrained) for p in spec):
            raise ValueError(f"{spec} cannot contain `P.UNCONSTRAINED` when no mesh axis_types "
                             f"are `Auto`. Got mesh axis_types: {mesh.axis_types}")

    @property
    def _device_assignment(self) -> tuple:
        return tuple(self.mesh.devices.flat)

    def with_memory_kind(self, kind: str) -> "NamedSharding":
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    @property
    def is_fully_replicated(self) -> bool:
        sizes = self.mesh.shape
        return all(sizes[a] == 1 for p in self.spec for a in _axes_of(p))

    def check_compatible_aval(self, shape, what: str = "value", typed: bool = True) -> None:
        """Raise ValueError if the spec is longer than the rank of `shape`, and
        IndivisibleError if a dimension is not divisible by its number of shards (on a mesh
        with Explicit axes a plain ValueError, JAX's typing error, unless not `typed`: an
        output laid out by `out_shardings`)."""
        self.spec._check_compatible_wrt_shape(shape)
        factors = self._tiling(len(shape))
        for d, (n, f) in enumerate(zip(shape, factors)):
            if n % f and self.mesh.explicit_axes and typed:
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

    def _for_rank(self, ndim: int) -> "NamedSharding":
        if len(self.spec) <= ndim:
            return self
        if any(_axes_of(p) for p in self.spec[ndim:]):
            raise ValueError(f"is_equivalent_to: {self.spec} splits a dimension past the "
                             f"{ndim} of the array")
        return NamedSharding(self.mesh, PartitionSpec(*self.spec[:ndim]),
                             memory_kind=self.memory_kind)

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
                axes = [a for a in _axes_of(p) if sizes[a] > 1]
                if not axes:  # unsplit (axes of size 1 split nothing, as in JAX)
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
