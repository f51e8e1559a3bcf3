"""Meshes: a named grid of devices (`Mesh`), its device-free shape (`AbstractMesh`), and the
type of each axis (`AxisType`).

A mesh gives the devices of a computation names and a shape: `Mesh(devices.reshape(4, 2),
("x", "y"))` says "4 rows called x, 2 columns called y". A `PartitionSpec` then names, per
array dimension, the mesh axes that dimension is split over (minijax/partition_spec.py).
Mirrors jax/_src/mesh.py. Taught in chapters/12-sharding.md.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import threading
from typing import Any, Sequence

import numpy as np

from minijax import xla_bridge


# JAX: jax/_src/mesh.py AxisType
class AxisType(enum.Enum):
    """How a mesh axis is treated when tracing:

    - `Auto`: the partitioner (Shardy) chooses how values are laid out along the axis.
    - `Explicit`: the layout along the axis is part of each value's type (`f32[8@x]`; JAX
      0.10's default for `make_mesh`): each primitive's sharding rule types its result, and
      ambiguity is a `ShardingTypeError` (minijax/sharding_impls.py).
    - `Manual`: inside `shard_map`, the program sees one shard per device.
    """
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name


def _normalize_axis_types(axis_names: tuple, axis_types, default: AxisType) -> tuple:
    if axis_types is None:
        return (default,) * len(axis_names)
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,)
    axis_types = tuple(axis_types)
    if len(axis_types) != len(axis_names):
        raise ValueError(f"Number of axis names should match the number of axis_types. Got "
                         f"axis_names={axis_names} and axis_types={axis_types}")
    for t in axis_types:
        if not isinstance(t, AxisType):
            raise TypeError(f"axis_types must be AxisType values, got {t!r}")
    return axis_types


def _axes_str(names, sizes, types) -> str:
    axes = ", ".join(f"'{n}': {s}" for n, s in zip(names, sizes)) or "()"
    return f"{axes}, axis_types={tuple(types)!r}"


class _BaseMesh:
    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple

    @property
    def shape(self) -> dict:
        """Axis name -> size, in mesh order (JAX returns an OrderedDict)."""
        import collections
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def empty(self) -> bool:
        return not self.axis_names

    def _any_axis(self, t: AxisType) -> bool:
        return t in self.axis_types

    @property
    def are_all_axes_explicit(self) -> bool:
        return all(t is AxisType.Explicit for t in self.axis_types)

    @property
    def are_all_axes_auto(self) -> bool:
        return all(t is AxisType.Auto for t in self.axis_types)

    @functools.cached_property  # a mesh never changes: every sharded result asks this
    def explicit_axes(self) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is AxisType.Explicit)

    @property
    def auto_axes(self) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is AxisType.Auto)


# JAX: jax/_src/mesh.py Mesh — differs: no context-manager resource env, no process grid
class Mesh(_BaseMesh):
    """A numpy array of devices with one name per axis.

    Args:
      devices: an array (or nested list) of distinct devices; its shape is the mesh shape.
      axis_names: one name per axis of `devices` (a string is one name).
      axis_types: one `AxisType` per axis; default `Auto` (as `jax.sharding.Mesh`).
    Raises ValueError if the number of names differs from the rank of `devices`, names repeat,
    or a device appears twice.
    Equal meshes (same devices in the same places, names and types) hash alike.
    """

    def __init__(self, devices: Any, axis_names: str | Sequence[str], axis_types=None) -> None:
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        devs = np.array(devices, dtype=object) if not isinstance(devices, np.ndarray) else devices
        if devs.ndim != len(axis_names):
            raise ValueError(f"Mesh requires the ndim of its first argument (`devices`) to equal "
                             f"the length of its second argument (`axis_names`), but got "
                             f"devices.ndim == {devs.ndim} and len(axis_names) == "
                             f"{len(axis_names)}.")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh axis names must be unique, got {axis_names}")
        if len({d.id for d in devs.flat}) != devs.size:
            raise ValueError(f"Mesh devices must be distinct, got {list(devs.flat)}")
        devs = devs.copy()
        devs.flags.writeable = False
        self.devices = devs
        self.axis_names = axis_names
        self.axis_sizes = tuple(devs.shape)
        self.axis_types = _normalize_axis_types(axis_names, axis_types, AxisType.Auto)
        self._key = (tuple(d.id for d in devs.flat), self.axis_sizes, axis_names, self.axis_types)
        self._hash = hash(self._key)

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, Mesh) and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def devices_flat(self) -> list:
        return list(self.devices.flat)

    @property
    def device_set(self) -> set:
        return set(self.devices.flat)

    @property
    def local_devices(self) -> list:
        return list(self.devices.flat)

    @property
    def abstract_mesh(self) -> "AbstractMesh":
        """The mesh without its devices: what tracing sees."""
        return AbstractMesh(self.axis_sizes, self.axis_names, axis_types=self.axis_types)

    def __str__(self) -> str:
        return f"Mesh({_axes_str(self.axis_names, self.axis_sizes, self.axis_types)})"

    def __repr__(self) -> str:
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"axis_types={self.axis_types!r})")


# JAX: jax/_src/mesh.py AbstractDevice
@dataclasses.dataclass(frozen=True)
class AbstractDevice:
    """The kind of device an `AbstractMesh` stands for (`device_kind='TPU v5 lite'`,
    `num_cores`, `platform='tpu'`), with no device behind it. A value only: minijax lowers
    for the platform of the devices it runs on."""
    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self) -> str:
        return (f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform})")


# JAX: jax/_src/mesh.py AbstractMesh
class AbstractMesh(_BaseMesh):
    """A mesh shape with axis names and types, and no devices (what tracing and types see).

    Args: axis_sizes, axis_names (same length), axis_types (default `Auto` for every axis),
    abstract_device (an `AbstractDevice`, or None). ValueError if the lengths differ.
    """

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[str], axis_types=None,
                 *, abstract_device: AbstractDevice | None = None):
        axis_sizes, axis_names = tuple(axis_sizes), tuple(axis_names)
        if len(axis_sizes) != len(axis_names):
            raise ValueError(f"AbstractMesh: {len(axis_sizes)} axis sizes but "
                             f"{len(axis_names)} axis names")
        self.axis_sizes = axis_sizes
        self.axis_names = axis_names
        self.axis_types = _normalize_axis_types(axis_names, axis_types, AxisType.Auto)
        self.abstract_device = abstract_device
        self._key = (axis_sizes, axis_names, self.axis_types, abstract_device)

    def __eq__(self, other) -> bool:
        return isinstance(other, AbstractMesh) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def abstract_mesh(self) -> "AbstractMesh":
        return self

    def __repr__(self) -> str:
        dev = self.abstract_device
        extra = "" if dev is None else repr(dev)[len("AbstractDevice("):-1]
        return (f"AbstractMesh({_axes_str(self.axis_names, self.axis_sizes, self.axis_types)}"
                f"{', ' + extra if extra else ''})")

    __str__ = __repr__


# JAX: jax/_src/mesh_utils.py + jax/_src/sharding_impls.py make_mesh — differs: devices are
# laid out in id order (JAX orders them by physical topology on TPUs; on CPU it is id order)
def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], axis_types=None, *,
              devices: Sequence[Any] | None = None) -> Mesh:
    """A `Mesh` of shape `axis_shapes` over the first prod(axis_shapes) devices.

    `axis_types` defaults to `AxisType.Explicit` for every axis, as in JAX 0.10.
    Raises ValueError if the mesh needs more devices than there are, or the lengths of
    `axis_shapes` and `axis_names` differ.
    """
    axis_shapes, axis_names = tuple(axis_shapes), tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(f"Length of axis_shapes {axis_shapes} must match the length of "
                         f"axis_names {axis_names}")
    devs = list(xla_bridge.get_backend().devices()) if devices is None else list(devices)
    n = math.prod(axis_shapes)
    if n > len(devs):
        raise ValueError(f"Number of devices {len(devs)} must be >= the product of mesh_shape "
                         f"{axis_shapes}")
    if devices is not None and n != len(devs):
        raise ValueError(f"Number of devices {len(devs)} must equal the product of mesh_shape "
                         f"{axis_shapes}")
    grid = np.empty(n, dtype=object)
    grid[:] = devs[:n]
    axis_types = _normalize_axis_types(axis_names, axis_types, AxisType.Explicit)
    return Mesh(grid.reshape(axis_shapes), axis_names, axis_types=axis_types)


# ---------------------------------------------------------------------------------------------
# The mesh in context: set_mesh
# ---------------------------------------------------------------------------------------------

class _MeshContext(threading.local):
    mesh: "Mesh | None" = None
    abstract: "AbstractMesh | None" = None  # set by use_abstract_mesh: it wins over `mesh`'s


_mesh_context = _MeshContext()
empty_abstract_mesh = AbstractMesh((), ())


# JAX: jax/_src/sharding_impls.py set_mesh
class set_mesh:
    """Make `mesh` the mesh in context, for this thread: as a call (a global setter) or as a
    context manager (restored on exit). Then a bare `PartitionSpec` can be passed where a
    sharding is expected (`device_put(x, P("x"))`, `with_sharding_constraint`).
    Raises ValueError for something that is not a Mesh (None clears the mesh)."""

    __slots__ = ("prev_mesh",)

    def __init__(self, mesh: "Mesh | None") -> None:
        if mesh is not None and not isinstance(mesh, Mesh):
            raise ValueError(f"Expected mesh of type `minijax.sharding.Mesh`. Got {type(mesh)}")
        if mesh is not None and AxisType.Manual in mesh.axis_types:
            raise ValueError(f"mesh {mesh} contains manual axes which is not allowed when "
                             "using `set_mesh`.")
        self.prev_mesh = _mesh_context.mesh
        _mesh_context.mesh = mesh

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        _mesh_context.mesh = self.prev_mesh


# JAX: jax/_src/mesh.py get_abstract_mesh
def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh in context (`use_abstract_mesh`), else that of the mesh in context
    (`set_mesh`), else the empty one."""
    if _mesh_context.abstract is not None:
        return _mesh_context.abstract
    mesh = _mesh_context.mesh
    return empty_abstract_mesh if mesh is None else mesh.abstract_mesh


# JAX: jax/_src/mesh.py get_concrete_mesh
def get_concrete_mesh() -> "Mesh | None":
    """The mesh in context (`set_mesh`), or None."""
    return _mesh_context.mesh


# JAX: jax/_src/mesh.py use_abstract_mesh
class use_abstract_mesh:
    """A context manager making `mesh` (an `AbstractMesh`) the abstract mesh that tracing sees
    (`get_abstract_mesh`: a bare `PartitionSpec` in `reshard`/`out_sharding=` names its axes),
    without devices. ValueError for something else than an AbstractMesh, and, as JAX, for one
    of another size than a non-empty abstract mesh already in context."""

    __slots__ = ("mesh", "prev")

    def __init__(self, mesh: AbstractMesh) -> None:
        if not isinstance(mesh, AbstractMesh):
            raise ValueError("Expected mesh of type `minijax.sharding.AbstractMesh`. Got type: "
                             f"{type(mesh)}")
        self.mesh = mesh

    def __enter__(self) -> None:
        prev = get_abstract_mesh()
        if not prev.empty and not self.mesh.empty and prev.size != self.mesh.size:
            raise ValueError(f"use_abstract_mesh cannot change the size of the mesh. Got new "
                             f"mesh: {self.mesh} with size={self.mesh.size} and prev mesh: "
                             f"{prev} with size={prev.size}")
        self.prev, _mesh_context.abstract = _mesh_context.abstract, self.mesh

    def __exit__(self, *exc) -> None:
        _mesh_context.abstract = self.prev


# JAX: jax/_src/core.py ManualAxisType
class ManualAxisType:
    """How a value inside `shard_map` relates to each manual mesh axis: `varying` (each device
    holds its own value), `unreduced` (partial sums still to add), `reduced`; an axis in none of
    them is invariant. An immutable value; ValueError when an axis is in two of the sets.
    minijax's avals record the varying axes alone (`ShapedArray.vma`)."""

    __slots__ = ("varying", "unreduced", "reduced")

    def __init__(self, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        for name, other in (("unreduced", unreduced), ("reduced", reduced)):
            if frozenset(varying) & frozenset(other):
                raise ValueError(f"varying and {name} cannot have common mesh axes. Got "
                                 f"varying={varying} and {name}={other}")
        varying, unreduced, reduced = map(frozenset, (varying, unreduced, reduced))
        for k, v in (("varying", varying), ("unreduced", unreduced), ("reduced", reduced)):
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError(f"ManualAxisType is immutable: cannot set {name!r}")

    def __eq__(self, other) -> bool:
        return isinstance(other, ManualAxisType) and self.vur_sets == other.vur_sets

    def __hash__(self) -> int:
        return hash(self.vur_sets)

    @property
    def vur_sets(self) -> tuple:
        return self.varying, self.unreduced, self.reduced

    @property
    def vur(self) -> frozenset:
        """The axes in any of the three sets."""
        return self.varying | self.unreduced | self.reduced

    @property
    def empty(self) -> bool:
        return not self.vur

    def update(self, **kwargs) -> "ManualAxisType":
        return ManualAxisType(**{"varying": self.varying, "unreduced": self.unreduced,
                                 "reduced": self.reduced, **kwargs})

    def to_ct_mat(self) -> "ManualAxisType":
        """The type of a cotangent: unreduced and reduced swap."""
        return self.update(unreduced=self.reduced, reduced=self.unreduced)

    def invarying(self, mesh) -> frozenset:
        """The manual axes of `mesh` the value is invariant over."""
        manual = {n for n, t in zip(mesh.axis_names, mesh.axis_types) if t == AxisType.Manual}
        return frozenset(manual) - self.vur

    def __repr__(self) -> str:
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")
