"""Shardings: how an array's elements are laid out on devices.

A `Sharding` maps each device to the slice of the global array it holds
(`devices_indices_map`). `NamedSharding(mesh, P("x", None))` splits dimension 0 over mesh axis
"x" and keeps dimension 1 whole; devices along the other mesh axes hold copies (replicas).
`SingleDeviceSharding(d)` puts the whole array on one device.

Sharding in types: on a mesh with Explicit axes an aval carries its layout (`f32[8@x,4]`,
`aval_sharding`), and the rules below (elementwise, dot_general, reshape, slicing, ...) compute
each result's, registered per primitive with `Primitive.def_sharding_rule` (minijax/core.py).
Placing arrays on devices is in minijax/compiler.py (`device_put_sharded_tree`, as JAX's
pxla.py shards arguments) and minijax/api.py (`make_array_from_callback`), and
`visualize_sharding` in minijax/debugging.py, as in JAX: this module holds the types and their
rules only.

Mirrors jax/_src/sharding.py (Sharding), jax/_src/named_sharding.py (NamedSharding),
jax/_src/sharding_impls.py (SingleDeviceSharding) and jax/_src/partition_spec.py
(PartitionSpec). Taught in chapters/12-sharding.md.
"""

from __future__ import annotations

import functools
import itertools
import math


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

    # JAX: jax/_src/sharding.py Sharding.addressable_devices — with several processes
    # (jax.distributed), the devices of this one
    @property
    def addressable_devices(self) -> set:
        from minijax import compiler  # not at the top: compiler imports this module
        me = compiler.backend().process_index()
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


# ---------------------------------------------------------------------------------------------
# Sharding in types: the sharding an aval carries, and the rules that compute it
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py ShardingTypeError
class ShardingTypeError(Exception):
    """A primitive's sharding rule cannot tell how its result is laid out (ambiguous or
    incompatible operand shardings); the message says which argument to add (`out_sharding`)
    or which `reshard` would fix it."""


# JAX: jax/_src/core.py update_aval_with_sharding + modify_spec_for_auto_manual
@functools.lru_cache(maxsize=1024)
def aval_sharding(sharding, ndim: int) -> "NamedSharding | None":
    """The sharding the type of a value laid out by `sharding` carries: over the abstract
    mesh, one spec entry per dimension, naming only the mesh's Explicit axes (Auto axes are
    the partitioner's business, not the type's). None when the mesh has no Explicit axis:
    then the type says nothing about layout, as before sharding in types."""
    if not isinstance(sharding, NamedSharding) or not sharding.mesh.explicit_axes:
        return None
    explicit = set(sharding.mesh.explicit_axes)
    spec = []
    for p in sharding.spec._normalized_spec_for_aval(ndim):
        axes = tuple(a for a in _axes_of(p) if a in explicit)
        spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return NamedSharding(sharding.mesh.abstract_mesh, PartitionSpec(*spec))


def _spec_size(mesh, p) -> int:
    return math.prod(mesh.shape[a] for a in _axes_of(p))


def _one_mesh(name: str, avals) -> "AbstractMesh | None":
    mesh = None
    for a in avals:
        if a.sharding is not None:
            if mesh is not None and a.sharding.mesh != mesh:
                raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one mesh: "
                                        f"{mesh} and another mesh: {a.sharding.mesh}")
            mesh = a.sharding.mesh
    return mesh


def _spec_of(aval) -> tuple:
    return tuple(aval.sharding.spec) if aval.sharding is not None else (None,) * aval.ndim


def _with_spec(mesh, spec) -> "NamedSharding | None":
    return None if mesh is None else NamedSharding(mesh, PartitionSpec(*spec))


# JAX: jax/_src/lax/lax.py broadcasting_sharding_rule
def broadcasting_sharding_rule(name: str, *avals):
    """Elementwise ops: per dimension, the one layout the operands agree on (rank-0 operands
    and unsplit size-1 dimensions do not count); ShardingTypeError if two disagree."""
    mesh = _one_mesh(name, avals)
    ranked = [a for a in avals if a.ndim]
    if mesh is None or not ranked:
        return _with_spec(mesh, ())
    specs = [_spec_of(a) for a in ranked]
    out = []
    for i, column in enumerate(zip(*specs)):
        kept = {s for s, a in zip(column, ranked) if not (s is None and a.shape[i] == 1)}
        kept.discard(None) if len(kept) > 1 else None
        if len(kept) > 1:
            raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: "
                                    f"{', '.join(str(s) for s in specs)}.")
        out.append(kept.pop() if kept else None)
    used = [a for p in out for a in _axes_of(p)]
    if len(used) != len(set(used)):  # two dimensions over one mesh axis
        raise ShardingTypeError(f"{name} operation with inputs: "
                                f"{', '.join(a.str_short() for a in avals)} produces an "
                                f"illegally sharded result: spec {tuple(out)}")
    return _with_spec(mesh, out)


def same_sharding_rule(name: str, *avals):
    """Ops whose operands must all be laid out alike (select_n's cases, concatenate)."""
    mesh = _one_mesh(name, avals)
    given = [a.sharding for a in avals if a.sharding is not None and a.ndim]
    if any(s != given[0] for s in given[1:]):
        raise ShardingTypeError(f"{name}: all operands should have the same sharding. Got "
                                f"shardings {', '.join(str(a.sharding) for a in avals)}")
    return given[0] if given else _with_spec(mesh, (None,) * max(a.ndim for a in avals))


def varying_shape_sharding_rule(name: str, aval, out_shape):
    """Slicing and padding: a dimension whose size changes keeps its layout only if the new
    size still splits evenly over its mesh axes (JAX:
    jax/_src/lax/slicing.py _get_sharding_for_varying_out_shape)."""
    if aval.sharding is None:
        return None
    mesh = aval.sharding.mesh
    for n_in, n_out, p in zip(aval.shape, out_shape, aval.sharding.spec):
        if n_in != n_out and p is not None and n_out % _spec_size(mesh, p):
            raise ShardingTypeError(
                f"{name} on sharded dims where out dim ({n_out}) is not divisible by mesh "
                f"axes ({_spec_size(mesh, p)}) with spec ({p}) is not implemented. Got input "
                f"type={aval.str_short()} and output shape={tuple(out_shape)}")
    return aval.sharding


# JAX: jax/_src/lax/lax.py _dot_general_sharding_rule
def dot_general_sharding_rule(lhs, rhs, dimension_numbers, out_sharding):
    """batch dims + lhs free dims + rhs free dims, each keeping its operand's layout; a
    contracting dimension split on both sides leaves the result's layout open (a reduce-
    scatter or an all-reduce?), so it asks for `out_sharding`."""
    mesh = _one_mesh("dot_general", (lhs, rhs))
    if out_sharding is not None:
        return out_sharding
    if mesh is None:
        return None
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = _spec_of(lhs), _spec_of(rhs)
    lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    lbs, rbs = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
    if any(a != b and a is not None and b is not None for a, b in zip(lbs, rbs)):
        raise ShardingTypeError(f"dot_general requires lhs batch dimensions and rhs batch "
                                f"dimensions to have the consistent sharding, got {lbs} and "
                                f"{rbs}.")
    for a, b in zip(lcs, rcs):
        if a is not None and b is not None:
            if a != b:
                raise ShardingTypeError(f"dot_general requires contracting dimensions to "
                                        f"have consistent sharding, got {lcs} and {rcs}.")
            raise ShardingTypeError(
                "Contracting dimensions are sharded and it is ambiguous how the output "
                "should be sharded. Please specify the output sharding via the "
                f"`out_sharding` parameter. Got lhs_contracting_spec={lcs} and "
                f"rhs_contracting_spec={rcs}")
    batch = [a if a is not None else b for a, b in zip(lbs, rbs)]
    l_free = [s for i, s in enumerate(ls) if i not in lc and i not in lb]
    r_free = [s for i, s in enumerate(rs) if i not in rc and i not in rb]
    out = batch + l_free + r_free
    used = [a for p in out for a in _axes_of(p)]
    if len(used) != len(set(used)):
        raise ShardingTypeError(f"dot_general: the result would be split over one mesh axis "
                                f"twice ({out}); pass `out_sharding`")
    return _with_spec(mesh, out)


# JAX: jax/_src/lax/lax.py _reshape_sharding_rule — differs: one grouping walk instead of
# JAX's split/merge special cases (same answers for splitting and merging dimensions)
def reshape_sharding_rule(aval, new_sizes, sharding):
    """Group the old and new dimensions into runs of equal product; a run keeps its layout
    when only its first old dimension is split and that split still divides the first new
    dimension. Anything else asks for the `sharding` (out_sharding) argument."""
    if sharding is not None or aval.sharding is None:
        return sharding
    if 0 in aval.shape:
        return _with_spec(aval.sharding.mesh, (None,) * len(new_sizes))
    mesh, spec = aval.sharding.mesh, _spec_of(aval)
    old, new, out = list(aval.shape), list(new_sizes), []
    i = j = 0
    while i < len(old) or j < len(new):
        gi, gj, po, pn = [i], [j], old[i] if i < len(old) else 1, new[j] if j < len(new) else 1
        i, j = i + 1, j + 1
        while po != pn:
            if po < pn:
                gi.append(i)
                po *= old[i]
                i += 1
            else:
                gj.append(j)
                pn *= new[j]
                j += 1
        gi, gj = [k for k in gi if k < len(old)], [k for k in gj if k < len(new)]
        ps = [spec[k] for k in gi]
        first = ps[0] if ps else None
        ok = all(p is None for p in ps[1:]) and (
            first is None or (gj and new[gj[0]] % _spec_size(mesh, first) == 0))
        if not ok:
            raise ShardingTypeError(
                f"This reshape is not supported. Please specify the sharding of the output "
                f"via the `out_sharding` argument of jax.lax.reshape. Got operand shape: "
                f"{tuple(aval.shape)}, new sizes: {tuple(new_sizes)} and operand spec: "
                f"{aval.sharding.spec}")
        if gj:
            out.extend([first] + [None] * (len(gj) - 1))
    return _with_spec(mesh, out)


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


def reshard(xs, out_shardings):
    """Change the sharding of the values of `xs` (and of their types): see
    `minijax/pjit.py: reshard`, where the primitive lives, next to with_sharding_constraint."""
    from minijax import pjit  # not at the top: pjit imports this module
    return pjit.reshard(xs, out_shardings)


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


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """See `minijax/pjit.py: auto_axes`."""
    from minijax import pjit  # not at the top: pjit imports this module
    return pjit.auto_axes(f, axes=axes, out_sharding=out_sharding)


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """See `minijax/pjit.py: explicit_axes`."""
    from minijax import pjit  # not at the top: pjit imports this module
    return pjit.explicit_axes(f, axes=axes, in_sharding=in_sharding)
