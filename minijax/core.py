"""The core: abstract values, primitives, traces and tracers, and the jaxpr IR.

Every value inside a transformation is either a concrete array or a `Tracer` that belongs to a
`Trace`. Every operation is a `Primitive` whose `bind` hands it to the *current* trace, which is
held in a context (`trace_ctx`) rather than found by searching a stack of levels: this is JAX's
"stackless" design. Each trace knows its parent trace and lifts values that are not its own
tracers as constants.

Mirrors jax/_src/core.py. Taught in chapters/02-tracing.md and chapters/03-jaxprs.md.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import operator
import os
import re
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from minijax import dtypes
from minijax.config import config
from minijax.effects import Effects, JaxprInputEffect, no_effects
from minijax.tree_util import tree_map
from minijax.util import safe_zip

# ---------------------------------------------------------------------------------------------
# Abstract values
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py ShapedArray — differs: no memory space
_keep = object()  # ShapedArray.update's "leave the sharding as it is"


class ShapedArray:
    """What is known about a value at trace time: its shape, dtype and weak_type.

    `weak_type=True` marks values that come from Python scalars: they take the dtype of the
    other operand in arithmetic (see minijax/dtypes.py).
    `vma` (varying manual axes): inside `shard_map`, the mesh axes along which the value may
    differ from device to device; printed `f32[2]{V:x}` (minijax/shard_map.py). Empty outside.
    """

    __slots__ = ("shape", "dtype", "weak_type", "sharding", "vma", "_hash")
    array_abstraction_level = 1

    def __init__(self, shape: Sequence[int], dtype, weak_type: bool = False,
                 sharding=None, vma: frozenset = frozenset()) -> None:
        self.shape = tuple([d if type(d) is int else canonicalize_dim(d) for d in shape])
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.weak_type = bool(weak_type)
        # Sharding in types (chapters/12-sharding.md): None, or a NamedSharding over an
        # AbstractMesh with one spec entry per dimension naming only Explicit mesh axes
        self.sharding = sharding
        self.vma = vma
        self._hash = None  # computed once, when first needed: avals key the dispatch caches

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def update(self, shape=None, dtype=None, weak_type=None, sharding=_keep,
               vma=None) -> "ShapedArray":
        """A copy with the given fields replaced. A new shape drops the sharding unless one
        is given (the primitive's sharding rule computes it: minijax/lax/utils.py)."""
        if sharding is _keep:
            sharding = self.sharding if shape is None else None
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type, sharding,
                           self.vma if vma is None else vma)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    # JAX: jax/_src/core.py ShapedArray.to_tangent_aval
    def to_tangent_aval(self) -> "ShapedArray":
        if dtypes.is_float(self.dtype):
            return self
        return ShapedArray(self.shape, dtypes.float0, False, self.sharding, self.vma)

    # JAX: jax/_src/core.py _get_shape_sharding_str — `8@x` for a dimension split over x
    def _dims_str(self) -> str:
        if self.sharding is None:
            return ",".join(map(str, self.shape))
        return ",".join(str(n) if p is None else
                        f"{n}@({','.join(p)})" if isinstance(p, tuple) else f"{n}@{p}"
                        for n, p in zip(self.shape, self.sharding.spec))

    def str_short(self) -> str:
        return f"{dtypes.short_dtype_name(self.dtype)}[{self._dims_str()}]{_vma_str(self.vma)}"

    def __eq__(self, other) -> bool:
        return self is other or (
            type(other) is ShapedArray and self.shape == other.shape
            and self.dtype == other.dtype and self.weak_type == other.weak_type
            and self.sharding == other.sharding and self.vma == other.vma)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            key = (self.shape, self.dtype, self.weak_type)
            if self.sharding is not None:
                key = (*key, self.sharding)
            h = self._hash = hash((*key, self.vma) if self.vma else key)
        return h

    def __repr__(self) -> str:
        return f"ShapedArray({self.str_short()}{', weak_type=True' if self.weak_type else ''})"

    # JAX: jax/_src/core.py ShapedArray.__str__ — `~float32[3]` (`~`: weakly typed), as
    # `jax.typeof(x)` and tracer reprs print it
    def __str__(self) -> str:
        name = "float0" if self.dtype == dtypes.float0 else self.dtype.name
        return f"{'~' if self.weak_type else ''}{name}[{self._dims_str()}]{_vma_str(self.vma)}"


# JAX: jax/_src/core.py _vma_ur_str — `{V:x}`, `{V:(x,y)}`; nothing when empty
def _vma_str(vma: frozenset) -> str:
    if not vma:
        return ""
    names = sorted(vma)
    return "{V:" + (names[0] if len(names) == 1 else f"({','.join(names)})") + "}"


# ---------------------------------------------------------------------------------------------
# Named axes in scope (bound by shard_map and vmap(axis_name=...))
# ---------------------------------------------------------------------------------------------

class _AxisEnv(threading.local):
    sizes: dict = {}  # axis name -> size, innermost binding last


axis_env = _AxisEnv()
# Primitives whose abstract evaluation computes the output vma itself (collectives,
# shard_map, jit); every other primitive's outputs vary along the union of its inputs' vma.
vma_primitives: set = set()


# JAX: jax/_src/core.py extend_axis_env_nd
@contextlib.contextmanager
def extend_axis_env_nd(pairs):
    """Bind the named axes `pairs` ((name, size), ...) for the duration of the block."""
    prev = axis_env.sizes
    axis_env.sizes = {**prev, **dict(pairs)}
    try:
        yield
    finally:
        axis_env.sizes = prev


# JAX: jax/_src/core.py get_axis_env().axis_size — NameError as JAX words it
def axis_size(name) -> int:
    """The size of the bound named axis `name`; NameError if no shard_map or vmap binds it."""
    try:
        return axis_env.sizes[name]
    except (KeyError, TypeError):
        raise NameError(f"unbound axis name: {name}. The following axis names (e.g. defined "
                        f"by pmap) are available to collective operations: "
                        f"{list(axis_env.sizes)}") from None


def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Same shape and dtype (weak_type is ignored, as in JAX's `typematch`)."""
    return a.shape == b.shape and a.dtype == b.dtype


# JAX: jax/_src/core.py pytype_aval_mappings — how each concrete Python type becomes an aval
pytype_aval_mappings: dict[type, Callable[[Any], ShapedArray]] = {}


def _scalar_aval(x) -> ShapedArray:
    return ShapedArray((), dtypes.python_scalar_dtype(x), type(x) is not bool)


def _numpy_aval(x) -> ShapedArray:  # a non-native byte order raises in canonicalize_dtype
    return ShapedArray(np.shape(x), dtypes.canonicalize_dtype(x.dtype), False)


for _t in (bool, int, float, complex):
    pytype_aval_mappings[_t] = _scalar_aval
pytype_aval_mappings[np.ndarray] = _numpy_aval
for _t in set(np.sctypeDict.values()):
    pytype_aval_mappings[_t] = _numpy_aval


# JAX: jax/_src/core.py typeof — differs: keeps the older name get_aval
def get_aval(x) -> ShapedArray:
    """The `ShapedArray` of a tracer, an Array, a numpy value or a Python scalar.

    Raises TypeError for values that are not arrays (strings, functions, ...).
    """
    if isinstance(x, Tracer):
        return x.aval
    fn = pytype_aval_mappings.get(type(x))
    if fn is not None:
        return fn(x)
    if hasattr(x, "__array__") and hasattr(x, "dtype"):  # e.g. a jax.Array or ml_dtypes scalar
        return _numpy_aval(np.asarray(x))
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid minijax type: "
                    "expected an array, a numpy value or a Python scalar")


# JAX: jax/_src/core.py _canonicalize_dimension
def canonicalize_dim(d):
    """`d` as a dimension: an integer (`operator.index`: a float such as 2.0 is a TypeError, as
    in JAX, never truncated), or a symbolic dimension kept as it is (a `DimExpr` of
    minijax/export/shape_poly.py, which core knows only by its `is_symbolic_dim` mark)."""
    return d if getattr(d, "is_symbolic_dim", False) else operator.index(d)


# JAX: jax/_src/core.py canonicalize_shape
def canonicalize_shape(shape, context: str = "") -> tuple:
    """`shape` (an int or a sequence of them) as a tuple of dimensions; TypeError, as JAX's,
    if a size is not an integer (a float, a string, a traced value). `context` ends the error."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        return tuple(canonicalize_dim(d) for d in shape)
    except TypeError:
        pass
    msg = f"Shapes must be 1D sequences of concrete values of integer type, got {shape}."
    msg += f" {context}." if context else ""
    if any(isinstance(d, Tracer) for d in shape):
        msg += ("\nIf using `jit`, try using `static_argnums` or applying `jit` to smaller "
                "subfunctions.")
    raise TypeError(msg)


# JAX: jax/_src/core.py max_dim, min_dim
def max_dim(d1, d2):
    """max(d1, d2) of constant or symbolic dimensions (a `max` factor where it depends on
    the variables)."""
    sym = d1 if getattr(d1, "is_symbolic_dim", False) else d2
    return sym.max(d2 if sym is d1 else d1) if getattr(sym, "is_symbolic_dim", False) else \
        max(d1, d2)


def min_dim(d1, d2):
    sym = d1 if getattr(d1, "is_symbolic_dim", False) else d2
    return sym.min(d2 if sym is d1 else d1) if getattr(sym, "is_symbolic_dim", False) else \
        min(d1, d2)


# JAX: jax/_src/core.py dimension_as_value
def dimension_as_value(d):
    """`d` as an operand of arithmetic: an int stays an int; a symbolic dimension becomes an
    int32 scalar computed from the dimension variables (minijax/export/shape_poly.py)."""
    return d if type(d) is int else d.dimension_as_value()


# JAX: jax/_src/core.py ShapeDtypeStruct — differs: no sharding or vma
class ShapeDtypeStruct:
    """An abstract argument: a shape and a dtype, no value. Pass it to `jit(f).trace(...)` or
    `.lower(...)` in place of an array to compile for that type without making one.

    Attributes: `shape`, `dtype` (as given), `weak_type`, `ndim`, `size`, and `aval`, the
    `ShapedArray` it stands for (dtype canonicalized: f64 is f32 unless x64 is on).
    """

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[int], dtype, weak_type: bool = False) -> None:
        self.shape = tuple(d if type(d) is int else canonicalize_dim(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self.shape, dtypes.canonicalize_dtype(self.dtype), self.weak_type)

    # JAX: jax/_src/core.py ShapeDtypeStruct.like — differs: no sharding
    @classmethod
    def like(cls, x) -> "ShapeDtypeStruct":
        """The struct of `x` (an array, tracer, numpy value, Python scalar or struct): its
        shape, dtype and weak_type. TypeError for a value that is not an array."""
        aval = get_aval(x)
        return cls(aval.shape, aval.dtype, weak_type=aval.weak_type)

    def __eq__(self, other) -> bool:
        return (type(other) is ShapeDtypeStruct and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


pytype_aval_mappings[ShapeDtypeStruct] = lambda s: s.aval
pytype_aval_mappings[ShapedArray] = lambda a: a


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer)


# ---------------------------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py Primitive
class Primitive:
    """A named operation. `bind` hands it, with its operands and params, to the current trace.

    Rules live in tables keyed by the primitive: `impl` (numpy evaluation) and `abstract_eval`
    (avals in -> avals out) here. `impl` takes numpy arrays; eagerly it runs through
    `minijax/dispatch.py: apply_primitive`, which converts the operands and wraps the results.
    A higher-order primitive (its params hold jaxprs) gets the concrete minijax values instead,
    and evaluates its jaxprs by binding; jvp/transpose in `interpreters/ad.py`, batching in
    `interpreters/batching.py`, lowering in `interpreters/mlir.py`.
    """

    multiple_results = False
    # How the jaxpr printer shows this primitive's params (JAX's pp rules; set per primitive):
    pp_first_params: tuple[str, ...] = ()  # printed first, in this order (jit's `name`)
    pp_hidden_params: tuple[str, ...] = ()  # never printed (the output type states them)
    pp_hide_if_empty: tuple[str, ...] = ()  # printed unless None, (), 0 or all False
    pp_param_formatters: dict[str, Callable] = {}  # name -> value-to-text (replace, not mutate)
    pp_inner_names_like_outer = False  # name an inner jaxpr's binders after the eqn's (jit)
    # the `name` param stands for JAX's debug info (custom_jvp_call's function name), not a
    # param of JAX's: a shared inner jaxpr is not named after it
    pp_name_is_debug_info = False
    _eager_last: tuple | None = None  # the eager path's memo (minijax/dispatch.py _last_call)
    impl_takes_arrays = False  # eagerly, the impl gets the Arrays (their layouts), not NumPy

    def __init__(self, name: str) -> None:
        self.name = name
        # made outside minijax (a user's primitive, as JAX's tutorials make them): eagerly,
        # only its impl runs, as in JAX (minijax/dispatch.py _apply_user_primitive)
        self.user_defined = not sys._getframe(1).f_globals.get("__name__", "").startswith(
            "minijax")

    def __repr__(self) -> str:
        return self.name

    # JAX: jax/_src/core.py Primitive.bind — differs: no canonicalization of params
    def bind(self, *args, **params):
        return trace_ctx.trace.process_primitive(self, args, params)

    def bind_with_trace(self, trace: "Trace", args, params: dict):
        return trace.process_primitive(self, args, params)

    def def_impl(self, impl: Callable) -> Callable:
        self.impl = impl
        return impl

    def def_abstract_eval(self, rule: Callable) -> Callable:
        self.abstract_eval = rule
        return rule

    # JAX: jax/_src/core.py Primitive.def_effectful_abstract_eval — differs: `abstract_eval`
    # still returns avals only; `eqn_effects` reads the effects when an equation is formed
    def def_effectful_abstract_eval(self, rule: Callable) -> Callable:
        """`rule(*avals, **params) -> (out_avals, effects)` (see minijax/effects.py)."""
        self.effectful_abstract_eval = rule
        self.abstract_eval = lambda *avals, **params: rule(*avals, **params)[0]
        return rule

    effectful_abstract_eval: Callable | None = None

    # JAX: jax/_src/lax/utils.py standard_abstract_eval (its sharding_rule argument)
    def def_sharding_rule(self, rule: Callable, *, reads_context_mesh: bool = False
                          ) -> Callable:
        """Sharding in types (chapters/12-sharding.md): after the abstract eval, when an
        operand's aval carries a sharding or an `out_sharding`/`sharding` param is given,
        the result carries `rule(*avals, **params)` (a sharding, or a list of them), read
        from `self.sharding_rule` at each call. `reads_context_mesh`: the rule is called on
        untyped operands too, as it may type its result over the mesh in context
        (minijax/lax/utils.py context_mesh). Register after `def_abstract_eval`."""
        shape_rule = self.abstract_eval
        self.sharding_rule = rule

        def abstract_eval(*avals, **params):
            out = shape_rule(*avals, **params)
            if (reads_context_mesh or any(a.sharding is not None for a in avals)
                    or params.get("out_sharding") is not None
                    or params.get("sharding") is not None):
                s = self.sharding_rule(*avals, **params)
                out = ([_with_sharding(o, x) for o, x in zip(out, s)]
                       if self.multiple_results else _with_sharding(out, s))
            return out
        self.abstract_eval = abstract_eval
        return rule

    def impl(self, *args, **params):
        raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")

    def abstract_eval(self, *avals, **params):
        raise NotImplementedError(f"Abstract evaluation for '{self.name}' not implemented")


def _with_sharding(aval: ShapedArray, s) -> ShapedArray:
    if s is not None and all(type(d) is int for d in aval.shape):
        # JAX: jax/_src/core.py _check_divisibility — a dimension its shards do not divide
        # (an `out_sharding` that does not fit) is JAX's ValueError
        s.check_compatible_aval(aval.shape)
    if s is not None and len(s.spec) != aval.ndim:  # avals keep one spec entry per dimension
        s = type(s)(s.mesh, s.spec._normalized_spec_for_aval(aval.ndim))
    return aval if s is None and aval.sharding is None else aval.update(sharding=s)


# ---------------------------------------------------------------------------------------------
# pvary: an invariant value, typed as varying (the transpose of psum)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py pvary — differs: no ordering of the axes by the mesh
def pvary(x, axis_name):
    """Mark `x` (a pytree) as varying along the named axes: no data moves (every device keeps
    its copy); its transpose is `psum`. Identity when check_vma is off. Its rules (abstract
    eval, transpose, batching, lowering) are in minijax/lax/parallel.py, as in JAX."""
    axes = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if not axes:
        return x
    for a in axes:
        axis_size(a)  # NameError for an axis no shard_map or vmap binds
    return tree_map(lambda v: pvary_p.bind(v, axes=axes), x)


pvary_p = Primitive("pvary")


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

_CHAPTER_TRACING = "chapters/02-tracing.md"


# JAX: jax/_src/errors.py ConcretizationTypeError
class ConcretizationTypeError(TypeError):
    """A traced (abstract) value was used where Python needs a concrete one (`if`, `bool`, ...)."""


# JAX: jax/_src/errors.py TracerBoolConversionError
class TracerBoolConversionError(ConcretizationTypeError):
    """`bool()` of a tracer: Python's `if`, `while`, `and`/`or` or `not` on a traced value."""


# JAX: jax/_src/errors.py TracerArrayConversionError
class TracerArrayConversionError(TypeError):
    """`np.asarray` (or another numpy conversion) was called on a tracer."""


# JAX: jax/_src/errors.py TracerIntegerConversionError
class TracerIntegerConversionError(TypeError):
    """A tracer was used where Python needs an integer (`range`, list index, `int`)."""


# JAX: jax/_src/errors.py UnexpectedTracerError
class UnexpectedTracerError(TypeError):
    """A tracer escaped the transformation that created it and was used after it ended."""


# JAX: jax/_src/errors.py NonConcreteBooleanIndexError
class NonConcreteBooleanIndexError(IndexError):
    """`x[mask]` with a traced boolean mask: the result's shape would depend on its values."""


# what to do instead, by the conversion that needed a value (JAX's messages give the same
# specific advice: `x.astype(int)` for int(x), lax.cond for `if`)
# JAX: jax/_src/errors.py ConcretizationTypeError
_CONVERSION_HINTS = {
    "bool()": "Python's `if`, `while`, `and`, `or` and `not` need a concrete bool. Use "
              "lax.cond or jnp.where instead of `if` on arrays, lax.while_loop or "
              "lax.fori_loop for loops, or mark the argument static (jit's static_argnums / "
              "static_argnames).",
    "__index__()": "A traced integer cannot index a Python list or tuple, or size a range or "
                   "a shape. Index a jnp array instead (`jnp.asarray(xs)[i]`), use "
                   "lax.dynamic_slice or lax.fori_loop, or mark the argument static (jit's "
                   "static_argnums / static_argnames).",
}


def _conversion_hint(what: str) -> str:
    if what in _CONVERSION_HINTS:
        return _CONVERSION_HINTS[what]
    if what in ("int()", "float()", "complex()"):
        t = what[:-2]
        return (f"To change the dtype of a traced value, write `x.astype({t})` or "
                f"`jnp.asarray(x, {t})`, which stay arrays; for a Python {t} that the "
                "program's structure depends on, mark the argument static (jit's "
                "static_argnums / static_argnames).")
    return ("Python control flow and conversions need a concrete value, but under this "
            "transformation the value is only known by its shape and dtype. Use lax.cond or "
            "jnp.where instead of `if` on arrays, lax.fori_loop/lax.while_loop for loops, or "
            "mark the argument static (jit's static_argnums / static_argnames).")


def _concretization_error(tracer: "Tracer", what: str, cls=ConcretizationTypeError):
    ctx = tracer._trace.describe()
    return cls(
        f"Abstract tracer value encountered where concrete value is expected: {what} was "
        f"called on a traced array with shape {tracer.aval.str_short()}{ctx}.\n"
        f"{_conversion_hint(what)} See {_CHAPTER_TRACING}.")


def _escaped_error(tracer: "Tracer") -> UnexpectedTracerError:
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: a {type(tracer).__name__} with aval "
        f"{tracer.aval.str_short()} created{tracer._trace.describe() or ' by a transformation'} "
        + ("is being used after that transformation finished (it escaped its scope, e.g. "
           "through a global variable, a list outside the function, or a side-effecting "
           "closure). Return values out of transformed functions instead." if
           tracer._trace._invalidated else "is being used where a parent of its trace is the "
           "current one (e.g. closed over by a custom_jvp or custom_vjp function or rule: pass "
           "it as an argument instead).") + f" See {_CHAPTER_TRACING}.")


# ---------------------------------------------------------------------------------------------
# Traces and tracers
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py Trace
class Trace:
    """An interpreter. `process_primitive` says what happens when a primitive is bound while
    this trace is current. A trace is invalidated when its transformation ends, so its tracers
    can be recognised as escaped."""

    def __init__(self) -> None:
        self._invalidated = False

    def process_primitive(self, primitive: Primitive, tracers: Sequence[Any], params: dict):
        raise NotImplementedError(type(self).__name__)

    # JAX: jax/_src/core.py Trace.process_custom_jvp_call, process_custom_vjp_call — differs:
    # one method for both kinds, the rules and params in `rules`, and a default
    def process_custom_derivative_call(self, primitive: Primitive, fun: Callable,
                                       tracers: Sequence[Any], rules: dict):
        """A custom_jvp/custom_vjp function applied (minijax/custom_derivatives.py): `fun` the
        flat primal function, `rules` its flat rules (`jvp`, or `fwd` and `bwd`) and params.
        This default, for traces that stage or batch: `fun` traced to a jaxpr, bound as an
        equation. EvalTrace runs `fun`; JVPTrace and LinearizeTrace run only the rules."""
        args, params = primitive.stage(fun, tracers, rules)
        return primitive.bind_with_trace(self, args, params)

    def invalidate(self) -> None:
        self._invalidated = True

    def is_valid(self) -> bool:
        return not self._invalidated

    # JAX: jax/_src/core.py maybe_find_leaked_tracers
    def check_leaks(self) -> None:
        """With `jax_check_tracer_leaks`, after the trace ended: any of its tracers still
        alive (kept by a global, a closure, an attribute) raises Exception naming it and what
        refers to it. Costs a garbage collection and a scan of the heap."""
        if not config.jax_check_tracer_leaks:
            return
        import gc  # local: only the leak check needs it
        gc.collect()
        leaked = [t for t in gc.get_objects() if isinstance(t, Tracer) and t._trace is self]
        if leaked:
            lines = [f"{t!r}\n<{type(t).__name__} {id(t)}> is referred to by " + ", ".join(
                f"<{type(r).__name__} {id(r)}>" for r in gc.get_referrers(t)
                if r is not leaked) for t in leaked]
            raise Exception(f"Leaked trace {type(self).__name__}. Leaked tracer(s):\n\n"
                            + "\n".join(lines))

    def describe(self) -> str:
        """A phrase for error messages, e.g. " while tracing the function f for jit"."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}"


def check_not_escaped(x) -> None:
    """Raise UnexpectedTracerError if `x` is a tracer whose transformation has ended."""
    if isinstance(x, Tracer) and x._trace._invalidated:
        raise _escaped_error(x)


def _no_eager_path(primitive, args, params):
    raise RuntimeError(f"cannot evaluate '{primitive}' eagerly: minijax.dispatch, which installs "
                       "the eager path, is not imported (import minijax)")


# The eager path sits above core (it makes Arrays): minijax/dispatch.py installs its
# apply_primitive here when it is imported, so core knows nothing of arrays.
eager_apply: Callable[["Primitive", Sequence[Any], dict], Any] = _no_eager_path


# JAX: jax/_src/core.py EvalTrace — differs: JAX's calls `primitive.impl`, which
# jax/_src/lax/utils.py sets to `partial(dispatch.apply_primitive, prim)`; minijax's `impl` is
# the NumPy rule, and the one eager path is installed by dispatch (`eager_apply`)
class EvalTrace(Trace):
    """The bottom trace: a primitive is evaluated right away on concrete values, by
    `minijax/dispatch.py: apply_primitive` (its NumPy rule, the result wrapped as an Array)."""

    def process_primitive(self, primitive, tracers, params):
        return eager_apply(primitive, tracers, params)

    def process_custom_derivative_call(self, primitive, fun, tracers, rules):
        with set_current_trace(self):  # JAX: EvalTrace.process_custom_jvp_call calls it as is
            return fun(*tracers)


# JAX: jax/_src/dispatch.py check_special
def check_special(name: str, values) -> None:
    """With jax_debug_nans / jax_debug_infs on: FloatingPointError if a floating-point value
    in `values` (the outputs of primitive or function `name`) is NaN / infinite."""
    for v in values:
        x = np.asarray(v)
        if x.dtype.kind not in "fc":
            continue
        if config.jax_debug_nans and np.isnan(x).any():
            raise FloatingPointError(f"invalid value (nan) encountered in {name}")
        if config.jax_debug_infs and np.isinf(x).any():
            raise FloatingPointError(f"invalid value (inf) encountered in {name}")


def to_numpy(x, aval: ShapedArray | None = None) -> np.ndarray:
    """A concrete value as a numpy array of its minijax dtype (Python scalars included)."""
    if isinstance(x, np.ndarray):
        if aval is not None and x.dtype != aval.dtype:
            return x.astype(aval.dtype)
        return x
    aval = aval or get_aval(x)
    return np.asarray(x, dtype=aval.dtype)


eval_trace = EvalTrace()


# JAX: jax/_src/core.py TracingContext — differs: holds the current trace and the name stack
# (JAX keeps that in jax/_src/source_info_util.py's own thread-local context)
class TracingContext(threading.local):
    """Which trace a `bind` goes to right now, and the named scopes around it. Per thread, like
    JAX's."""

    def __init__(self) -> None:
        self.trace: Trace = eval_trace
        self.name_stack = ""  # "outer/inner": the named_scopes the equations traced now are in


trace_ctx = TracingContext()


# JAX: jax/_src/core.py ensure_compile_time_eval
def ensure_compile_time_eval():
    """A context manager inside which a primitive whose operands are all concrete runs eagerly
    even while `jit` or `make_jaxpr` traces: its result is a concrete Array (`float(y)` works)
    and no equation is recorded. Operations on tracers are traced as usual."""
    return config.override("eager_constant_folding", True)


# JAX: jax/_src/core.py set_current_trace
@contextlib.contextmanager
def set_current_trace(trace: Trace):
    """Make `trace` current inside the block; the previous one comes back even on errors."""
    prev = trace_ctx.trace
    trace_ctx.trace = trace
    try:
        yield trace
    finally:
        trace_ctx.trace = prev


def current_trace() -> Trace:
    return trace_ctx.trace


# JAX: jax/_src/source_info_util.py extend_name_stack — differs: the stack is a string, with
# no transform entries (JAX's `jvp(...)`, `vmap(...)`, `transpose(...)`)
@contextlib.contextmanager
def extend_name_stack(name: str):
    """Inside the block, traced equations record `name` after the enclosing scopes' names
    (`named_scope`, `named_call`); usable as a decorator, like every contextmanager."""
    prev = trace_ctx.name_stack
    trace_ctx.name_stack = f"{prev}/{name}" if prev else name
    try:
        yield
    finally:
        trace_ctx.name_stack = prev


# JAX: jax/_src/source_info_util.py reset_name_stack
@contextlib.contextmanager
def reset_name_stack():
    """An empty name stack inside the block: a jaxpr traced there (a jit's body) records its
    names relative to itself; its caller's scopes are the call's own."""
    prev, trace_ctx.name_stack = trace_ctx.name_stack, ""
    try:
        yield
    finally:
        trace_ctx.name_stack = prev


# JAX: jax/_src/core.py check_bool_conversion
def check_bool_conversion(aval: ShapedArray) -> None:
    if aval.size == 0:
        raise ValueError("The truth value of an empty array is ambiguous. Use "
                         "`array.size > 0` to check that an array is not empty.")
    if aval.size > 1:
        raise ValueError("The truth value of an array with more than one element is "
                         "ambiguous. Use a.any() or a.all()")


# JAX: jax/_src/core.py check_scalar_conversion
def check_scalar_conversion(aval: ShapedArray) -> None:
    if aval.ndim > 0:
        raise TypeError("Only scalar arrays can be converted to Python scalars; "
                        f"got arr.ndim={aval.ndim}")


# JAX: jax/_src/core.py check_integer_conversion
def check_integer_conversion(aval: ShapedArray) -> None:
    if not (aval.shape == () and dtypes.issubdtype(aval.dtype, np.integer)):
        raise TypeError("Only integer scalar arrays can be converted to a scalar index.")


# JAX: jax/_src/core.py Tracer
class Tracer:
    """A stand-in for an array while a transformation runs. Subclasses add their payload
    (primal and tangent, batched value and axis, a jaxpr variable...)."""

    __slots__ = ("_trace",)
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def to_concrete_value(self):
        """The concrete value if this trace knows it (e.g. jvp of an eager value), else None."""
        return None

    def _concrete(self, what: str, cls=ConcretizationTypeError):
        check_not_escaped(self)
        val = self.to_concrete_value()
        if val is None:
            raise _concretization_error(self, what, cls)
        return val

    def item(self, *args):  # JAX: ConcretizationTypeError naming the method
        return np.asarray(self._concrete("The item() method")).item(*args)

    def tolist(self):
        return np.asarray(self._concrete("The tolist() method")).tolist()

    def __bool__(self):
        check_bool_conversion(self.aval)
        return bool(self._concrete("bool()", TracerBoolConversionError))

    def __int__(self):
        check_scalar_conversion(self.aval)
        return int(self._concrete("int()"))  # as JAX: ConcretizationTypeError, not __index__'s

    def __float__(self):
        check_scalar_conversion(self.aval)
        return float(self._concrete("float()"))

    def __complex__(self):
        check_scalar_conversion(self.aval)
        return complex(self._concrete("complex()"))

    def __index__(self):
        check_integer_conversion(self.aval)
        return int(self._concrete("__index__()", TracerIntegerConversionError))

    def __array__(self, dtype=None, copy=None):
        # Always an error, as in JAX, even where the value is known (e.g. under grad): numpy
        # code would silently drop the tracer and with it the derivative.
        raise TracerArrayConversionError(
            f"The numpy.ndarray conversion method __array__() was called on a traced array "
            f"with shape {self.aval.str_short()}{self._trace.describe()}. numpy cannot see "
            "through tracers; use minijax.numpy instead of numpy inside transformed "
            f"functions. See {_CHAPTER_TRACING}.")

    __hash__ = None  # tracers are unhashable, as in JAX

    # JAX: jax/_src/core.py Tracer._short_repr — subclasses print their payload, e.g.
    # `JitTracer(float32[3])`, `JVPTracer(primal=1.0, tangent=1.0)`
    def _short_repr(self) -> str:
        return f"{type(self).__name__}<{self.aval}>"

    def __repr__(self) -> str:
        return self._short_repr()


# ---------------------------------------------------------------------------------------------
# The jaxpr IR
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/core.py Var — differs: names are given at print time only
class Var:
    """A variable of a jaxpr: an aval and an identity (names like `a`, `b` are assigned when
    printing, in order of first appearance)."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


# JAX: jax/_src/core.py DropVar
class DropVar(Var):
    """An output nobody reads; printed as `_`."""

    __slots__ = ()


# JAX: jax/_src/core.py Literal
class Literal:
    """A scalar constant written inline in a jaxpr, e.g. `2.0:f32[]`."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray) -> None:
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({self.val})"


Atom = Var | Literal


# JAX: jax/_src/core.py join_effects
def join_effects(*effect_sets) -> Effects:
    return frozenset().union(*effect_sets) if effect_sets else no_effects


# JAX: jax/_src/core.py resolve_input_effects
def resolve_input_effects(effs, invars: Sequence[Atom]) -> Effects:
    """An abstract eval names an input effect's operand by position; the equation by its Var
    (an effect on a Literal operand is dropped)."""
    out = set()
    for e in effs:
        if isinstance(e, JaxprInputEffect) and isinstance(e.input, int):
            if isinstance(invars[e.input], Literal):
                continue
            e = e.replace(invars[e.input])
        out.add(e)
    return frozenset(out)


def eqn_effects(primitive: Primitive, invars: Sequence[Atom], params: dict) -> Effects:
    """The effects of one application of `primitive`: its effectful abstract eval's, or, for
    a higher-order primitive, those of the jaxprs in its params (effects on the inner jaxprs'
    own inputs stay inside: see minijax/effects.py JaxprInputEffect)."""
    rule = primitive.effectful_abstract_eval
    if rule is not None:
        return resolve_input_effects(rule(*[v.aval for v in invars], **params)[1], invars)
    inner = [j.effects for p in params.values()  # (a param of another type holds no jaxpr)
             if isinstance(p, _HOLDS_JAXPRS) for j in jaxprs_in_param(p)]
    effs = join_effects(*inner)
    return frozenset(e for e in effs if not isinstance(e, JaxprInputEffect)) if effs else effs


# JAX: jax/_src/core.py JaxprEqnContext — differs: only the compute type; None stands for
# the default context
class JaxprEqnContext:
    """Where an equation was traced: `compute_type` is the `compute_on` placement then in
    force ('device_host', 'device', ...). One object per compute type."""

    __slots__ = ("compute_type",)

    def __init__(self, compute_type: str) -> None:
        self.compute_type = compute_type

    @property
    def manager(self):
        """A context manager putting this context back in force (to rebind an equation)."""
        return config.trace_state("compute_on_context_manager", self.compute_type)

    def __repr__(self) -> str:
        return f"JaxprEqnContext(compute_type={self.compute_type})"


_eqn_contexts: dict[str, JaxprEqnContext] = {}


# JAX: jax/_src/core.py current_jaxpr_eqn_context
def current_jaxpr_eqn_context() -> JaxprEqnContext | None:
    c_type = config.compute_on_context_manager
    if c_type is None:
        return None
    return _eqn_contexts.setdefault(c_type, JaxprEqnContext(c_type))


def eqn_context_of(eqn: "JaxprEqn"):
    """The context manager that rebinding `eqn` runs under (nothing for the default)."""
    return _NO_SOURCE if eqn.ctx is None else eqn.ctx.manager


# JAX: jax/_src/core.py JaxprEqn — differs: no source info objects; effects are derived from
# the primitive and params when not given; `ctx` is None in the default context
class JaxprEqn:
    """One line of a jaxpr: `outvars = primitive[params] invars`, with its `effects` and the
    context it was traced in (`ctx`, see JaxprEqnContext)."""

    __slots__ = ("invars", "outvars", "primitive", "params", "effects", "source_info", "ctx",
                 "name_stack")

    def __init__(self, invars: list[Atom], outvars: list[Var], primitive: Primitive,
                 params: dict[str, Any], effects: Effects | None = None,
                 source_info: str | None = None, ctx: JaxprEqnContext | None = None,
                 name_stack: str = "") -> None:
        self.invars = invars
        self.outvars = outvars
        self.primitive = primitive
        self.params = params
        self.effects = eqn_effects(primitive, invars, params) if effects is None else effects
        self.source_info = source_info  # `file:line:column (function)`, while recorded
        self.ctx = ctx
        # JAX: jax/_src/source_info_util.py SourceInfo.name_stack — differs: kept beside
        # source_info, as a string: the named scopes it was traced in ("outer/inner"), not
        # printed, lowered as the op's location (mlir.py: lower_jaxpr)
        self.name_stack = name_stack

    def replace(self, **kw) -> "JaxprEqn":
        d = dict(invars=self.invars, outvars=self.outvars, primitive=self.primitive,
                 params=self.params, source_info=self.source_info, ctx=self.ctx,
                 name_stack=self.name_stack)
        d.update(kw)
        return JaxprEqn(**d)

    def __repr__(self) -> str:
        return pp_eqn(self, NameContext(), 0)


# JAX: jax/_src/core.py Jaxpr — differs: no debug info; effects default to the union of the
# equations' effects
class Jaxpr:
    """A typed, first-order program in A-normal form: `{ lambda constvars ; invars. let eqns in
    outvars }`. Consts are bound separately (see ClosedJaxpr)."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "effects")

    def __init__(self, constvars: list[Var], invars: list[Var], outvars: list[Atom],
                 eqns: list[JaxprEqn], effects: Effects | None = None) -> None:
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.effects = (join_effects(*[e.effects for e in self.eqns if e.effects])
                        if effects is None else effects)

    def pretty_print(self, *, print_effects: bool = False) -> str:
        """`str(jaxpr)`; with `print_effects`, each jaxpr ends `in (outs) : { IO, ... }`."""
        return pp_toplevel_jaxpr(self, NameContext(print_effects=print_effects))

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self) -> str:
        return pp_toplevel_jaxpr(self)

    __repr__ = __str__


# JAX: jax/_src/core.py ClosedJaxpr
class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts", "__weakref__")  # weakly held by the caches of minijax/pjit.py

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any]) -> None:
        assert len(jaxpr.constvars) == len(consts)
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)
    effects = property(lambda self: self.jaxpr.effects)
    pretty_print = property(lambda self: self.jaxpr.pretty_print)
    literals = property(lambda self: self.consts)  # JAX's other name for the consts

    def __str__(self) -> str:
        return str(self.jaxpr)

    __repr__ = __str__


# JAX: jax/_src/core.py eval_jaxpr
def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args) -> list:
    """Run a jaxpr by binding each equation's primitive in turn, under the current trace.

    Because it only calls `bind`, evaluating a jaxpr under jvp/vmap/jit tracing transforms it.
    Raises TypeError if the number of consts or args does not match the jaxpr.
    """
    if len(consts) != len(jaxpr.constvars) or len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: jaxpr takes {len(jaxpr.constvars)} consts and "
                        f"{len(jaxpr.invars)} args, got {len(consts)} and {len(args)}")
    env: dict[Var, Any] = {}

    def read(v: Atom):
        return v.val if isinstance(v, Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        with source_info_of(eqn), eqn_context_of(eqn):  # (compute_on's, if it had one)
            outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, x in safe_zip(eqn.outvars, outs):
            if not isinstance(v, DropVar):
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


# JAX: jax/_src/source_info_util.py user_frame — differs: equations record where the user's
# code bound them only while `source_info_capture[0]` is set (print_saved_residuals), so that
# tracing costs nothing more otherwise. [1]: (the source of the equation eval_jaxpr is
# binding again, eval_jaxpr's frame)
source_info_capture: list = [0, None]
_MINIJAX_DIR = os.path.dirname(os.path.abspath(__file__))
_NO_SOURCE = contextlib.nullcontext()


def source_info_of(eqn: JaxprEqn):
    """The equations `eqn`'s bind makes get its name stack (after the current one) and, while
    recording, its source (unless user code runs below); for most equations, nothing."""
    capture = source_info_capture[0] and eqn.source_info is not None
    if not capture and not eqn.name_stack:
        return _NO_SOURCE
    # JAX: jax/_src/core.py eval_jaxpr (its user_context of each equation's source_info)
    return _eqn_source(eqn, sys._getframe(1) if capture else None)  # eval_jaxpr's frame


@contextlib.contextmanager
def _eqn_source(eqn: JaxprEqn, frame):
    outer, names = source_info_capture[1], trace_ctx.name_stack
    if frame is not None:
        source_info_capture[1] = (eqn.source_info, frame)
    if eqn.name_stack:
        trace_ctx.name_stack = f"{names}/{eqn.name_stack}" if names else eqn.name_stack
    try:
        yield
    finally:
        source_info_capture[1], trace_ctx.name_stack = outer, names


def user_source_info() -> str | None:
    """While recording (else None): `file:line:column (function)` of the innermost frame
    outside minijax, as JAX prints it (`print_saved_residuals`); if there is none below the
    `eval_jaxpr` binding an equation again, that equation's source."""
    if not source_info_capture[0]:
        return None
    override = source_info_capture[1]
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_MINIJAX_DIR):
        if override is not None and f is override[1]:
            return override[0]
        f = f.f_back
    if f is None:
        return None
    line, _, col, _ = next(itertools.islice(f.f_code.co_positions(), f.f_lasti // 2, None))
    return f"{f.f_code.co_filename}:{line}:{col} ({f.f_code.co_qualname})"


def jaxpr_as_fun(closed: ClosedJaxpr) -> Callable:
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


# JAX: jax/_src/core.py JaxprTypeError
class JaxprTypeError(TypeError):
    """A jaxpr is ill-typed: a variable used before definition, defined twice, or an equation
    whose output types disagree with its primitive's abstract evaluation."""


# JAX: jax/_src/core.py custom_typechecks — rule(*in_avals, **params) -> out avals
custom_typechecks: dict = {}


# JAX: jax/_src/core.py check_jaxpr
def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Type-check a jaxpr (recursively for jaxprs in params). Raises JaxprTypeError."""
    defined: set[Var] = set()

    def define(v: Var, where: str):
        if isinstance(v, DropVar):
            return
        if v in defined:
            raise JaxprTypeError(f"Variable {v} defined twice ({where})")
        defined.add(v)

    def read(v: Atom, where: str) -> ShapedArray:
        if isinstance(v, Literal):
            return v.aval
        if v not in defined:
            raise JaxprTypeError(f"Variable {v} used before it is defined ({where})")
        return v.aval

    for v in jaxpr.constvars:
        define(v, "constvar")
    for v in jaxpr.invars:
        define(v, "invar")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i}: {eqn.primitive.name}"
        in_avals = [read(v, where) for v in eqn.invars]
        rule = custom_typechecks.get(eqn.primitive)
        if rule is None:
            for p in eqn.params.values():
                for sub in jaxprs_in_param(p):
                    check_jaxpr(sub)
            out = eqn.primitive.abstract_eval(*in_avals, **eqn.params)
        else:  # checks its own inner jaxprs (e.g. shard_map binds axis names for its body)
            out = rule(*in_avals, **eqn.params)
        out = out if eqn.primitive.multiple_results else [out]
        if len(out) != len(eqn.outvars):
            raise JaxprTypeError(f"{where}: {len(eqn.outvars)} outvars, rule gives {len(out)}")
        for v, a in zip(eqn.outvars, out):
            if not typematch(v.aval, a):
                raise JaxprTypeError(f"{where}: outvar has type {v.aval.str_short()} but "
                                     f"the abstract evaluation rule gives {a.str_short()}")
            define(v, where)
    for v in jaxpr.outvars:
        read(v, "outvars")


def jaxprs_in_param(p) -> list[Jaxpr]:
    if isinstance(p, ClosedJaxpr):
        return [p.jaxpr]
    if isinstance(p, Jaxpr):
        return [p]
    if isinstance(p, tuple):  # (only tuples and jaxprs can hold a jaxpr: skip ints, dtypes...)
        return [j for x in p if isinstance(x, _HOLDS_JAXPRS) for j in jaxprs_in_param(x)]
    return []


_HOLDS_JAXPRS = (tuple, Jaxpr, ClosedJaxpr)


# ---------------------------------------------------------------------------------------------
# Pretty-printing, in JAX's grammar and layout
# ---------------------------------------------------------------------------------------------
# A jaxpr is first built as a document of text, breaks, groups and nests, then laid out in 80
# columns: a group goes on one line if all of it fits in what is left of the line, else each
# of its breaks becomes a newline (Lindig's "strictly pretty" printing, which is what JAX's
# printer does). Building the same document as JAX's `pp_jaxpr` gives the same text.

# JAX: jax/_src/pretty_printer.py text — a document is a tuple: (kind, ...)
def _text(s: str) -> tuple:
    return ("text", s)


def _concat(docs) -> tuple:
    return ("concat", tuple(docs))


def _brk(s: str = " ") -> tuple:  # a space (or `s`) on one line, else a newline
    return ("brk", s)


def _group(doc) -> tuple:
    return ("group", doc)


def _nest(n: int, doc) -> tuple:  # newlines inside `doc` indent by `n` more
    return ("nest", n, doc)


def _join(sep, docs) -> tuple:
    out = []
    for i, d in enumerate(docs):
        out += [sep, d] if i else [d]
    return _concat(out)


def _fits(doc, width: int) -> bool:
    stack = [doc]
    while stack and width >= 0:
        d = stack.pop()
        if d[0] in ("text", "brk"):
            width -= len(d[1])
        elif d[0] == "concat":
            stack.extend(reversed(d[1]))
        else:
            stack.append(d[-1])
    return width >= 0


# JAX: jax/_src/pretty_printer.py Doc.format
def _format(doc, width: int = 80) -> str:
    out, col = [], 0
    agenda = [(0, False, doc)]  # (indent, flat, doc)
    while agenda:
        indent, flat, d = agenda.pop()
        kind = d[0]
        if kind == "text" or (kind == "brk" and flat):
            out.append(d[1])
            col += len(d[1])
        elif kind == "brk":
            out.append("\n" + " " * indent)
            col = indent
        elif kind == "concat":
            agenda.extend((indent, flat, c) for c in reversed(d[1]))
        elif kind == "group":
            agenda.append((indent, flat or _fits(d[1], width - col), d[1]))
        else:
            agenda.append((indent + d[1], flat, d[2]))
    return "".join(out)


def _encode_name(n: int) -> str:
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s = chr(97 + i) + s
    return s


# JAX: jax/_src/core.py JaxprPpContext
class NameContext:
    """Assigns a, b, ..., z, ba, bb, ... to variables in order of first appearance (skipping
    the names of jaxprs printed as `let name = ...`), and `_` to dropped ones."""

    def __init__(self, names: dict | None = None, print_effects: bool = False) -> None:
        self.names: dict[Var, str] = dict(names or {})
        self.counter = itertools.count()
        self.shared_jaxprs: dict[Jaxpr, str] = {}  # printed first, as `let name = ...`
        self.print_effects = print_effects  # JAX: JaxprPpSettings.print_effects

    def __call__(self, v: Atom) -> str:
        if isinstance(v, Literal):
            return pp_literal(v)
        if isinstance(v, DropVar):
            return "_"
        if v not in self.names:
            taken = self.shared_jaxprs.values()
            name = _encode_name(next(self.counter))
            while name in taken:
                name = _encode_name(next(self.counter))
            self.names[v] = name
        return self.names[v]

    # JAX: jax/_src/core.py JaxprPpContext.suggest_same_var_names
    def suggest_same_names(self, for_vars: Sequence[Atom], like_vars: Sequence[Atom]) -> None:
        """Name each of `for_vars` (an inner jaxpr's binders) like the outer value it binds."""
        if len(for_vars) != len(like_vars):
            return
        used: set[Var] = set()
        for for_v, like_v in zip(for_vars, like_vars):
            if (isinstance(like_v, Var) and like_v not in used and isinstance(for_v, Var)
                    and for_v not in self.names):
                used.add(like_v)
                self.names[for_v] = self(like_v)


def pp_literal(lit: Literal) -> str:
    val = lit.val
    if not isinstance(val, (bool, int, float, complex)):
        val = np.asarray(val).item()  # a numpy scalar or 0-d array, or a minijax Array
    return f"{val}:{lit.aval.str_short()}"


def pp_param(v, names: NameContext, indent: int = 0, lead: int = 0) -> str:
    """A param's value as text, laid out from column `indent + lead` (after its `name=`)."""
    return _layout(_pp_param_doc(v, names), indent, lead)


def _layout(doc, indent: int, lead: int = 0) -> str:
    # `doc` laid out as if it started at column `indent + lead`, its newlines indented `indent`
    start = indent + lead
    return _format(_nest(indent, _concat([_text(" " * start), doc])))[start:]


def _pp_param_doc(v, names: NameContext) -> tuple:
    if isinstance(v, (ClosedJaxpr, Jaxpr)):
        return _pp_jaxpr_doc(v.jaxpr if isinstance(v, ClosedJaxpr) else v, names)
    if isinstance(v, tuple) and v and all(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
        # cond's `branches`: JAX's pp_jaxprs
        return _group(_concat([
            _nest(2, _concat([_text("("), _brk(""),
                              _join(_brk(), [_pp_param_doc(x, names) for x in v])])),
            _brk(""), _text(")")]))
    if isinstance(v, np.dtype):
        return _text(v.name)
    if isinstance(v, type) and issubclass(v, np.generic):
        return _text(np.dtype(v).name)
    if callable(v) and hasattr(v, "__name__"):
        return _text(v.__name__)
    return _text(mask_addresses(str(v)))


# JAX: jax/_src/core.py pp_kv_pair — object addresses are masked, so the text is reproducible
def mask_addresses(s: str) -> str:
    return re.sub(r" at 0x([0-9a-fA-F]+)", lambda m: " at 0x" + "X" * len(m.group(1)), s)


def _pp_vars(vs: Sequence[Atom], names: NameContext, sep: str = "",
             shapes: bool = False) -> tuple:
    # JAX: jax/_src/core.py pp_vars — each space may break, independently of the others
    items = [_text(f"{names(v)}:{v.aval.str_short()}" if shapes else names(v)) for v in vs]
    return _nest(2, _group(_join(_concat([_text(sep), _group(_brk())]), items)))


# JAX: jax/_src/core.py pp_eqn_rules — a primitive's own text for its equations (the state
# primitives print `x <- ref[i]`); `rule(eqn, names) -> str`
pp_eqn_rules: dict[Primitive, Callable[["JaxprEqn", "NameContext"], str]] = {}


# JAX: jax/_src/core.py pp_eqn
def _pp_eqn_doc(eqn: JaxprEqn, names: NameContext) -> tuple:
    prim = eqn.primitive
    if prim in pp_eqn_rules:
        return _text(pp_eqn_rules[prim](eqn, names))
    params = {k: v for k, v in eqn.params.items() if k not in hidden_params(eqn)}
    for v in params.values():
        if (prim.pp_inner_names_like_outer and isinstance(v, (Jaxpr, ClosedJaxpr))
                and (v.jaxpr if isinstance(v, ClosedJaxpr) else v) not in names.shared_jaxprs):
            inner = v.jaxpr if isinstance(v, ClosedJaxpr) else v
            names.suggest_same_names(inner.invars, eqn.invars)
            names.suggest_same_names(inner.outvars, eqn.outvars)
    lhs = _pp_vars(eqn.outvars, names, shapes=True)
    first = [k for k in prim.pp_first_params if k in params]
    keys = first + sorted(k for k in params if k not in first)
    fmt = prim.pp_param_formatters
    items = [_concat([_text(f"{k}="), _text(fmt[k](params[k])) if k in fmt
                      else _pp_param_doc(params[k], names)]) for k in keys]
    kv = _group(_concat([_nest(2, _concat([_text("["), _brk(""), _join(_brk(), items)])),
                         _brk(""), _text("]")])) if items else _concat([])
    rhs = [_text(prim.name), kv, _concat([_text(" "), _pp_vars(eqn.invars, names)])]
    return _concat([lhs, _text(" = "), *rhs] if eqn.outvars else rhs)


def pp_eqn(eqn: JaxprEqn, names: NameContext, indent: int = 0) -> str:
    return _layout(_pp_eqn_doc(eqn, names), indent)


def hidden_params(eqn: JaxprEqn) -> set[str]:
    # JAX omits params the output type already states (broadcast_in_dim's shape) and empty ones.
    hidden = set(eqn.primitive.pp_hidden_params)
    for k, v in eqn.params.items():
        # hidden when empty, zero (custom_jvp_call's num_consts), or all False (like jit's
        # donated_invars without donation)
        if k in eqn.primitive.pp_hide_if_empty and (
                v is None or v == () or (type(v) is int and v == 0)
                or (isinstance(v, tuple) and all(x is False for x in v))):
            hidden.add(k)
    return hidden


# JAX: jax/_src/core.py pp_jaxpr_skeleton
def _pp_jaxpr_doc(jaxpr: Jaxpr, names: NameContext, shared_ok: bool = True) -> tuple:
    if shared_ok and jaxpr in names.shared_jaxprs:
        return _text(names.shared_jaxprs[jaxpr])
    constvars = _pp_vars(jaxpr.constvars, names, shapes=True)
    invars = _pp_vars(jaxpr.invars, names, shapes=True)
    eqns = _join(_brk("; "), [_pp_eqn_doc(e, names) for e in jaxpr.eqns])
    outvars = _concat([_text("("), _pp_vars(jaxpr.outvars, names, sep=","),
                       _text(")" if len(jaxpr.outvars) != 1 else ",)")])
    # JAX prints the effects in set order; minijax sorts their text, to be reproducible
    effs = ([_text(" : { " + ", ".join(sorted(pp_effect(e, names) for e in jaxpr.effects))
                   + " }")] if names.print_effects else [])
    return _group(_concat([_nest(2, _concat([
        _text("{ lambda "), constvars, _text("; "), invars, _text(". let"),
        _nest(2, _concat([_brk(), eqns])), _brk(), _text("in "), outvars, *effs])),
        _text(" }")]))


# JAX: jax/_src/core.py pp_effect — an effect may name its input (`Read<a>`)
def pp_effect(eff, names: NameContext) -> str:
    return eff._pretty_print(names) if hasattr(eff, "_pretty_print") else str(eff)


def _dropvars(jaxpr: Jaxpr) -> dict[Var, str]:
    # the top-level jaxpr's unused results print as `_`, as JAX's do
    names, used = {}, {v for v in jaxpr.outvars if isinstance(v, Var)}
    for eqn in reversed(jaxpr.eqns):
        names.update((v, "_") for v in eqn.outvars if v not in used)
        used.update(v for v in eqn.invars if isinstance(v, Var))
    return names


def _shared_jaxprs(top: Jaxpr) -> list[tuple[str, Jaxpr]]:
    # JAX: jax/_src/core.py pp_toplevel_jaxpr — an inner jaxpr used more than once, or with
    # more than 10 equations, is printed first, as `let name = { ... } in`
    counts: dict[Jaxpr, int] = {}
    default_names: dict[Jaxpr, str] = {}
    queue = [top]
    while queue:
        jaxpr = queue.pop(0)
        counts[jaxpr] = counts.get(jaxpr, 0) + 1 + (jaxpr is not top and len(jaxpr.eqns) > 10)
        for eqn in jaxpr.eqns:
            name = None if eqn.primitive.pp_name_is_debug_info else eqn.params.get("name")
            for p in eqn.params.values():
                for sub in jaxprs_in_param(p):
                    queue.append(sub)
                    if isinstance(name, str):
                        default_names.setdefault(sub, name.strip("<>"))
    taken: dict[str, int] = {}
    shared = []
    for jaxpr, c in counts.items():
        if c == 1:
            continue
        name = default_names.get(jaxpr, "jaxpr")
        if taken.get(name, 0):
            taken[name] += 1
            name += str(taken[name] - 1)
        taken[name] = taken.get(name, 0) + 1
        shared.append((name, jaxpr))
    return shared


def pp_jaxpr(jaxpr: Jaxpr, names: NameContext, indent: int = 0, lead: int = 0) -> str:
    """Render `jaxpr` as `jax.make_jaxpr(f)(x)` prints it, starting `indent + lead` columns in
    (e.g. after a param's `name=`)."""
    return _layout(_pp_jaxpr_doc(jaxpr, names), indent, lead)


# JAX: jax/_src/core.py pp_toplevel_jaxpr
def pp_toplevel_jaxpr(jaxpr: Jaxpr, names: NameContext | None = None) -> str:
    """The text of `str(jaxpr)`: shared inner jaxprs first, then the jaxpr itself. `names`
    (fresh if None) is left holding the name of every variable (minijax/viz.py draws them)."""
    names = NameContext() if names is None else names
    names.names.update(_dropvars(jaxpr))
    shared = _shared_jaxprs(jaxpr)
    names.shared_jaxprs.update((j, name) for name, j in shared)
    docs = []
    for name, j in shared:
        docs += [_text(f"let {name} = "), _pp_jaxpr_doc(j, names, shared_ok=False),
                 _text(" in"), _brk()]
    docs.append(_pp_jaxpr_doc(jaxpr, names))
    return _format(_concat(docs))

