"""`export`: a jitted function, traced and lowered once, kept as an `Exported` — its avals,
pytrees and StableHLO module (portable-artifact bytecode) — to serialize, ship, and `call`
later, from minijax or from JAX.

Mirrors jax/_src/export/_export.py. Taught in chapters/31-export.md.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import re
from typing import Any, Callable, Sequence

import numpy as np

from minijax import api, core, custom_derivatives, tree_util, xla_bridge
from minijax.config import config
from minijax.export import _symbolic, serialization, shape_poly
from minijax.interpreters import mlir
from minijax.named_sharding import NamedSharding
from minijax.tree_util import PyTreeDef, tree_flatten
from minijax.util import split_list

# JAX: jax/_src/export/_export.py minimum_supported_calling_convention_version
minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10


# JAX: jax/_src/export/_export.py DisabledSafetyCheck
class DisabledSafetyCheck:
    """A safety check to skip: `platform()` (call on a platform other than the exported
    ones), `custom_call(name)` (allow a custom call target not known to be stable),
    `shape_assertions()` (do not check the polymorphic shapes' assertions)."""

    def __init__(self, _impl: str) -> None:
        self._impl = _impl

    @classmethod
    def platform(cls) -> "DisabledSafetyCheck":
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> "DisabledSafetyCheck":
        return cls(f"custom_call:{target_name}")

    @classmethod
    def shape_assertions(cls) -> "DisabledSafetyCheck":
        return cls("shape_assertions")

    def is_custom_call(self) -> str | None:
        m = re.match(r"custom_call:(.+)$", self._impl)
        return m.group(1) if m else None

    def __str__(self) -> str:
        return self._impl

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self) -> int:
        return hash(self._impl)


# JAX: jax/_src/export/_export.py Exported — differs: no effects; shardings are kept as
# NamedShardings only (JAX's in_shardings_hlo are all None too since 3/17/2026)
@dataclasses.dataclass(frozen=True, eq=False)
class Exported:
    """A function exported for one set of argument types.

    Attributes (JAX's names): `fun_name`; `in_tree` (of `(args, kwargs)`), `in_avals` (one
    aval per leaf, shapes possibly symbolic), `out_tree`, `out_avals`; `platforms` (e.g.
    `("cpu",)`); `nr_devices` (1); `disabled_safety_checks`; `mlir_module_serialized` (the
    StableHLO portable artifact); `calling_convention_version` (9 or 10);
    `module_kept_var_idx` (the argument leaves the module takes); `uses_global_constants`
    (whether the module has dimension variables). A jit with shardings over a mesh of N
    devices exports a module partitioned N ways: `nr_devices` is N and
    `in_shardings_jax(mesh)`/`out_shardings_jax(mesh)` give its NamedShardings on `mesh`.
    """

    fun_name: str
    in_tree: PyTreeDef
    in_avals: tuple[core.ShapedArray, ...]
    out_tree: PyTreeDef
    out_avals: tuple[core.ShapedArray, ...]
    nr_devices: int
    platforms: tuple[str, ...]
    disabled_safety_checks: tuple[DisabledSafetyCheck, ...]
    mlir_module_serialized: bytes
    calling_convention_version: int
    module_kept_var_idx: tuple[int, ...]
    uses_global_constants: bool
    _get_vjp: Callable[["Exported"], "Exported"] | None
    # per argument / result leaf: its NamedSharding (over an abstract mesh once read back),
    # or None where the jit left it unspecified
    _in_named_shardings: tuple = ()
    _out_named_shardings: tuple = ()

    in_shardings_hlo = property(lambda self: (None,) * len(self.in_avals))
    out_shardings_hlo = property(lambda self: (None,) * len(self.out_avals))
    ordered_effects: tuple = ()
    unordered_effects: tuple = ()

    def mlir_module(self) -> str:
        """The StableHLO module, as text."""
        return str(mlir.module_from_portable_artifact(self.mlir_module_serialized))

    def __str__(self) -> str:
        return f"Exported(fun_name={self.fun_name}, ...)"

    # JAX: jax/_src/export/_export.py Exported.in_shardings_jax
    def in_shardings_jax(self, mesh) -> tuple:
        """The arguments' shardings on `mesh` (a Mesh or AbstractMesh with the export's axis
        names, sizes and types; ValueError otherwise), None where unspecified: what
        `device_put` or `jit(in_shardings=)` take to run the export on those devices."""
        return tuple(_on_mesh(s, mesh) for s in self._in_named_shardings or
                     (None,) * len(self.in_avals))

    def out_shardings_jax(self, mesh) -> tuple:
        """The results' shardings on `mesh` (see `in_shardings_jax`)."""
        return tuple(_on_mesh(s, mesh) for s in self._out_named_shardings or
                     (None,) * len(self.out_avals))

    def has_vjp(self) -> bool:
        return self._get_vjp is not None

    def vjp(self) -> "Exported":
        """The exported vjp: a function of `(*primals_flat, *out_cts_flat)` returning the
        input cotangents. ValueError if it is not available (deserialized without it)."""
        if self._get_vjp is None:
            raise ValueError("No VJP is available")
        return self._get_vjp(self)

    def serialize(self, vjp_order: int = 0) -> bytearray:
        """The bytes of this Exported in jax.export's format (`jax.export.deserialize` reads
        them), with `vjp_order` orders of its vjp (1: enough for `grad` of `call`)."""
        return serialization.serialize(self, vjp_order)

    def call(self, *args, **kwargs):
        """Run the exported function on `args`/`kwargs` (the pytree structure it was exported
        for; shapes matching `in_avals`, a symbolic dimension taking the size it is given).
        Works eagerly and under `jit`, `grad` (through the serialized vjp) and `vjp`."""
        return call(self)(*args, **kwargs)


# JAX: jax/_src/export/_export.py _get_named_sharding
def _on_mesh(s, mesh):
    if s is None or mesh is None:
        return s
    want, got = s.mesh.abstract_mesh, mesh.abstract_mesh
    if (want.axis_sizes, want.axis_names, want.axis_types) != (
            got.axis_sizes, got.axis_names, got.axis_types):
        raise ValueError(f"NamedSharding new mesh {mesh} does not match the mesh used for "
                         f"export {s.mesh}.")
    return NamedSharding(mesh, s.spec, memory_kind=s.memory_kind)


# JAX: jax/_src/export/_export.py deserialize
def deserialize(blob: bytes | bytearray) -> Exported:
    """The `Exported` that `blob` (from `Exported.serialize` here or in JAX) holds."""
    return serialization.deserialize(blob, Exported, DisabledSafetyCheck)


# JAX: jax/_src/export/_export.py default_export_platform
def default_export_platform() -> str:
    """The platform `export` lowers for unless told: "cpu", "cuda", "rocm" or "tpu"."""
    platform = xla_bridge.default_device().platform
    return {"gpu": "cuda"}.get(platform, platform)


# JAX: jax/_src/export/_export.py register_pytree_node_serialization
def register_pytree_node_serialization(nodetype: type, *, serialized_name: str,
                                       serialize_auxdata: Callable[[Any], bytes],
                                       deserialize_auxdata: Callable[[bytes], Any],
                                       from_children: Callable | None = None) -> type:
    """Let pytrees with `nodetype` nodes be serialized: the node is written as
    `serialized_name` and `serialize_auxdata(aux_data)` (bytes); reading builds it back with
    `from_children(deserialize_auxdata(bytes), children)` (default: the type's pytree
    unflatten function). Returns `nodetype` (usable as a class decorator). Raises ValueError
    for a second registration of the type or the name, or with no `from_children` for a
    type that is not a registered pytree node."""
    if nodetype in serialization.serialization_registry:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`.")
    if serialized_name in serialization.deserialization_registry:
        raise ValueError(f"Duplicate serialization registration for serialized_name "
                         f"`{serialized_name}`.")
    if from_children is None:
        if nodetype not in tree_util._registry:
            raise ValueError(f"If `from_children` is not present, you must call first "
                             f"`minijax.tree_util.register_pytree_node` for `{nodetype}`")
        from_children = tree_util._registry[nodetype].unflatten
    serialization.serialization_registry[nodetype] = (serialized_name, serialize_auxdata)
    serialization.deserialization_registry[serialized_name] = (
        nodetype, deserialize_auxdata, from_children)
    return nodetype


# JAX: jax/_src/export/_export.py register_namedtuple_serialization
def register_namedtuple_serialization(nodetype: type, *, serialized_name: str) -> type:
    """Let a `collections.namedtuple` type be serialized (its field names, as JSON, are the
    auxdata, as JAX writes them). ValueError for other types."""
    if not (issubclass(nodetype, tuple) and isinstance(getattr(nodetype, "_fields", None),
                                                       tuple)):
        raise ValueError("Use `export.register_pytree_node_serialization` for types other "
                         "than `collections.namedtuple`.")
    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name,
        serialize_auxdata=lambda _: json.dumps(nodetype._fields).encode("utf-8"),
        deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")),
        from_children=lambda keys, children: nodetype(**dict(zip(keys, children))))


register_pytree_node_serialization(
    collections.OrderedDict, serialized_name="collections.OrderedDict",
    serialize_auxdata=lambda keys: json.dumps(list(keys)).encode("utf-8"),
    deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")))


# ---------------------------------------------------------------------------------------------
# Exporting
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/export/_export.py export
def export(fun_jit, *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence[DisabledSafetyCheck] = ()) -> Callable[..., Exported]:
    """Export `fun_jit`, the result of `minijax.jit`.

    Returns a function of `ShapeDtypeStruct`s (or arrays), pytrees like the arguments, whose
    shapes may use `symbolic_shape`; calling it traces and lowers once and returns the
    `Exported`. `platforms`: the platforms to lower for (default: `default_export_platform()`);
    with more than one, the module takes a leading platform-index argument, as in JAX.
    The module follows calling convention `config.jax_export_calling_convention_version`
    (10 unless set; 9 and 10 are supported, as in JAX 0.10).
    Raises ValueError if `fun_jit` is not jitted or the version is out of range;
    TypeError/InconclusiveDimensionOperation as tracing does for shapes a program cannot take
    symbolically.
    """
    if not hasattr(fun_jit, "trace") or not hasattr(fun_jit, "lower"):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: "
                         f"{fun_jit}")
    for c in disabled_checks:
        if not isinstance(c, DisabledSafetyCheck):
            raise ValueError(f"export: disabled_checks must be DisabledSafetyChecks, got {c!r}")
    lowering_platforms = tuple(platforms) if platforms else (default_export_platform(),)

    def do_export(*args_specs, **kwargs_specs) -> Exported:
        version = config.jax_export_calling_convention_version
        if not (minimum_supported_calling_convention_version <= version
                <= maximum_supported_calling_convention_version):
            raise ValueError(
                f"The requested export calling convention version {version} is outside the "
                f"range of supported versions [{minimum_supported_calling_convention_version}"
                f"..{maximum_supported_calling_convention_version}]")
        traced = fun_jit.trace(*args_specs, **kwargs_specs)
        closed = traced.jaxpr
        in_avals = tuple(closed.in_avals)
        name = traced._name
        uses_dim_vars = bool(shape_poly.all_dim_vars(in_avals))
        in_sh, out_sh, nr_devices = (), (), 1
        if any(s is not None for s in (*traced._in_shardings, *traced._out_shardings)):
            if uses_dim_vars:
                raise NotImplementedError(f"export of '{name}': minijax exports a jit with "
                                          "shardings for static shapes only")
            # the jit's own lowering: its shardings as sdy annotations over its mesh
            lowered = traced.lower(lowering_platforms=lowering_platforms)
            module, mesh = lowered._module, lowered._mesh
            nr_devices = mesh.size if mesh is not None else 1
            in_sh, out_sh = (tuple(s if isinstance(s, NamedSharding) else None for s in ss)
                             for ss in (lowered._in_shardings or (None,) * len(in_avals),
                                        lowered._out_shardings or
                                        (None,) * len(closed.out_avals)))
        module = _lower_for_export(closed, name, lowering_platforms,
                                   module if nr_devices > 1 else None, nr_devices)

        def get_vjp(primal: Exported) -> Exported:
            vjp_fun, vjp_avals = _vjp_fun(closed, primal)
            return export(api.jit(vjp_fun), platforms=primal.platforms,
                          disabled_checks=primal.disabled_safety_checks)(*vjp_avals)

        return Exported(
            fun_name=name, in_tree=traced._in_tree, in_avals=in_avals,
            out_tree=traced._out_tree, out_avals=tuple(closed.out_avals),
            nr_devices=nr_devices, _in_named_shardings=in_sh, _out_named_shardings=out_sh,
            platforms=lowering_platforms, disabled_safety_checks=tuple(disabled_checks),
            mlir_module_serialized=mlir.module_to_portable_artifact(module),
            calling_convention_version=version,
            module_kept_var_idx=tuple(range(len(in_avals))),
            uses_global_constants=uses_dim_vars, _get_vjp=get_vjp)
    return do_export


def _lower_for_export(closed: core.ClosedJaxpr, name: str, platforms: tuple[str, ...],
                      module=None, nr_devices: int = 1):
    """The module `export` keeps: `main` lowered from `closed` for `platforms` (for several,
    with the leading platform index and each platform's rules under a case on it), or the
    sharded jit's own `module` over `nr_devices`, with the attributes JAX's exported modules
    carry."""
    if module is None:
        module = _symbolic.lower_polymorphic(closed, name, platforms) if \
            shape_poly.all_dim_vars(closed.in_avals) else \
            mlir.lower_jaxpr_to_module(closed, name, platforms=platforms)
    ir = mlir.ir
    with module.context:
        attrs = module.operation.attributes
        attrs["jax.uses_shape_polymorphism"] = ir.BoolAttr.get(
            bool(shape_poly.all_dim_vars(closed.in_avals)))
        i32 = ir.IntegerType.get_signless(32)
        attrs["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, nr_devices)
        attrs["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
    return module


# JAX: jax/_src/export/_export.py _get_vjp_fun
def _vjp_fun(closed: core.ClosedJaxpr, primal: Exported):
    """The flat vjp of the exported jaxpr: `(*primals, *out_cts) -> in_cts`, and its avals."""
    n = len(primal.in_avals)

    def fun_vjp(*primals_and_cts):
        primals, cts = split_list(list(primals_and_cts), [n])
        _, pullback = api.vjp(lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                              *primals)
        return pullback(cts)
    vjp_avals = [*primal.in_avals, *[a.to_tangent_aval() for a in primal.out_avals]]
    return fun_vjp, [core.ShapeDtypeStruct(a.shape, a.dtype) for a in vjp_avals]


# ---------------------------------------------------------------------------------------------
# Calling an Exported
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/export/_export.py call
def call(exported: Exported) -> Callable:
    """The function that runs `exported` (see `Exported.call`): differentiable through the
    exported vjp, as JAX's is (a `custom_vjp` whose backward calls `exported.vjp()`)."""
    if not isinstance(exported, Exported):
        raise ValueError(f"The exported argument must be an export.Exported. Found "
                         f"{exported}.")

    @custom_derivatives.custom_vjp
    def f_flat(*args_flat):
        return call_exported_p.bind(*args_flat, exported=exported)

    def f_flat_fwd(*args_flat):
        return f_flat(*args_flat), args_flat

    def f_flat_bwd(args_flat, cts):
        return tuple(call(exported.vjp())(*args_flat, *cts))

    f_flat.defvjp(f_flat_fwd, f_flat_bwd)

    def f_imported(*args, **kwargs):
        args_flat, in_tree = tree_flatten((args, kwargs))
        if in_tree != exported.in_tree:
            raise ValueError(
                f"The invocation args and kwargs must have the same pytree structure as when "
                f"the function '{exported.fun_name}' was exported: called with {in_tree}, "
                f"exported with {exported.in_tree}")
        return exported.out_tree.unflatten(f_flat(*args_flat))
    return f_imported


# JAX: jax/_src/export/_export.py call_exported_p
call_exported_p = core.Primitive("call_exported")
call_exported_p.multiple_results = True


def _dim_env(exported: Exported, in_avals) -> dict[str, int]:
    """The value of each dimension variable, solved from the argument shapes as the module's
    `main` solves them; JAX's ValueError for shapes that fail its checks."""
    solution, checks = shape_poly.solve_dim_vars(exported.in_avals)
    sizes = {f"args[{i}].shape[{j}]": g for i, (exp, got) in enumerate(zip(
        exported.in_avals, in_avals)) for j, (e, g) in enumerate(zip(exp.shape, got.shape))
        if shape_poly.is_symbolic_dim(e)}
    shape_poly.check_dim_values(checks, sizes)
    return {v: shape_poly.evaluate(e, sizes) for v, e in solution.items()}


def _call_exported_abstract_eval(*in_avals, exported: Exported):
    if len(in_avals) != len(exported.in_avals):
        raise ValueError(f"call of '{exported.fun_name}': expected {len(exported.in_avals)} "
                         f"arguments, got {len(in_avals)}")
    for i, (exp, got) in enumerate(zip(exported.in_avals, in_avals)):
        if exp.ndim != got.ndim:
            raise ValueError(f"Rank mismatch for args[{i}]: expected {exp.shape} and called "
                             f"with {got.shape}")
        if exp.dtype != got.dtype:
            raise ValueError(f"Dtype mismatch for args[{i}]: expected {exp.dtype} and called "
                             f"with {got.dtype}")
        for e, g in zip(exp.shape, got.shape):
            if not shape_poly.is_symbolic_dim(e) and e != g:
                raise ValueError(f"Shape mismatch for args[{i}] (expected same constant): "
                                 f"expected {exp.shape} and called with {got.shape}")
    if exported.uses_global_constants and not all(mlir.is_static(a.shape) for a in in_avals):
        raise NotImplementedError(
            f"call of '{exported.fun_name}': a shape-polymorphic Exported called with "
            "symbolic shapes (inside another export); minijax calls it with concrete ones")
    env = _dim_env(exported, in_avals)
    for i, (exp, got) in enumerate(zip(exported.in_avals, in_avals)):
        want = tuple(shape_poly.evaluate(d, env) for d in exp.shape)
        if want != got.shape:
            raise ValueError(f"call of '{exported.fun_name}': args[{i}] has shape "
                             f"{got.shape}, but {exp.shape} with {env} is {want}")
    return [core.ShapedArray(tuple(shape_poly.evaluate(d, env) for d in a.shape), a.dtype)
            for a in exported.out_avals]


def _call_exported_impl(*args, exported: Exported):
    return api.jit(lambda *xs: call_exported_p.bind(*xs, exported=exported))(*args)


_merged = itertools.count()


def _call_exported_lowering(ctx, *args, exported: Exported):
    ir, func = mlir.ir, mlir.func
    # a multi-device export runs partitioned as it was exported: the caller's module must be
    # on as many devices (the mesh its arguments' layouts name); its sdy mesh and shardings
    # move in with its functions below
    used = mlir._sharding_state[-1] if mlir._sharding_state else []
    num_devices = used[0].size if used else 1
    if exported.nr_devices != 1 and num_devices != exported.nr_devices:
        raise ValueError(f"Function {exported.fun_name} was exported for "
                         f"{exported.nr_devices} devices and is called in a context with "
                         f"{num_devices} devices, which is not allowed.")
    platform = default_export_platform()
    if platform not in exported.platforms and \
            DisabledSafetyCheck.platform() not in exported.disabled_safety_checks:
        raise ValueError(f"Function '{exported.fun_name}' was exported for platforms "
                         f"'{exported.platforms}' but it is used on '{(platform,)}'.")
    if exported.calling_convention_version < minimum_supported_calling_convention_version:
        raise NotImplementedError(
            f"call of '{exported.fun_name}': calling convention version "
            f"{exported.calling_convention_version} is older than "
            f"{minimum_supported_calling_convention_version}")
    sub = mlir.module_from_portable_artifact(exported.mlir_module_serialized,
                                             ir.Context.current)
    if exported.uses_global_constants:  # specialize the dimension variables to these shapes
        sub = mlir.module_from_portable_artifact(mlir.module_to_portable_artifact(
            _specialize(sub, ctx.avals_in, ctx.avals_out)), ir.Context.current)
    # JAX: jax/_src/interpreters/mlir.py merge_mlir_modules — the callee's functions move
    # into the caller's module, renamed so that two calls do not clash
    prefix = f"call_exported_{exported.fun_name}_{next(_merged)}_"
    table = ir.SymbolTable(sub.operation)
    for o in list(sub.body.operations):
        if "sym_name" in o.attributes:
            name = ir.StringAttr(o.attributes["sym_name"]).value
            table.replace_all_symbol_uses(name, prefix + name, sub.operation)
            table.set_symbol_name(o, prefix + name)
        if o.name == "func.func":
            o.attributes["sym_visibility"] = ir.StringAttr.get("private")
    op = mlir.enclosing_module()
    for o in list(sub.body.operations):
        ir.InsertionPoint(op.regions[0].blocks[0]).insert(o.detach_from_parent())
    operands = list(args)
    if len(exported.platforms) > 1:
        idx = exported.platforms.index(platform) if platform in exported.platforms else 0
        operands.insert(0, mlir.ir_constant(np.int32(idx)))
    call_op = func.CallOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out],
                          ir.FlatSymbolRefAttr.get(prefix + "main"), operands)
    return list(call_op.results)


def _specialize(sub, avals_in, avals_out):
    """`sub`, a polymorphic module, with `main` taking the static types `avals_in`: a new
    `main` converts to the dynamic types and calls the old one, and shape refinement then
    makes every shape inside static (and checks the shape assertions), as JAX's compile does."""
    ir, func, hlo = mlir.ir, mlir.func, mlir.hlo
    with sub.context, ir.Location.unknown():
        table = ir.SymbolTable(sub.operation)
        main = table["main"]
        main.attributes["sym_visibility"] = ir.StringAttr.get("private")
        table.set_symbol_name(main, "_export_polymorphic_main")
        ftype = main.type
        static_in = [mlir.aval_to_ir_type(a) for a in avals_in]
        static_out = [mlir.aval_to_ir_type(a) for a in avals_out]
        n_extra = len(ftype.inputs) - len(static_in)  # a platform index
        new = func.FuncOp("main", ir.FunctionType.get(list(ftype.inputs[:n_extra]) +
                                                      static_in, static_out),
                          ip=ir.InsertionPoint(sub.body))
        new.attributes["sym_visibility"] = ir.StringAttr.get("public")
        with ir.InsertionPoint(new.add_entry_block()):
            xs = list(new.arguments)
            xs = xs[:n_extra] + [hlo.convert(t, x) for t, x in
                                 zip(ftype.inputs[n_extra:], xs[n_extra:])]
            out = func.CallOp(list(ftype.results),
                              ir.FlatSymbolRefAttr.get("_export_polymorphic_main"), xs)
            func.ReturnOp([hlo.convert(t, r) for t, r in zip(static_out, out.results)])
    return mlir.refine_polymorphic_shapes(sub)


call_exported_p.def_impl(_call_exported_impl)
call_exported_p.impl_takes_arrays = True  # a multi-device export runs on its arguments' mesh
call_exported_p.def_abstract_eval(_call_exported_abstract_eval)
mlir.register_lowering(call_exported_p, _call_exported_lowering)
