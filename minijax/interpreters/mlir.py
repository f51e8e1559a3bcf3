"""Lowering jaxprs to StableHLO, built with JAX's MLIR Python bindings (`jax.extend.mlir`).

Each primitive registers a lowering rule `rule(ctx, *operands, **params)` that emits StableHLO
ops for one equation and returns its result value(s). `lower_jaxpr_to_module` walks a jaxpr and
produces a module with one public function `main`. The MLIR bindings are imported on first use,
so importing `minijax.lax` (which registers rules) does not load them.
Mirrors jax/_src/interpreters/mlir.py. Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Sequence

import numpy as np

from minijax import core, dtypes, effects, xla_bridge
from minijax.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray
from minijax.interpreters import partial_eval as pe
from minijax.mesh import AbstractMesh
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import _axes_of, _Unconstrained

_CHAPTER = "chapters/07-jit.md"

# The MLIR modules, set by `_load()`: `ir`, `hlo` (the stablehlo dialect), `func`, `chlo`.
ir: Any = None
hlo: Any = None
func: Any = None
chlo: Any = None  # the "client HLO" dialect: ops XLA expands itself (erf, erf_inv, next_after)
sdy: Any = None  # Shardy: meshes, shardings, constraints, manual computations (shard_map)

# JAX: jax/_src/interpreters/mlir.py _lowerings
_lowerings: dict[core.Primitive, Callable] = {}  # the rules for every platform
# JAX: jax/_src/interpreters/mlir.py _platform_specific_lowerings
_platform_lowerings: dict[str, dict[core.Primitive, Callable]] = {
    p: {} for p in ("cpu", "cuda", "rocm", "tpu")}
# JAX: jax/_src/xla_bridge.py expand_platform_alias
_PLATFORM_ALIASES = {"gpu": ("cuda", "rocm")}


# JAX: jax/_src/interpreters/mlir.py register_lowering
def register_lowering(primitive: core.Primitive, rule: Callable, platform: str | None = None,
                      inline: bool = True, cacheable: bool = True) -> None:
    """Register `rule(ctx, *operands, **params) -> ir.Value | list[ir.Value]` for `primitive`,
    on every platform (`platform=None`) or on one of 'cpu', 'tpu', 'cuda', 'rocm' ('gpu':
    both of the last two); a platform's own rule wins over the rule for every platform.
    `inline` and `cacheable` are accepted as in JAX; minijax always inlines and caches.
    Raises NotImplementedError for an unknown platform."""
    if platform is None:
        _lowerings[primitive] = rule
        return
    for p in _PLATFORM_ALIASES.get(platform, (platform,)):
        if p not in _platform_lowerings:
            raise NotImplementedError(
                f"Registering an MLIR lowering rule for primitive {primitive} for an unknown "
                f"platform {platform}. Known platforms are: "
                f"{', '.join(sorted([*_platform_lowerings, *_PLATFORM_ALIASES]))}.")
        _platform_lowerings[p][primitive] = rule


def has_lowering(primitive: core.Primitive, platform: str) -> bool:
    """Whether `primitive` lowers on `platform` (its own rule or the rule for every one)."""
    return primitive in _lowerings or any(
        primitive in _platform_lowerings[p] for p in _PLATFORM_ALIASES.get(platform, (platform,)))


def _load() -> None:
    global ir, hlo, func, chlo, sdy
    if ir is None:
        from jax.extend.mlir import ir as _ir
        from jax.extend.mlir.dialects import (
            chlo as _chlo,
            func as _func,
            sdy as _sdy,
            stablehlo as _hlo,
        )
        ir, hlo, func, chlo, sdy = _ir, _hlo, _func, _chlo, _sdy


# JAX: jax/_src/interpreters/mlir.py LoweringRuleContext — differs: no tokens_in/tokens_out
# (a rule reads and writes the module's current tokens, see `get_tokens`)
class LoweringRuleContext:
    """What a lowering rule knows besides its operands: the avals of inputs and outputs, the
    platforms this equation is lowered for (`platforms`: the module's, or fewer inside one
    branch of `lower_per_platform`, or 'cpu' for an equation under `compute_on('device_host')`)
    and the module being lowered."""

    __slots__ = ("avals_in", "avals_out", "platforms")

    def __init__(self, avals_in: Sequence[ShapedArray], avals_out: Sequence[ShapedArray],
                 platforms: Sequence[str] | None = None):
        self.avals_in = avals_in if type(avals_in) is list else list(avals_in)
        self.avals_out = avals_out if type(avals_out) is list else list(avals_out)
        self.platforms = tuple(platforms or self.module_context.platforms)

    module_context = property(lambda self: _module_contexts[-1])


# JAX: jax/_src/interpreters/mlir.py ModuleContext — differs: holds what effects need only
class ModuleContext:
    """What lowering one module collects besides ops: the platforms it is lowered for (with
    several, `platform_index` is `main`'s leading `tensor<i32>` argument, the index of the
    platform it runs on), the host callbacks XLA is handed at compile time (a custom call
    names its callable by index), and the current runtime token of each ordered effect
    (`!stablehlo.token` values, threaded in program order)."""

    def __init__(self, platforms: Sequence[str] = ("cpu",)) -> None:
        self.platforms = tuple(platforms)
        self.platform_index: Any = None
        self.branch_platforms: tuple[str, ...] | None = None  # in a lower_per_platform branch
        self.host_callbacks: list[Callable] = []
        self.tokens: dict[effects.Effect, Any] = {}
        # host callbacks of the bulk program, (op, device or None): given a MAXIMAL sharding
        # (run once, on that device of the mesh) if the module turns out to be partitioned
        self.maximal_callbacks: list[tuple[Any, Any]] = []
        self.empty_mesh = False  # a callback inside shard_map runs on each device
        self.channels = 0  # the last channel id handed out (a TPU callback's sends and recvs)

    def add_host_callback(self, callback: Callable) -> int:
        self.host_callbacks.append(callback)
        return len(self.host_callbacks) - 1

    # JAX: jax/_src/interpreters/mlir.py ModuleContext.new_channel
    def new_channel(self) -> int:
        self.channels += 1
        return self.channels


# The modules being lowered (a stack: lowering can nest, e.g. in tests).
_module_contexts: list[ModuleContext] = []


def ordered_effects_of(*jaxprs: Jaxpr) -> list[effects.Effect]:
    """The ordered effects of `jaxprs`, in the fixed order their tokens are passed."""
    effs = core.join_effects(*[j.effects for j in jaxprs])
    return sorted(effects.ordered_effects.filter_in(effs), key=str)


def token_type():
    return hlo.TokenType.get()


# JAX: jax/_src/interpreters/mlir.py TokenSet — differs: the tokens live on the ModuleContext
def get_tokens(effs: Sequence[effects.Effect]) -> list:
    """The current token of each effect (a fresh `stablehlo.create_token` if it has none)."""
    tokens = _module_contexts[-1].tokens
    return [tokens[e] if e in tokens else hlo.create_token() for e in effs]


def set_tokens(effs: Sequence[effects.Effect], values: Sequence[Any]) -> None:
    """Make `values` the current tokens of `effs` (what the next ordered op consumes)."""
    _module_contexts[-1].tokens.update(zip(effs, values))


# ---------------------------------------------------------------------------------------------
# Types and constants
# ---------------------------------------------------------------------------------------------

def dtype_to_ir_type(dtype: np.dtype):
    # which MLIR type a dtype is, found once per dtype; a type lives in an MLIR context, so it
    # is made each time, in the current one
    make = _ir_type_makers.get(dtype)
    if make is None:
        make = _ir_type_makers[dtype] = _ir_type_maker(np.dtype(dtype))
    return make()


_ir_type_makers: dict[Any, Callable[[], Any]] = {}


def _ir_type_maker(dtype: np.dtype) -> Callable[[], Any]:
    if dtype == dtypes.bfloat16:
        return ir.BF16Type.get
    kind, bits = dtype.kind, dtype.itemsize * 8
    if kind == "b":
        return functools.partial(ir.IntegerType.get_signless, 1)
    if kind == "i":
        return functools.partial(ir.IntegerType.get_signless, bits)
    if kind == "u":
        return functools.partial(ir.IntegerType.get_unsigned, bits)
    if kind == "f" and bits in (16, 32, 64):  # (ml_dtypes' float8_e5m2 has kind "f" too)
        return {16: ir.F16Type, 32: ir.F32Type, 64: ir.F64Type}[bits].get
    if kind == "c":
        part = np.dtype(f"float{bits // 2}")
        return lambda: ir.ComplexType.get(dtype_to_ir_type(part))
    raise TypeError(f"no MLIR type for dtype {dtype}: minijax lowers bool, integer, float16/32/64, "
                    "bfloat16 and complex dtypes only")


# JAX: jax/_src/interpreters/mlir.py aval_to_ir_type
def aval_to_ir_type(aval: ShapedArray):
    return tensor_type(aval.shape, aval.dtype)


def tensor_type(shape: tuple, dtype: np.dtype):
    """`tensor<shape x dtype>` (`shape`: ints, or symbolic dimensions, which become `?`; a numpy
    dtype, TypeError if MLIR has none). JAX's aval_to_ir_type makes it at every use; a static
    one is made once in the shared context here (`make_ir_context`): types repeat a lot."""
    if not all(type(d) is int for d in shape):  # a symbolic dimension is dynamic: `?`
        dims = [d if type(d) is int else ir.ShapedType.get_dynamic_size() for d in shape]
        return ir.RankedTensorType.get(dims, dtype_to_ir_type(dtype))
    cache = _context_cache()
    found = cache.get((shape, dtype))
    if found is None:
        found = cache[shape, dtype] = ir.RankedTensorType.get(shape, dtype_to_ir_type(dtype))
    return found


def _context_cache() -> dict:
    # the types and scalar constants made in the shared context (`make_ir_context`), by key:
    # lowerings use a few again and again (none are kept for another context)
    return _shared_context[2] if ir.Context.current is _shared_context[0] else {}


# The values of the dimension variables (name -> `tensor<i32>`) while lowering a
# shape-polymorphic module (minijax/export/); a stack, one entry per module being lowered.
# JAX: jax/_src/interpreters/mlir.py LoweringRuleContext.dim_var_values
dim_var_values: list[dict[str, Any]] = []


# JAX: jax/_src/interpreters/mlir.py eval_dynamic_shape
def eval_dynamic_shape(shape) -> tuple:
    """The sizes in `shape` as `tensor<i32>` values: an int as a constant, a symbolic
    dimension (an expression of dimension variables, minijax/export/shape_poly.py) computed
    from `dim_var_values`."""
    env = dim_var_values[-1]
    return tuple(ir_constant(np.int32(d)) if type(d) is int else d.evaluate(env, DimOps)
                 for d in shape)


# JAX: jax/_src/interpreters/mlir.py compare_hlo (differs: the type is given, SIGNED by default)
def compare_hlo(x, y, direction: str, comparison_type: str = "SIGNED"):
    """`stablehlo.compare` of two values of one shape and element type (i1 out), `direction`
    "EQ", "NE", "LT"...; `comparison_type` "SIGNED", "UNSIGNED", "FLOAT" or "TOTALORDER"."""
    return hlo.compare(x, y, hlo.ComparisonDirectionAttr.get(direction),
                       compare_type=hlo.ComparisonTypeAttr.get(comparison_type))


# JAX: jax/_src/export/shape_poly.py _evaluate_add, _evaluate_multiply (and lax's
# floor_divide and remainder, which JAX's evaluation of floordiv/mod calls)
class DimOps:
    """The arithmetic of dimension expressions on `tensor<i32>` values, with Python's
    floor division and modulo (`DimExpr.evaluate(env, DimOps)`)."""

    @staticmethod
    def const(c):
        return ir_constant(np.int32(c))

    add = staticmethod(lambda a, b: hlo.add(a, b))
    mul = staticmethod(lambda a, b: hlo.multiply(a, b))
    max = staticmethod(lambda a, b: hlo.maximum(a, b))
    min = staticmethod(lambda a, b: hlo.minimum(a, b))

    _cmp = staticmethod(compare_hlo)

    @staticmethod
    def floordiv(a, b):
        q, zero = hlo.divide(a, b), DimOps.const(0)
        fix = hlo.and_(DimOps._cmp(hlo.sign(a), hlo.sign(b), "NE"),
                       DimOps._cmp(hlo.remainder(a, b), zero, "NE"))
        return hlo.select(fix, hlo.subtract(q, DimOps.const(1)), q)

    @staticmethod
    def mod(a, b):
        r, zero = hlo.remainder(a, b), DimOps.const(0)
        signs_differ = DimOps._cmp(DimOps._cmp(r, zero, "LT"), DimOps._cmp(b, zero, "LT"),
                                   "NE", "UNSIGNED")
        fix = hlo.and_(signs_differ, DimOps._cmp(r, zero, "NE"))
        return hlo.select(fix, hlo.add(r, b), r)


def enclosing_module():
    """The `builtin.module` operation that the current insertion point is inside."""
    op = ir.InsertionPoint.current.block.owner
    while op.name != "builtin.module":
        op = op.parent
    return op


# JAX: jax/_src/interpreters/mlir.py eval_dynamic_shape_as_tensor
def eval_dynamic_shape_as_tensor(shape) -> Any:
    """A `tensor<rank x i32>` of the sizes in `shape` (see `eval_dynamic_shape`)."""
    vec = ir.RankedTensorType.get((1,), ir.IntegerType.get_signless(32))
    parts = [ir_constant(np.array([d], np.int32)) if type(d) is int else
             hlo.reshape(vec, v) for d, v in zip(shape, eval_dynamic_shape(
                 [0 if type(d) is int else d for d in shape]))]
    return parts[0] if len(parts) == 1 else hlo.concatenate(parts, 0)


def is_static(shape) -> bool:
    return all(type(d) is int for d in shape)


# JAX: jax/_src/interpreters/mlir.py ir_constant (through _numpy_array_attribute)
def ir_constant(val) -> Any:
    """A `stablehlo.constant` holding the numpy value `val` (dtype kept as given; bool and
    bfloat16 buffers are read by MLIR as they are)."""
    val = np.asarray(val)
    if val.ndim == 0:  # a scalar: its attribute made once per MLIR context
        cache, key = _context_cache(), (val.dtype, val.tobytes())  # (-0.0 is not 0.0)
        found = cache.get(key)
        if found is None:
            attr = ir.DenseElementsAttr.get(np.ascontiguousarray(val),
                                            type=dtype_to_ir_type(val.dtype), shape=())
            found = cache[key] = attr, attr.type
        return make_op("stablehlo.constant", found[1], [], value=found[0])
    elt = dtype_to_ir_type(val.dtype)
    if val.size > 1 and np.all(val == val.flat[0]):
        data = np.ravel(val)[:1]  # a splat: one element repeated (cheap to emit and to read)
    else:
        data = val  # (one element: handed over as it is, not raveled and sliced)
    attr = ir.DenseElementsAttr.get(np.ascontiguousarray(data), type=elt, shape=val.shape)
    if data.nbytes > 1 << 20 and ir.Context.current is _shared_context[0]:
        _shared_context[1] = CONTEXT_USES  # (a context holding this is not handed out again)
    return make_op("stablehlo.constant", attr.type, [], value=attr)  # hlo.constant(attr)


# `hlo.<op>(...)` without the bindings' Python builder and result type inference: a few times
# cheaper, for the ops a large program lowers by the thousand (constants, broadcasts, arithmetic)
def make_op(name: str, result_type, operands: Sequence[Any], **attributes) -> Any:
    """The one result, of `result_type`, of a new op `name` at the insertion point."""
    return ir.Operation.create(name, results=[result_type], operands=list(operands),
                               attributes=attributes or None).result


def full_like_aval(value, aval: ShapedArray):
    """`value` in every element of an `aval`-shaped tensor: a scalar constant broadcast, as
    JAX emits it (jax/_src/interpreters/mlir.py: full_like_aval)."""
    scalar = ShapedArray((), aval.dtype)
    return broadcast_to(ir_constant(np.array(value, aval.dtype)), scalar, aval)


# JAX: jax/_src/interpreters/mlir.py broadcast_in_dim (the helper for implicit broadcasting)
def broadcast_to(x, aval_in: ShapedArray, aval_out: ShapedArray):
    """Broadcast `x` of `aval_in` (rank 0, or same rank with 1s) to `aval_out`'s shape."""
    if aval_in.shape == aval_out.shape:
        return x
    dims = list(range(aval_out.ndim)) if aval_in.ndim else []
    out_type = tensor_type(aval_out.shape, aval_in.dtype)
    if not is_static(aval_out.shape):
        return hlo.dynamic_broadcast_in_dim(out_type, x,
                                            eval_dynamic_shape_as_tensor(aval_out.shape), dims)
    out = make_op("stablehlo.broadcast_in_dim", out_type, [x],  # hlo.broadcast_in_dim
                  broadcast_dimensions=ir.DenseI64ArrayAttr.get(dims))
    wrap_compute_type_in_place(out)
    return out


def nary_lowering(op_name: str) -> Callable:
    """A rule for an elementwise primitive: broadcast the operands to the output shape (lax
    allows rank-0 and size-1 operands) and apply `stablehlo.<op_name>`."""
    def rule(ctx: LoweringRuleContext, *args, **params):
        out = ctx.avals_out[0]
        # (broadcast_to makes the operand's shape `out`'s, keeping the operand's dtype)
        args = [a if av.shape == out.shape else broadcast_to(a, av, out)
                for a, av in zip(args, ctx.avals_in)]
        if out.sharding is not None:  # operands broadcast here get the result's layout
            args = [a if av.shape == out.shape else _constrain(a, out)
                    for a, av in zip(args, ctx.avals_in)]
        if op_name in _SAME_TYPE_OPS:  # the result has its operands' type
            return make_op(f"stablehlo.{op_name.rstrip('_')}", args[0].type, args)
        return getattr(hlo, op_name)(*args)
    rule.__name__ = f"_{op_name}_lowering"
    return rule


# Elementwise ops whose result type is their operands' (not abs, compare, is_finite, real...)
_SAME_TYPE_OPS = frozenset(
    "add subtract multiply divide remainder power maximum minimum atan2 and_ or_ xor not_ negate "
    "sign floor ceil sqrt rsqrt cbrt exponential exponential_minus_one log log_plus_one logistic "
    "tanh sine cosine tan shift_left shift_right_logical shift_right_arithmetic "
    "count_leading_zeros popcnt".split())


# ---------------------------------------------------------------------------------------------
# Jaxprs to modules
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/mlir.py jaxpr_subcomp
def lower_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list:
    """Emit ops for every equation of `jaxpr` at the current insertion point; return the
    values of its outputs. `consts` are numpy values, embedded as constants."""
    env: dict[core.Var, Any] = {}

    def read(v):
        if isinstance(v, Literal):
            return ir_constant(np.asarray(v.val, v.aval.dtype))
        return env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = ir_constant(core.to_numpy(c, v.aval))
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    outer = _name_stack[0]
    module_ctx = _module_contexts[-1]  # (its platforms are the same for every equation)
    platforms = module_ctx.branch_platforms or module_ctx.platforms
    try:
        for eqn in jaxpr.eqns:
            prim = eqn.primitive
            ctx = LoweringRuleContext([v.aval for v in eqn.invars], [v.aval for v in eqn.outvars],
                                      platforms if eqn.ctx is None else _platforms_for_eqn(eqn))
            rule = _rule_for(prim, ctx.platforms, eqn.effects)
            operands = [read(v) for v in eqn.invars]
            # JAX: jax/_src/interpreters/mlir.py source_info_to_location — differs: the name
            # alone, no file location inside. The ops get `loc("jit(f)/scope/prim")`, which
            # XLA keeps as their op_name metadata; ops of inner jaxprs (a jit's, a branch's)
            # get names under this equation's scopes
            names = _name_stack[0] = _join(outer, eqn.name_stack) if eqn.name_stack else outer
            with ir.Location.name(f"{names}/{prim.name}" if names else prim.name):
                if eqn.ctx is None and _compute_type[0] is None:  # no compute_on: as it is
                    outs = rule(ctx, *operands, **eqn.params)
                else:
                    outs = _lower_with_compute_type(eqn, rule, ctx, operands)
                if not prim.multiple_results and not isinstance(outs, (list, tuple)):
                    outs = [outs]  # a rule may give its one value alone, or in a list
                for v, o in zip(eqn.outvars, outs):
                    if v.aval.sharding is not None and prim not in _lays_out_itself:
                        o = _constrain(o, v.aval)
                    env[v] = o
    finally:
        _name_stack[0] = outer
    return [read(v) for v in jaxpr.outvars]


# ---------------------------------------------------------------------------------------------
# Lowering per platform
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/mlir.py _platforms_for_eqn
def _platforms_for_eqn(eqn: core.JaxprEqn) -> tuple[str, ...]:
    """The platforms an equation is lowered for: the module's (or the branch's), except that
    an equation under `compute_on('device_host')` runs on the host CPU."""
    if eqn.ctx is not None and eqn.ctx.compute_type == "device_host":
        return ("cpu",)
    if eqn.ctx is not None and eqn.ctx.compute_type == "tpu_sparsecore":
        return ("tpu",)
    module_ctx = _module_contexts[-1]
    return module_ctx.branch_platforms or module_ctx.platforms


# JAX: jax/_src/interpreters/mlir.py _get_lowering_rules
def _rule_for(prim: core.Primitive, platforms: Sequence[str], effs) -> Callable:
    """The rule lowering `prim` for `platforms`: the rule for every platform when none of
    them has its own, else `lower_per_platform` over the rules they need."""
    if len(platforms) == 1 and prim not in _platform_lowerings[platforms[0]]:  # the usual case
        default = _lowerings.get(prim)
        if default is not None:
            return default
    rules = {p: _platform_lowerings[p][prim] for p in platforms
             if prim in _platform_lowerings[p]}
    default = _lowerings.get(prim)
    if not rules and default is not None:
        return default
    return lambda ctx, *args, **params: lower_per_platform(ctx, prim.name, rules, default,
                                                           effs, *args, **params)


# JAX: jax/_src/interpreters/mlir.py lower_per_platform
def lower_per_platform(ctx: LoweringRuleContext, description: str,
                       platform_rules: dict[str, Callable], default_rule: Callable | None,
                       effs, *args, **params) -> list:
    """Emit the rule each of `ctx.platforms` needs (its own in `platform_rules`, else
    `default_rule`). One rule for all: just that rule. Several: each in a branch of a
    `stablehlo.case` picked by the platform the module runs on — a first case maps the
    platform index (`main`'s `_platform_index` argument) to the rule's index (the platforms'
    own rules in order, then the default; platforms sharing the default share its branch), a
    second holds one branch per rule, each lowered for its platforms. An ordered effect's
    token goes in and out of the branches with the results. As JAX emits it. Returns the list
    of results; NotImplementedError names a platform with no rule."""
    platforms = ctx.platforms
    missing = [p for p in platforms if p not in platform_rules and default_rule is None]
    if missing:
        raise NotImplementedError(
            f"MLIR lowering rule for '{description}' not implemented for platform "
            f"{', '.join(missing)} — see {_CHAPTER}")
    kept = [platform_rules[p] for p in platforms if p in platform_rules]
    rule_of = {p: i for i, p in enumerate(p for p in platforms if p in platform_rules)}
    if len(rule_of) < len(platforms):
        rule_of.update({p: len(kept) for p in platforms if p not in rule_of})
        kept.append(default_rule)
    if len(kept) == 1:
        outs = kept[0](ctx, *args, **params)
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]
    module_ctx = ctx.module_context
    i32 = ir.RankedTensorType.get((), ir.IntegerType.get_signless(32))
    index_op = hlo.CaseOp([i32], index=module_ctx.platform_index, num_branches=len(platforms))
    for region, p in zip(index_op.regions, platforms):
        with ir.InsertionPoint(region.blocks.append()):
            hlo.return_([ir_constant(np.int32(rule_of[p]))])
    ordered = sorted(effects.ordered_effects.filter_in(effs), key=str)
    types = [token_type()] * len(ordered) + [aval_to_ir_type(a) for a in ctx.avals_out]
    case_op = hlo.CaseOp(types, index=index_op.result, num_branches=len(kept))
    tokens_before = dict(module_ctx.tokens)
    for i, (region, rule) in enumerate(zip(case_op.regions, kept)):
        module_ctx.tokens = dict(tokens_before)
        inner = tuple(p for p in platforms if rule_of[p] == i)
        outer, module_ctx.branch_platforms = module_ctx.branch_platforms, inner
        try:
            with ir.InsertionPoint(region.blocks.append()):
                outs = rule(LoweringRuleContext(ctx.avals_in, ctx.avals_out, inner), *args,
                            **params)
                outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                hlo.return_([*get_tokens(ordered), *outs])
        finally:
            module_ctx.branch_platforms = outer
    module_ctx.tokens = tokens_before
    results = list(case_op.results)
    set_tokens(ordered, results[:len(ordered)])
    return results[len(ordered):]


# JAX: jax/_src/interpreters/mlir.py LoweringRuleContext.name_stack — differs: one name stack
# for the lowering in progress instead of a field of each rule's context: the scopes of the
# equation being lowered, after its enclosing jits' names (`jit(f)/jit(g)/inner`)
_name_stack = [""]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix and name else prefix or name


@contextlib.contextmanager
def extend_name_stack(name: str):
    """Inside the block, the ops lowered get `name` after the current equation's names (a jit
    adds `jit(g)`, a cond's branch `cond/branch_0_fun`, as JAX's lowerings do)."""
    prev = _name_stack[0]
    _name_stack[0] = _join(prev, name)
    try:
        yield
    finally:
        _name_stack[0] = prev


# ---------------------------------------------------------------------------------------------
# compute_on: where XLA runs an op
# ---------------------------------------------------------------------------------------------

# The compute type of the equation being lowered: an equation traced under `compute_on` sets
# it, and the equations of a `jit` it calls (inlined here) inherit it, as the ops of the
# function JAX calls do from the `call` op carrying the attribute.
_compute_type: list = [None]


# JAX: jax/_src/interpreters/mlir.py map_compute_type
def map_compute_type(c_type: str) -> str:
    """XLA's name for a `compute_on` compute type ('device_host' -> 'host')."""
    names = {"device_host": "host", "device": "dense", "tpu_sparsecore": "sparseoffload"}
    if c_type not in names:
        raise ValueError(f"Invalid compute type {c_type}. Current supported values are "
                         "`device_host`, `device` and `tpu_sparsecore`")
    return names[c_type]


# JAX: jax/_src/interpreters/mlir.py wrap_compute_type_in_place
def wrap_compute_type_in_place(value) -> None:
    """Mark the op that made `value` with the compute type in force: `mhlo.frontend_attributes
    = {_xla_compute_type = "host"}` (a GPU stream: `_xla_stream_annotation`), merged with the
    frontend attributes it has. A block argument (an input passed through) is left alone."""
    if _compute_type[0] is None or not isinstance(value, ir.Value) or isinstance(
            value.owner, ir.Block):
        return
    _mark_op(value.owner.operation if hasattr(value.owner, "operation") else value.owner)


def _mark_op(op) -> None:
    c_type = _compute_type[0]
    if op.name in _UNMARKED:
        return
    if c_type.startswith("gpu_stream:"):
        attrs = {"_xla_stream_annotation": ir.StringAttr.get(c_type.split(":", 1)[1]),
                 "inlineable": ir.StringAttr.get("false")}
    else:
        attrs = {"_xla_compute_type": ir.StringAttr.get(map_compute_type(c_type))}
    if "mhlo.frontend_attributes" in op.attributes:
        attrs = {a.name: a.attr for a in ir.DictAttr(op.attributes["mhlo.frontend_attributes"])
                 } | attrs
    op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(attrs)
    if op.name in _CONTROL_FLOW:  # a loop's or branch's own bookkeeping runs there too
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    _mark_op(inner.operation)


# JAX traces a loop's counter and slicing as equations (scan lowers through lower_fun), so
# they carry the mark; a reducer's or comparator's body is built op by op and does not.
_UNMARKED = frozenset({"stablehlo.constant", "stablehlo.return", "func.return"})
_CONTROL_FLOW = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})


def _lower_with_compute_type(eqn: core.JaxprEqn, rule: Callable, ctx: LoweringRuleContext,
                             operands: list):
    """`rule`'s results for `eqn`, with the compute type of `eqn` (else the one in force)
    marked on every op the rule emitted at the insertion point (and inside the loops and
    branches among them) and on the ops that made its results."""
    outer = _compute_type[0]
    if eqn.ctx is not None:
        _compute_type[0] = eqn.ctx.compute_type
    try:
        if _compute_type[0] is None:
            return rule(ctx, *operands, **eqn.params)
        block = ir.InsertionPoint.current.block
        start = len(block.operations)
        outs = rule(ctx, *operands, **eqn.params)
        for op in list(block.operations)[start:]:
            _mark_op(op.operation)
        for o in outs if isinstance(outs, (list, tuple)) else [outs]:
            wrap_compute_type_in_place(o)
        return outs
    finally:
        _compute_type[0] = outer


# JAX: jax/_src/interpreters/mlir.py lower_fun
def lower_fun(fun: Callable, multiple_results: bool = True) -> Callable:
    """A lowering rule made of a Python function of the operands (and the params, as
    keywords): `fun` is traced at the rule's input avals and its jaxpr lowered in place, so a
    primitive can be lowered as a composition of others. `multiple_results`: whether `fun`
    returns a list of results."""
    def rule(ctx: LoweringRuleContext, *args, **params):
        def flat(*xs):
            out = fun(*xs, **params)
            return list(out) if multiple_results else [out]
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat, ctx.avals_in, purpose="lower_fun")
        outs = lower_jaxpr(jaxpr, consts, args)
        return outs if multiple_results else outs[0]
    return rule


# Primitives whose lowering already states their result's layout (no second constraint).
_lays_out_itself: set = set()


# JAX: jax/_src/interpreters/mlir.py lower_with_sharding_in_types — differs: applied here,
# once for every equation, instead of in each primitive's lowering rule
def _constrain(x, aval: ShapedArray):
    """Sharding in types: a result typed `f32[8@x,4]` is pinned to that layout with an
    `sdy.sharding_constraint`, so the partitioner does what the types say."""
    return sdy.sharding_constraint(x, sharding_attr(aval.sharding, aval.ndim, open_auto=True))


@functools.cache
def _upstream_dialects():
    # the `func` (and other upstream MLIR) dialects: without them a module does not verify,
    # and prints in MLIR's generic form ("func.func"() ...) instead of `func.func public @main`
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    return registry


# JAX: jax/_src/interpreters/mlir.py make_ir_context — differs: a context serves several
# lowerings. Making one with StableHLO loaded and freeing it costs ~0.3 ms, 7% of the MLP
# training step's trace+lower; what a context interns (types, attributes, location names)
# stays until it is freed, so a fresh one is made after CONTEXT_USES lowerings, or after one
# that embedded over a megabyte of constants.
def make_ir_context() -> Any:
    """An MLIR context with the `func`, StableHLO and CHLO dialects loaded."""
    if _shared_context[0] is None or _shared_context[1] >= CONTEXT_USES:
        _load()
        ctx = ir.Context()
        ctx.append_dialect_registry(_upstream_dialects())
        ctx.dialects["func"]  # load just `func` (loading every dialect costs ~4 ms per lowering)
        hlo.register_dialect(ctx)
        chlo.register_dialect(ctx)
        _shared_context[:] = [ctx, 0, {}]
    _shared_context[1] += 1
    return _shared_context[0]


CONTEXT_USES = 32
_shared_context: list[Any] = [None, 0, {}]  # the context handed out, how often, _context_cache


# ---------------------------------------------------------------------------------------------
# Portable artifacts (jax.export's serialized modules)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/export/_export.py _module_to_bytecode
def module_to_portable_artifact(module) -> bytes:
    """StableHLO portable-artifact bytecode of `module`, for a consumer at least four weeks
    old (the compatibility window JAX's export targets)."""
    import jax.extend.mlir as jem
    _load()
    version = hlo.get_version_from_compatibility_requirement(
        hlo.StablehloCompatibilityRequirement.WEEK_4)
    # sdy meshes and shardings kept as they are, where the backend says so (JAX's choice)
    return jem.serialize_portable_artifact(str(module), version,
                                           xla_bridge.get_backend().serialize_with_sdy)


# JAX: jax/_src/export/_export.py Exported.mlir_module
def module_from_portable_artifact(blob: bytes, context=None):
    """The `ir.Module` that the portable artifact `blob` holds (in `context`, or a new one)."""
    import jax.extend.mlir as jem
    return jem.deserialize_portable_artifact(bytes(blob), context or make_ir_context())


# JAX: jax/_src/interpreters/mlir.py refine_polymorphic_shapes
def refine_polymorphic_shapes(module):
    """`module` (whose `main` has static argument types) with every dynamic shape inside it
    made static, and its shape assertions checked; an `ir.Module` in a new context.
    ValueError ("Error refining shapes", as JAX's) when refinement fails: a shape
    assertion that does not hold, or a shape it cannot make static."""
    import jax.extend.mlir as jem
    try:
        text = jem.refine_polymorphic_shapes(str(module).encode(),
                                             enable_shape_assertions=True,
                                             validate_static_shapes=True)
    except Exception as e:  # jaxlib's error: an assertion or an unrefinable shape
        raise ValueError(f"Error refining shapes. {e}") from e
    ctx = make_ir_context()
    with ctx:
        return ir.Module.parse(text)


# JAX: jax/_src/interpreters/mlir.py lower_jaxpr_to_module
def lower_jaxpr_to_module(closed: ClosedJaxpr, name: str = "main",
                          donated: Sequence[bool] = (), in_shardings: Sequence[Any] = (),
                          out_shardings: Sequence[Any] = (), meshes: list | None = None,
                          host_callbacks: list | None = None,
                          dim_vars: Sequence[str] = (),
                          platforms: Sequence[str] | None = None) -> Any:
    """A StableHLO module whose public function `main` computes `closed`.

    Args:
      closed: the jaxpr; its consts must be concrete (numpy/Array) values.
      donated: per input, whether its buffer may be reused for an output of the same type
        (emitted as `tf.aliasing_output` attributes, as JAX does).
      in_shardings / out_shardings: per input / output, a NamedSharding or None (the
        partitioner chooses); emitted as `sdy.sharding` attributes.
      meshes: if given, receives the mesh the module is partitioned over (from the shardings
        and the `sdy.sharding_constraint`s inside), when there is one.
      host_callbacks: if given, receives the Python callables the module's host callbacks
        call (to be handed to XLA with the module: `compiler.compile`).
    Returns: an `ir.Module` (print it with `str()` for the text). A module that uses a mesh
    starts with its `sdy.mesh @mesh` and records `mhlo.num_partitions` (the mesh's size).
    A jaxpr with ordered effects gets one leading `!stablehlo.token` argument and result per
    effect (`ordered_effects_of`), as JAX's runtime tokens. `dim_vars`: the dimension
    variables of a shape-polymorphic jaxpr, taken first as `tensor<i32>` arguments marked
    `jax.global_constant` (minijax/export/). `platforms`: the platforms to lower for (default:
    the default device's); with several, `main` first takes `_platform_index`, a
    `tensor<i32>` the runtime sets to the index of its platform among them, and the rules
    that differ between them are picked by a `stablehlo.case` on it (`lower_per_platform`).
    Raises ValueError if two different meshes are used.
    """
    platforms = tuple(platforms or (default_platform(),))
    dim_vars = ("_platform_index",) * (len(platforms) > 1) + tuple(dim_vars)
    ctx = make_ir_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["sym_name"] = ir.StringAttr.get(_sanitize(name))
        module_ctx = ModuleContext(platforms)
        _sharding_state.append([])
        _module_contexts.append(module_ctx)
        try:
            lower_jaxpr_to_fun(module, closed, name, dim_vars, donated, in_shardings,
                               out_shardings, module_ctx)
            used = _sharding_state[-1]
        finally:
            _sharding_state.pop()
            _module_contexts.pop()
        if host_callbacks is not None:
            host_callbacks.extend(module_ctx.host_callbacks)
        _place_callbacks(module, used[0] if used else None, module_ctx)
        if used:
            _add_mesh(module, used[0])
            if meshes is not None:
                meshes.append(used[0])
    return module


# JAX: jax/_src/interpreters/mlir.py lower_jaxpr_to_fun — differs: only the public `main`
def lower_jaxpr_to_fun(module, closed: ClosedJaxpr, name: str, dim_vars: Sequence[str],
                       donated: Sequence[bool], in_shardings: Sequence[Any],
                       out_shardings: Sequence[Any], module_ctx: ModuleContext) -> None:
    """Add to `module` the public function `main` computing `closed` (what
    `lower_jaxpr_to_module` documents): its arguments the dimension variables, one token per
    ordered effect and the jaxpr's inputs; its results the tokens and the jaxpr's outputs;
    their attributes (donation, shardings, memory kinds); its body the jaxpr's equations
    (`lower_jaxpr`), under the name stack `jit(name)`."""
    effs = ordered_effects_of(closed.jaxpr)
    ntok, nd = len(effs), len(dim_vars)
    i32 = ir.RankedTensorType.get((), ir.IntegerType.get_signless(32))
    in_types = [i32] * nd + [token_type()] * ntok + [aval_to_ir_type(a) for a in closed.in_avals]
    out_types = [token_type()] * ntok + [aval_to_ir_type(a) for a in closed.out_avals]
    fn = func.FuncOp("main", ir.FunctionType.get(in_types, out_types),
                     ip=ir.InsertionPoint(module.body))
    fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
    # JAX marks every input and output with its memory kind once one is not "device"
    kinds = not all(memory_kind(s) == "device" for s in [*in_shardings, *out_shardings])
    arg_attrs = _arg_attrs(closed, donated, in_shardings, ntok, kinds)
    if dim_vars:
        fn.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(
            {"jax.global_constant": ir.StringAttr.get(v)}) for v in dim_vars] + (
            arg_attrs or [ir.DictAttr.get({})] * (len(in_types) - nd)))
    elif arg_attrs is not None:
        fn.arg_attrs = ir.ArrayAttr.get(arg_attrs)
    if ntok or kinds or any(s is not None for s in out_shardings):
        token_attr = ir.DictAttr.get({"jax.token": ir.BoolAttr.get(True)})
        fn.result_attrs = ir.ArrayAttr.get([token_attr] * ntok + [
            ir.DictAttr.get(_value_attrs(s, a, kinds, result=True)) for s, a in
            zip([*out_shardings, *[None] * len(closed.out_avals)], closed.out_avals)])
    entry = fn.add_entry_block()
    dim_var_values.append(dict(zip(dim_vars, list(entry.arguments)[:nd])))
    if len(module_ctx.platforms) > 1:
        module_ctx.platform_index = entry.arguments[0]
    prev, _name_stack[0] = _name_stack[0], f"jit({name})"  # as JAX names `main`
    try:
        with ir.InsertionPoint(entry):
            set_tokens(effs, entry.arguments[nd:nd + ntok])
            outs = lower_jaxpr(closed.jaxpr, closed.consts, list(entry.arguments)[nd + ntok:])
            if kinds:  # as JAX: every output given a sharding is placed, "device" too
                outs = [x if s is None else wrap_with_memory_kind(x, memory_kind(s))
                        for x, s in zip(outs, [*out_shardings, *[None] * len(outs)])]
            func.ReturnOp([*get_tokens(effs), *outs])
    finally:
        _name_stack[0] = prev
        dim_var_values.pop()


# JAX: jax/_src/interpreters/mlir.py LoweringParameters.platforms (its default)
def default_platform() -> str:
    """The platform minijax lowers for unless told: the default device's ('cpu', 'tpu'...)."""
    return xla_bridge.default_device().platform


# JAX: jax/_src/callback.py _callback_op_sharding (its ShardingContext branch)
def _place_callbacks(module, mesh, module_ctx: ModuleContext) -> None:
    """A partitioned module runs each host callback of the bulk program once, on one device
    (`sdy.mesh @maximal_mesh_N`, N its position in the mesh's devices: 0, or the device of the
    callback's `sharding=`), on the whole logical operands, as JAX's MAXIMAL sharding does.
    (Callbacks inside `shard_map` run on every device: `minijax/callback.py:
    emit_python_callback` annotates those with `@empty_mesh`.)"""
    devices = list(getattr(mesh, "devices_flat", ()) if mesh is not None else
                   [xla_bridge.default_device()])
    indices = set()
    for op, device in module_ctx.maximal_callbacks:
        if device is None:
            i = 0
        elif device in devices:
            i = devices.index(device)
        else:
            raise ValueError(f"Sharding provided to pure_callback specifies a device {device} "
                             f"that is not in the device assignment ({devices})")
        indices.add(i)
        if mesh is None:  # one device: nothing to annotate
            continue
        n = max(1, len(op.results))
        op.attributes["sdy.sharding"] = ir.Attribute.parse(
            "#sdy.sharding_per_value<[" + ", ".join([f"<@maximal_mesh_{i}, []>"] * n) + "]>")
    if mesh is None:
        return
    first = module.body.operations[0]  # `_add_mesh` puts `sdy.mesh @mesh` before these
    meshes = [(f"maximal_mesh_{i}", f"[], device_ids=[{i}]",
               f"axes = [], device_ids = dense<{i}> : tensor<1xi64>") for i in sorted(indices)]
    if module_ctx.empty_mesh:
        meshes.append(("empty_mesh", "[]", "axes = []"))
    for name, spec, stable in meshes:
        with ir.InsertionPoint(first):
            op = sdy.MeshOp(name, ir.Attribute.parse(f"#sdy.mesh<{spec}>"))
        op.attributes["stablehlo.mesh"] = ir.Attribute.parse(f"{{{stable}}}")


# The meshes the module being lowered uses (a stack: lowering can nest, e.g. in tests).
_sharding_state: list[list] = []


# JAX: jax/_src/named_sharding.py NamedSharding._to_sdy_sharding
def sharding_attr(sharding, ndim: int, open_auto: bool = False):
    """`#sdy.sharding<@mesh, [{"x"}, {}, ...]>` for a NamedSharding of a rank-`ndim` value:
    per dimension the mesh axes it is split over, major to minor ({} = not split, {?} =
    left to the partitioner for `P.UNCONSTRAINED`). Records the mesh for the module.
    `open_auto` (sharding in types, on a mesh with Auto axes): every dimension is left open to
    further splitting over the Auto axes (`{?}`, `{"y", ?}`), as JAX's types say nothing of them."""
    mesh = sharding.mesh
    if _sharding_state:  # one mesh per module: same names and sizes (axis types may differ,
        used = _sharding_state[-1]  # as under auto_axes), same devices if both are concrete
        if used and not _same_mesh(used[0], mesh):
            raise ValueError(f"a jitted computation can use one mesh; got {used[0]} and {mesh}")
        if not used:
            used.append(mesh)
        elif hasattr(mesh, "devices") and not hasattr(used[0], "devices"):
            used[0] = mesh  # the devices to compile for
    sdy.register_dialect(ir.Context.current)
    dims = []
    for p in [*sharding.spec, *[None] * (ndim - len(sharding.spec))]:
        if isinstance(p, _Unconstrained):
            dims.append("{?}")
        else:
            axes = [f'"{a}"' for a in _axes_of(p)]
            if open_auto and mesh.auto_axes:
                axes.append("?")
            dims.append("{" + ", ".join(axes) + "}")
    replicated = ""
    if open_auto and mesh.auto_axes:  # open dimensions: but the type's unused Explicit axes
        used = {a for p in sharding.spec for a in _axes_of(p)}  # stay out of them (as JAX)
        unused = [f'"{a}"' for a in mesh.axis_names if a in mesh.explicit_axes and a not in used]
        replicated = f", replicated={{{', '.join(unused)}}}" if unused else ""
    return ir.Attribute.parse(f"#sdy.sharding<@mesh, [{', '.join(dims)}]{replicated}>")


def _same_mesh(a, b) -> bool:
    if a.shape_tuple != b.shape_tuple:
        return False
    return not (hasattr(a, "devices") and hasattr(b, "devices")) or a.devices_flat == b.devices_flat


def _add_mesh(module, mesh) -> None:
    """Put `sdy.mesh @mesh = <["x"=4, ...]>` first in the module (with the `stablehlo.mesh`
    attribute JAX's modules carry) and the partition count on the module."""
    axes = ", ".join(f'"{n}"={s}' for n, s in zip(mesh.axis_names, mesh.axis_sizes))
    stable = ", ".join(f'{{name = "{n}", size = {s} : i64}}'
                       for n, s in zip(mesh.axis_names, mesh.axis_sizes))
    i32 = ir.IntegerType.get_signless(32)
    attrs = module.operation.attributes
    attrs["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, mesh.size)
    attrs["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
    first = module.body.operations[0]
    with ir.InsertionPoint(first):
        op = sdy.MeshOp("mesh", ir.Attribute.parse(f"#sdy.mesh<[{axes}]>"))
    op.attributes["stablehlo.mesh"] = ir.Attribute.parse(f"{{axes = [{stable}]}}")


def memory_kind(sharding) -> str:
    """The memory kind a sharding names ("device" for None)."""
    return "device" if sharding is None else sharding.memory_kind


def _value_attrs(s, aval, kinds: bool, result: bool = False) -> dict:
    """`sdy.sharding` (for a NamedSharding) and, when the module uses memory kinds,
    `mhlo.memory_kind` for one input or output. A result whose sharding is only its type's,
    on a mesh with Auto axes, is laid out as its type says when every dimension is split
    (closed: `[{"b"}]` for `f32[8@b]`) and is left to the partitioner when one is not, as in
    JAX (pxla.py `_concretize_abstract_out_shardings`: an unsplit dimension is UNCONSTRAINED,
    and a result sharding with one is not emitted)."""
    d = {}
    typed = isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh)
    if result and typed and s.mesh.auto_axes:
        if all(_axes_of(p) for p in s.spec._normalized_spec_for_aval(aval.ndim)):
            d["sdy.sharding"] = sharding_attr(s, aval.ndim)
    elif isinstance(s, NamedSharding):
        d["sdy.sharding"] = sharding_attr(s, aval.ndim, typed)  # a type's: Auto axes open
    if kinds:
        d["mhlo.memory_kind"] = ir.StringAttr.get(memory_kind(s))
    return d


# JAX: jax/_src/interpreters/mlir.py wrap_with_memory_kind
def wrap_with_memory_kind(x, kind: str):
    """`custom_call @annotate_device_placement` telling XLA to place `x` in memory `kind`
    (its `_xla_buffer_placement` frontend attribute), as JAX does for outputs whose sharding
    names a host memory kind."""
    op = hlo.CustomCallOp.build_generic(
        results=[x.type], operands=[x],
        attributes={"call_target_name": ir.StringAttr.get("annotate_device_placement"),
                    "has_side_effect": ir.BoolAttr.get(True),
                    "backend_config": ir.StringAttr.get("")})
    op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {"_xla_buffer_placement": ir.StringAttr.get(kind)})
    return op.result


def _arg_attrs(closed: ClosedJaxpr, donated: Sequence[bool], in_shardings,
               ntok: int = 0, kinds: bool = False) -> list | None:
    pairs = _alias_pairs(closed, donated) if any(donated) else {}
    if not pairs and not ntok and not kinds and not any(s is not None for s in in_shardings):
        return None
    i32 = ir.IntegerType.get_signless(32)
    attrs = [ir.DictAttr.get({"jax.token": ir.BoolAttr.get(True)})] * ntok
    for i, a in enumerate(closed.in_avals):
        s = in_shardings[i] if i < len(in_shardings) else None
        d = _value_attrs(s, a, kinds and s is not None)  # as JAX: none for an unplaced input
        if i in pairs:  # output numbers count the leading tokens
            d["tf.aliasing_output"] = ir.IntegerAttr.get(i32, pairs[i] + ntok)
        attrs.append(ir.DictAttr.get(d))
    return attrs


def _alias_pairs(closed: ClosedJaxpr, donated: Sequence[bool]) -> dict[int, int]:
    """Donated input index -> the output index whose buffer it becomes (first output of the
    same type not yet taken)."""
    free = list(enumerate(closed.out_avals))
    pairs = {}
    for i, (aval, d) in enumerate(zip(closed.in_avals, donated)):
        if d:
            for k, (j, out_aval) in enumerate(free):
                if core.typematch(out_aval, aval):
                    pairs[i] = j
                    del free[k]
                    break
    return pairs


def usable_donations(closed: ClosedJaxpr, donated: Sequence[bool]) -> tuple[bool, ...]:
    """Per input: donated *and* reused for an output (JAX deletes only those inputs)."""
    pairs = _alias_pairs(closed, donated)
    return tuple(i in pairs for i in range(len(closed.in_avals)))


def _sanitize(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return "jit_" + (out or "fun")
