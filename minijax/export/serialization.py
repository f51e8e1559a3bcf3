"""`Exported` to bytes and back, in the FlatBuffers layout of JAX's `serialization.fbs`, so that
an artifact written here loads in `jax.export.deserialize` and one written by JAX loads here.

The FlatBuffers wire format is small enough to write out in full (no `flatbuffers` package):
a buffer starts with the offset of its root table; a table starts with the signed distance
back to its vtable, which lists where each field sits (0: absent, read the default); a field
holding a table, string or vector stores the unsigned distance forward to it; a vector is its
length (u32) followed by its elements; a string is a vector of bytes ending in a NUL.

Mirrors jax/_src/export/serialization.py (and the generated serialization_generated.py).
Taught in chapters/31-export.md.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from minijax import core, dtypes
from minijax.export import shape_poly
from minijax.mesh import AbstractMesh, AxisType
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import PartitionSpec
from minijax.tree_util import PyTreeDef, tree_structure

# JAX: jax/_src/export/serialization.py _SERIALIZATION_VERSION — differs: JAX writes 3 in
# the field for the sake of old readers, and so do we
_SERIALIZATION_VERSION = 3

# ---------------------------------------------------------------------------------------------
# The FlatBuffers wire format
# ---------------------------------------------------------------------------------------------

# scalar field types of the schema: struct format letter, byte size
_SCALARS = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
            "int32": "i", "uint32": "I"}


class Table:
    """A table to write: `fields[slot] = (type, value)`; type is a scalar name of `_SCALARS`,
    or "ref" for a Table / String / Vector value."""

    def __init__(self) -> None:
        self.fields: dict[int, tuple[str, Any]] = {}

    def set(self, slot: int, kind: str, value: Any) -> "Table":
        if value is not None:
            self.fields[slot] = (kind, value)
        return self


class Vector:
    """A vector to write: of scalars (`kind` a `_SCALARS` name) or of refs (`kind="ref"`)."""

    def __init__(self, kind: str, items) -> None:
        self.kind, self.items = kind, list(items)


def _strings(xs) -> Vector:
    return Vector("ref", [str(x).encode() for x in xs])


def encode(root: Table) -> bytes:
    """Lay out `root` and everything it refers to, parents before children (so that every
    reference points forward, as the format's unsigned offsets require)."""
    buf = bytearray(4)
    pending = [(0, root)]  # (where a u32 reference to the object is to be written, object)

    def align(n: int) -> None:
        buf.extend(b"\0" * (-len(buf) % n))

    while pending:
        ref_at, obj = pending.pop(0)
        if isinstance(obj, Table):
            slots = max(obj.fields, default=-1) + 1
            vt_size = 4 + 2 * slots
            # the vtable, then the table right after it, starting on a 4-byte boundary
            buf.extend(b"\0" * (-(len(buf) + vt_size) % 4))
            vt_at = len(buf)
            buf.extend(b"\0" * vt_size)
            at = len(buf)
            body = bytearray(4)  # the soffset to the vtable
            offsets = [0] * slots
            # widest fields first keeps each one aligned without padding between them
            order = sorted(obj.fields.items(),
                           key=lambda kv: -(4 if kv[1][0] == "ref" else
                                            struct.calcsize(_SCALARS[kv[1][0]])))
            refs = []
            for slot, (kind, value) in order:
                size = 4 if kind == "ref" else struct.calcsize(_SCALARS[kind])
                body.extend(b"\0" * (-len(body) % size))
                offsets[slot] = len(body)
                if kind == "ref":
                    refs.append((at + len(body), value))
                    body.extend(b"\0\0\0\0")
                else:
                    body.extend(struct.pack("<" + _SCALARS[kind], value))
            struct.pack_into("<i", body, 0, at - vt_at)
            struct.pack_into(f"<HH{slots}H", buf, vt_at, vt_size, len(body), *offsets)
            buf.extend(body)
            pending.extend(refs)
        elif isinstance(obj, (bytes, bytearray)):  # a string
            align(4)
            at = len(buf)
            buf.extend(struct.pack("<I", len(obj)) + bytes(obj) + b"\0")
        else:
            align(4)
            at = len(buf)
            buf.extend(struct.pack("<I", len(obj.items)))
            if obj.kind == "ref":
                for item in obj.items:
                    pending.append((len(buf), item))
                    buf.extend(b"\0\0\0\0")
            else:
                buf.extend(struct.pack(f"<{len(obj.items)}{_SCALARS[obj.kind]}", *obj.items))
        struct.pack_into("<I", buf, ref_at, at - ref_at)
    return bytes(buf)


class Reader:
    """A table inside a FlatBuffers buffer, read field by field (`slot` numbers as in the
    schema: the n-th field declared)."""

    def __init__(self, buf, at: int | None = None) -> None:
        self.buf = memoryview(bytes(buf)) if not isinstance(buf, memoryview) else buf
        self.at = struct.unpack_from("<I", self.buf, 0)[0] if at is None else at

    def _field(self, slot: int) -> int | None:
        vt = self.at - struct.unpack_from("<i", self.buf, self.at)[0]
        vt_size = struct.unpack_from("<H", self.buf, vt)[0]
        if 4 + 2 * slot >= vt_size:
            return None
        off = struct.unpack_from("<H", self.buf, vt + 4 + 2 * slot)[0]
        return self.at + off if off else None

    def _deref(self, at: int) -> int:
        return at + struct.unpack_from("<I", self.buf, at)[0]

    def scalar(self, slot: int, kind: str, default: Any = 0) -> Any:
        at = self._field(slot)
        return default if at is None else struct.unpack_from("<" + _SCALARS[kind],
                                                             self.buf, at)[0]

    def table(self, slot: int) -> "Reader | None":
        at = self._field(slot)
        return None if at is None else Reader(self.buf, self._deref(at))

    def string(self, slot: int) -> str | None:
        at = self._field(slot)
        return None if at is None else self._string_at(self._deref(at))

    def _string_at(self, at: int) -> str:
        n = struct.unpack_from("<I", self.buf, at)[0]
        return bytes(self._span(at + 4, n)).decode("utf-8")

    def _span(self, at: int, nbytes: int):
        """buf[at:at + nbytes]; ValueError (JAX's text, from NumPy) for a length that runs
        past the buffer (corrupted data), at once rather than when the module is compiled."""
        if at + nbytes > len(self.buf):
            raise ValueError(f"buffer is smaller than requested size: a vector of {nbytes} "
                             f"bytes at offset {at} in a buffer of {len(self.buf)} bytes (the "
                             f"serialized data is corrupted)")
        return self.buf[at:at + nbytes]

    def _vector(self, slot: int) -> tuple[int, int]:
        at = self._field(slot)
        if at is None:
            return 0, 0
        at = self._deref(at)
        return struct.unpack_from("<I", self.buf, at)[0], at + 4

    def scalars(self, slot: int, kind: str) -> list:
        n, at = self._vector(slot)
        fmt = f"<{n}{_SCALARS[kind]}"
        self._span(at, struct.calcsize(fmt))
        return list(struct.unpack_from(fmt, self.buf, at)) if n else []

    def raw_bytes(self, slot: int) -> bytes:
        n, at = self._vector(slot)
        return bytes(self._span(at, n))

    def tables(self, slot: int) -> list["Reader"]:
        n, at = self._vector(slot)
        self._span(at, 4 * n)
        return [Reader(self.buf, self._deref(at + 4 * i)) for i in range(n)]

    def strings(self, slot: int) -> list[str]:
        n, at = self._vector(slot)
        self._span(at, 4 * n)
        return [self._string_at(self._deref(at + 4 * i)) for i in range(n)]


# ---------------------------------------------------------------------------------------------
# The schema's enums (serialization.fbs)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/export/serialization_generated.py PyTreeDefKind
_LEAF, _NONE, _TUPLE, _LIST, _DICT, _CUSTOM = range(6)

# JAX: jax/_src/export/serialization.py _dtype_to_dtype_kind (the DType enum)
_DTYPE_KINDS = {"bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint8": 5,
                "uint16": 6, "uint32": 7, "uint64": 8, "float16": 9, "float32": 10,
                "float64": 11, "complex64": 12, "complex128": 13, "bfloat16": 14}
_KIND_DTYPES = {k: v for v, k in _DTYPE_KINDS.items()}
_DEVICE_MEMORY = 1  # MemorySpace.Device
_SHAPED_ARRAY = 0   # AbstractValueKind.shapedArray
_PLATFORM_CHECK, _CUSTOM_CALL_CHECK, _SHAPE_ASSERTIONS_CHECK = range(3)

# JAX: jax/_src/export/_export.py serialization_registry — differs: kept here, beside the code
# that reads it; filled by `register_pytree_node_serialization`
serialization_registry: dict[type, tuple[str, Any]] = {}
deserialization_registry: dict[str, tuple[type, Any, Any]] = {}

# ---------------------------------------------------------------------------------------------
# Exported -> bytes
# ---------------------------------------------------------------------------------------------


def _pytreedef_table(t: PyTreeDef) -> Table:
    data = t.node_data()
    children = t.children()
    table = Table()
    if data is None:
        kind = _LEAF
    elif data[0] is type(None):
        kind = _NONE
    elif data[0] is tuple:
        kind = _TUPLE
    elif data[0] is list:
        kind = _LIST
    elif data[0] is dict:
        kind = _DICT
        if not all(isinstance(k, str) for k in data[1]):
            raise TypeError(f"serialize: only dictionaries with string keys can be "
                            f"serialized; found keys {list(data[1])}")
        table.set(2, "ref", _strings(data[1]))
    elif data[0] in serialization_registry:
        kind = _CUSTOM
        name, serialize_auxdata = serialization_registry[data[0]]
        aux = serialize_auxdata(data[1])
        if not isinstance(aux, (bytes, bytearray)):
            raise ValueError(f"serialize: the auxdata serializer of `{data[0]}` must return "
                             f"bytes, it returned a {type(aux)}")
        table.set(3, "ref", name.encode()).set(4, "ref", Vector("uint8", bytes(aux)))
    else:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type "
                         f"`{data[0]}`. Use `export.register_pytree_node_serialization` or "
                         "`export.register_namedtuple_serialization`.")
    table.set(0, "int8", kind)
    if children:
        table.set(1, "ref", Vector("ref", [_pytreedef_table(c) for c in children]))
    return table


def _aval_table(aval: core.ShapedArray) -> Table:
    name = np.dtype(aval.dtype).name
    if name not in _DTYPE_KINDS:
        raise TypeError(f"serialize: no serialization for dtype {name}")
    return (Table().set(0, "int8", _SHAPED_ARRAY).set(1, "ref", _strings(aval.shape))
            .set(2, "int8", _DTYPE_KINDS[name]).set(3, "int8", _DEVICE_MEMORY))


def _check_table(check) -> Table:
    target = check.is_custom_call()
    if target is not None:
        return Table().set(0, "int8", _CUSTOM_CALL_CHECK).set(1, "ref", target.encode())
    kind = _PLATFORM_CHECK if check == type(check).platform() else _SHAPE_ASSERTIONS_CHECK
    return Table().set(0, "int8", kind)


# JAX: jax/_src/export/serialization.py _axis_type_to_enum
_AXIS_TYPES = {AxisType.Auto: 1, AxisType.Explicit: 2, AxisType.Manual: 3}


# JAX: jax/_src/export/serialization.py _serialize_abstract_mesh
def _mesh_table(mesh) -> Table:
    """`mesh`'s abstract mesh; for a concrete one, also its kind of device (JAX's
    AbstractDevice: kind, cores, platform)."""
    t = (Table().set(0, "ref", Vector("uint32", mesh.axis_sizes))
         .set(1, "ref", _strings(mesh.axis_names))
         .set(2, "ref", Vector("uint8", [_AXIS_TYPES[t] for t in mesh.axis_types])))
    devices = getattr(mesh, "devices", None)
    if devices is not None:
        d = devices.flat[0]
        t.set(3, "ref", Table().set(0, "ref", d.device_kind.encode())
              .set(1, "uint32", getattr(d, "num_cores", None))
              .set(2, "ref", d.platform.encode()))
    return t


# JAX: jax/_src/export/serialization.py _serialize_named_sharding
def _named_sharding_table(s, mesh_index: int) -> Table:
    axes = [() if p is None else (p,) if isinstance(p, str) else tuple(p) for p in s.spec]
    spec = (Table().set(0, "ref", Vector("ref", [Table().set(0, "ref", _strings(a))
                                                  for a in axes]))
            .set(1, "ref", _strings(())).set(2, "ref", _strings(())))
    kind = None if s.memory_kind is None else s.memory_kind.encode()
    return (Table().set(0, "ref", _mesh_table(s.mesh)).set(1, "ref", spec)
            .set(2, "ref", kind).set(3, "uint32", mesh_index))


def _exported_table(exp, vjp_order: int) -> Table:
    avals = list(dict.fromkeys([*exp.in_avals, *exp.out_avals]))  # the unique avals
    index = {a: i for i, a in enumerate(avals)}
    in_sh = exp._in_named_shardings or (None,) * len(exp.in_avals)
    out_sh = exp._out_named_shardings or (None,) * len(exp.out_avals)
    shardings = list(dict.fromkeys(s for s in (*in_sh, *out_sh) if s is not None))
    meshes = list({s.mesh.abstract_mesh: s.mesh for s in shardings}.values())
    abstract = [m.abstract_mesh for m in meshes]
    tables = [_named_sharding_table(s, abstract.index(s.mesh.abstract_mesh))
              for s in shardings]
    at = {s: i for i, s in enumerate(shardings)}
    t = Table()
    t.set(0, "uint16", _SERIALIZATION_VERSION)
    t.set(1, "ref", exp.fun_name.encode())
    t.set(2, "ref", _pytreedef_table(exp.in_tree))
    t.set(3, "ref", Vector("ref", [_aval_table(a) for a in exp.in_avals]))
    t.set(4, "ref", _pytreedef_table(exp.out_tree))
    t.set(5, "ref", Vector("ref", [_aval_table(a) for a in exp.out_avals]))
    # a Sharding table: empty where unspecified, else its NamedSharding
    t.set(7, "ref", Vector("ref", [Table().set(2, "ref", None if s is None else tables[at[s]])
                                   for s in in_sh]))
    t.set(8, "ref", Vector("ref", [Table().set(2, "ref", None if s is None else tables[at[s]])
                                   for s in out_sh]))
    t.set(9, "ref", _strings(exp.platforms))
    t.set(10, "ref", Vector("ref", []))
    t.set(11, "ref", Vector("ref", []))
    t.set(12, "ref", Vector("ref", [_check_table(c) for c in exp.disabled_safety_checks]))
    t.set(13, "ref", Vector("uint8", exp.mlir_module_serialized))
    t.set(14, "uint16", exp.calling_convention_version)
    t.set(15, "ref", Vector("uint16", exp.module_kept_var_idx))
    t.set(16, "bool", exp.uses_global_constants)
    if vjp_order > 0:
        t.set(17, "ref", _exported_table(exp.vjp(), vjp_order - 1))
    t.set(18, "uint32", exp.nr_devices)
    t.set(19, "ref", Vector("ref", [_aval_table(a) for a in avals]))
    t.set(20, "ref", Vector("ref", [_mesh_table(m) for m in meshes]))
    t.set(21, "ref", Vector("ref", tables))
    t.set(22, "ref", Vector("uint32", [index[a] for a in exp.in_avals]))
    t.set(23, "ref", Vector("uint32", [index[a] for a in exp.out_avals]))
    # 0: no sharding, else 1 + its position among the unique shardings
    t.set(24, "ref", Vector("uint32", [0 if s is None else 1 + at[s] for s in in_sh]))
    t.set(25, "ref", Vector("uint32", [0 if s is None else 1 + at[s] for s in out_sh]))
    return t


# JAX: jax/_src/export/serialization.py serialize
def serialize(exp, vjp_order: int = 0) -> bytearray:
    """The bytes of `exp` (and of `vjp_order` orders of its vjp) in JAX's format."""
    return bytearray(encode(_exported_table(exp, vjp_order)))


# ---------------------------------------------------------------------------------------------
# bytes -> Exported
# ---------------------------------------------------------------------------------------------


def _pytree_of(r: Reader, leaves) -> Any:
    kind = r.scalar(0, "int8")
    children = [_pytree_of(c, leaves) for c in r.tables(1)]
    if kind == _LEAF:
        return next(leaves)
    if kind == _NONE:
        return None
    if kind == _TUPLE:
        return tuple(children)
    if kind == _LIST:
        return children
    if kind == _DICT:
        return dict(zip(r.strings(2), children))
    if kind == _CUSTOM and r.string(3) in deserialization_registry:
        _, deserialize_auxdata, from_children = deserialization_registry[r.string(3)]
        return from_children(deserialize_auxdata(r.raw_bytes(4)), children)
    if kind == _CUSTOM:
        raise ValueError(f"Cannot deserialize a PyTreeDef containing an unregistered type "
                         f"`{r.string(3)}`. Use `export.register_pytree_node_serialization` "
                         "or `export.register_namedtuple_serialization`.")
    raise ValueError(f"deserialize: cannot deserialize a PyTreeDef of kind {kind}")


def _aval_of(r: Reader, scope) -> core.ShapedArray:
    kind = r.scalar(2, "int8")
    if kind not in _KIND_DTYPES:
        raise TypeError(f"deserialize: dtype kind {kind} is not supported by minijax")
    shape = shape_poly.symbolic_shape(",".join(r.strings(1)), scope=scope)
    dtype = dtypes.bfloat16 if _KIND_DTYPES[kind] == "bfloat16" else np.dtype(_KIND_DTYPES[kind])
    return core.ShapedArray(shape, dtype)


# JAX: jax/_src/export/serialization.py _deserialize_abstract_mesh
def _mesh_of(r: Reader) -> AbstractMesh:
    types = {v: k for k, v in _AXIS_TYPES.items()}
    return AbstractMesh(r.scalars(0, "uint32"), r.strings(1),
                        tuple(types[t] for t in r.scalars(2, "uint8")))


# JAX: jax/_src/export/serialization.py _deserialize_named_sharding
def _named_sharding_of(r: Reader, meshes: list) -> NamedSharding:
    mesh = meshes[r.scalar(3, "uint32")] if meshes else _mesh_of(r.table(0))
    axes = [tuple(a.strings(0)) for a in r.table(1).tables(0)]
    spec = PartitionSpec(*[None if not a else a[0] if len(a) == 1 else a for a in axes])
    kind = r.string(2)
    return NamedSharding(mesh, spec, memory_kind=kind or None)


def _exported_of(r: Reader, cls, check_cls):
    scope = shape_poly.SymbolicScope()
    uniques = [_aval_of(a, scope) for a in r.tables(19)]
    if r.scalars(22, "uint32") or not r.tables(3):
        in_avals = tuple(uniques[i] for i in r.scalars(22, "uint32"))
        out_avals = tuple(uniques[i] for i in r.scalars(23, "uint32"))
    else:  # older artifacts list the avals themselves
        in_avals = tuple(_aval_of(a, scope) for a in r.tables(3))
        out_avals = tuple(_aval_of(a, scope) for a in r.tables(5))
    if any(s.raw_bytes(1) for s in [*r.tables(7), *r.tables(8)]):
        raise NotImplementedError("deserialize: the artifact has HloShardings (written "
                                  "before 1/15/2026); minijax reads NamedShardings only")
    meshes = [_mesh_of(m) for m in r.tables(20)]
    named = [_named_sharding_of(n, meshes) for n in r.tables(21)]
    in_sh, out_sh = ([None if i == 0 else named[i - 1] for i in r.scalars(slot, "uint32")]
                     for slot in (24, 25))
    if not r.scalars(24, "uint32"):  # written before the unique shardings: in the tables
        in_sh, out_sh = ([None if t.table(2) is None else _named_sharding_of(t.table(2), meshes)
                          for t in r.tables(slot)] for slot in (7, 8))
    if r.tables(10) or r.tables(11):
        raise NotImplementedError("deserialize: the artifact has effects; minijax reads "
                                  "artifacts without effects only")
    checks = []
    for c in r.tables(12):
        kind = c.scalar(0, "int8")
        checks.append(check_cls.custom_call(c.string(1)) if kind == _CUSTOM_CALL_CHECK else
                      check_cls.platform() if kind == _PLATFORM_CHECK else
                      check_cls.shape_assertions())
    vjp = r.table(17)
    return cls(
        fun_name=r.string(1), in_tree=tree_structure(_pytree_of(r.table(2), iter(in_avals))),
        in_avals=in_avals, out_tree=tree_structure(_pytree_of(r.table(4), iter(out_avals))),
        out_avals=out_avals, nr_devices=r.scalar(18, "uint32") or r.scalar(6, "int16"),
        platforms=tuple(r.strings(9)), disabled_safety_checks=tuple(checks),
        mlir_module_serialized=r.raw_bytes(13),
        calling_convention_version=r.scalar(14, "uint16"),
        module_kept_var_idx=tuple(r.scalars(15, "uint16")),
        uses_global_constants=bool(r.scalar(16, "bool")),
        _in_named_shardings=tuple(in_sh), _out_named_shardings=tuple(out_sh),
        _get_vjp=None if vjp is None else (lambda _: _exported_of(vjp, cls, check_cls)))


# JAX: jax/_src/export/serialization.py deserialize
def deserialize(blob, cls, check_cls):
    """The `cls` (an `Exported`) that `blob`, in JAX's format, holds."""
    return _exported_of(Reader(blob), cls, check_cls)
