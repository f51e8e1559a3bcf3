"""`jit`: trace once per input signature, lower to StableHLO, compile with XLA, run.

`jit_p` is a primitive whose param is a jaxpr. Binding it under EvalTrace compiles and runs
that jaxpr; under the other traces its rules (jvp, partial eval, transpose, batching, lowering)
transform the *inner jaxpr* and bind `jit_p` again, so every transformation composes with jit
in either order. Mirrors jax/_src/pjit.py. Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Sequence

from minijax import compiler, core
from minijax.config import config
from minijax.ad_util import Zero
from minijax.array import Array
from minijax.core import ClosedJaxpr, ShapedArray, Tracer
from minijax.interpreters import ad, batching, mlir
from minijax.interpreters import partial_eval as pe
from minijax.tree_util import tree_flatten, tree_unflatten
from minijax.util import safe_zip, split_list

# Counters tests read to check caching: how many times jit traced and compiled.
cache_stats = {"traces": 0, "compiles": 0}


_hoisted: dict[int, tuple[ClosedJaxpr, ClosedJaxpr]] = {}


def _hoist_consts(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Turn a ClosedJaxpr's consts into leading arguments: (const-free jaxpr, consts).

    Memoized on the jaxpr's identity, so the same transformed jaxpr always yields the same
    const-free jaxpr object, and the executable cache (keyed by identity) hits."""
    if not closed.consts:
        return closed, []
    hit = _hoisted.get(id(closed))
    if hit is None or hit[0] is not closed:
        hit = _hoisted[id(closed)] = (
            closed, ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), []))
    return hit[1], list(closed.consts)


def bind_jit(closed: ClosedJaxpr, args: Sequence[Any], name: str, trace=None) -> list:
    """Bind jit_p on `args` (nothing donated), passing the jaxpr's consts as leading args."""
    closed, consts = _hoist_consts(closed)
    params = dict(jaxpr=closed, name=name, donated_invars=(False,) * (len(consts) + len(args)))
    trace = trace or core.current_trace()
    return jit_p.bind_with_trace(trace, [*consts, *args], params)


# ---------------------------------------------------------------------------------------------
# jit_p and its rules
# ---------------------------------------------------------------------------------------------

_executables: dict[tuple, tuple[ClosedJaxpr, Any, tuple[bool, ...]]] = {}


def _compiled(jaxpr: ClosedJaxpr, donated_invars: tuple[bool, ...] = (), name: str = "main"):
    """(executable, per input: donated and actually reused for an output)."""
    key = (id(jaxpr), donated_invars)
    hit = _executables.get(key)
    if hit is not None and hit[0] is jaxpr:
        return hit[1], hit[2]
    module = mlir.lower_jaxpr_to_module(jaxpr, name, donated_invars)
    exe = compiler.compile(module)
    cache_stats["compiles"] += 1
    usable = mlir.usable_donations(jaxpr, donated_invars)
    _warn_unusable_donations(jaxpr, donated_invars, usable)
    _executables[key] = (jaxpr, exe, usable)
    return exe, usable


def _warn_unusable_donations(jaxpr: ClosedJaxpr, donated, usable) -> None:
    unusable = [a for a, d, u in zip(jaxpr.in_avals, donated, usable) if d and not u]
    if unusable:
        warnings.warn(f"Some donated buffers were not usable: "
                      f"{', '.join(a.str_short() for a in unusable)}. Donation works when an "
                      "output has the same shape and dtype as the donated input.", stacklevel=2)


def _delete_donated(args, usable_donations) -> None:
    # A reused buffer now holds an output: the input Array must not be read again. As in JAX,
    # an input whose donation no output could use stays alive.
    for x, d in zip(args, usable_donations):
        if d and type(x) is Array:
            x.delete()


def _committed(args) -> bool:
    # JAX: a computation runs on the devices of its committed arguments, and its outputs are
    # committed there; with only uncommitted arguments they stay uncommitted.
    return any(type(x) is Array and x._committed for x in args)


def to_device(x, aval: ShapedArray):
    """A device buffer for a concrete argument of type `aval`."""
    if type(x) is Array and x.aval.dtype == aval.dtype:
        return x.device_buffer()
    from minijax.api import ShapeDtypeStruct  # api imports this module
    if isinstance(x, (ShapedArray, ShapeDtypeStruct)):
        raise TypeError(f"{x!r} is abstract (a type, no value): it can be passed to "
                        "jit(f).trace(...) or .lower(...), not to a call")
    return compiler.device_put(core.to_numpy(x, aval))


def _jit_impl(*args, jaxpr: ClosedJaxpr, name: str, donated_invars: tuple[bool, ...]):
    exe, usable = _compiled(jaxpr, donated_invars, name)
    bufs = [to_device(x, a) for x, a in safe_zip(args, jaxpr.in_avals)]
    outs = compiler.execute(exe, bufs)
    _delete_donated(args, usable)
    committed = _committed(args)
    return [Array(a, buf=b, committed=committed) for a, b in safe_zip(jaxpr.out_avals, outs)]


def _jit_abstract_eval(*avals, jaxpr: ClosedJaxpr, name: str, donated_invars=()):
    for i, (a, b) in enumerate(zip(avals, jaxpr.in_avals)):
        if not core.typematch(a, b):
            raise TypeError(f"jit {name}: argument {i} has type {a.str_short()}, but the "
                            f"jaxpr expects {b.str_short()}")
    return jaxpr.out_avals


def _per_jaxpr_cache(fn):
    """Memoize a jaxpr-to-jaxpr transformation on (the jaxpr's identity, other args)."""
    cache: dict = {}

    @functools.wraps(fn)
    def cached(jaxpr: ClosedJaxpr, *args):
        key = (id(jaxpr), *args)
        hit = cache.get(key)
        if hit is None or hit[0] is not jaxpr:
            hit = cache[key] = (jaxpr, fn(jaxpr, *args))
        return hit[1]
    return cached


@_per_jaxpr_cache
def _jvp_of(jaxpr: ClosedJaxpr, nonzeros: tuple[bool, ...]):
    return ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)


def _jit_jvp(primals, tangents, *, jaxpr, name, donated_invars):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jvp_closed, out_nz = _jvp_of(jaxpr, nonzeros)
    nz_tangents = [t for t in tangents if type(t) is not Zero]
    outs = bind_jit(jvp_closed, [*primals, *nz_tangents], name)
    primals_out, tangents_nz = split_list(outs, [len(jaxpr.out_avals)])
    it = iter(tangents_nz)
    tangents_out = [next(it) if nz else Zero(a.to_tangent_aval())
                    for nz, a in safe_zip(out_nz, jaxpr.out_avals)]
    return primals_out, tangents_out


@_per_jaxpr_cache
def _partial_eval_of(jaxpr: ClosedJaxpr, unknowns: tuple[bool, ...]):
    return pe.partial_eval_jaxpr_nounits(jaxpr, unknowns)


def _jit_partial_eval(trace: pe.JaxprTrace, *args, jaxpr, name, donated_invars):
    unknowns = tuple(trace.is_own(x) for x in args)
    jaxpr_known, jaxpr_unknown, out_unknowns, num_res = _partial_eval_of(jaxpr, unknowns)
    known_args = [x for x, u in zip(args, unknowns) if not u]
    known_outs = bind_jit(jaxpr_known, known_args, name, trace=trace.parent_trace)
    known_vals, residuals = split_list(known_outs, [len(known_outs) - num_res])
    unknown_args = [x for x, u in zip(args, unknowns) if u]
    if any(out_unknowns):
        unknown_ins = [*residuals, *unknown_args]
        unknown_outs = trace.default_process_primitive(
            jit_p, unknown_ins,
            dict(jaxpr=jaxpr_unknown, name=name, donated_invars=(False,) * len(unknown_ins)))
    else:
        unknown_outs = []
    kit, uit = iter(known_vals), iter(unknown_outs)
    return [next(uit) if u else next(kit) for u in out_unknowns]


@_per_jaxpr_cache
def _transpose_of(jaxpr: ClosedJaxpr, undefined: tuple[bool, ...]):
    in_avals = jaxpr.in_avals
    known_avals = [a for a, u in zip(in_avals, undefined) if not u]
    ct_avals = [a.to_tangent_aval() for a in jaxpr.out_avals]

    def transposed(*args):
        known, cts = split_list(args, [len(known_avals)])
        kit = iter(known)
        primals_in = [ad.UndefinedPrimal(a) if u else next(kit)
                      for a, u in zip(in_avals, undefined)]
        cts_in = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, primals_in, cts)
        return [ad.instantiate_zeros(c) for c, u in zip(cts_in, undefined) if u]

    t_jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(transposed, known_avals + ct_avals,
                                                   purpose="transpose")
    return ClosedJaxpr(t_jaxpr, consts)


def _jit_transpose(cts, *args, jaxpr, name, donated_invars):
    undefined = tuple(ad.is_undefined_primal(x) for x in args)
    t_closed = _transpose_of(jaxpr, undefined)
    known = [x for x in args if not ad.is_undefined_primal(x)]
    cts = [ad.instantiate_zeros(c) for c in cts]
    outs = iter(bind_jit(t_closed, [*known, *cts], name))
    return [next(outs) if u else None for u in undefined]


@_per_jaxpr_cache
def _batch_of(jaxpr: ClosedJaxpr, dims: tuple, axis_size: int):
    # outputs that do not depend on a mapped input stay unbatched (JAX: instantiate=False)
    b_closed, out_dims = batching.batch_jaxpr(jaxpr, dims, axis_size)
    return b_closed, tuple(out_dims)


def _jit_batch_rule(vals, dims, *, axis_size, jaxpr, name, donated_invars):
    b_closed, out_dims = _batch_of(jaxpr, tuple(dims), axis_size)
    outs = bind_jit(b_closed, vals, name)
    return outs, list(out_dims)


def _jit_lowering(ctx, *args, jaxpr, name, donated_invars):
    return mlir.lower_jaxpr(jaxpr.jaxpr, jaxpr.consts, args)


@_per_jaxpr_cache
def _dce_of(closed: ClosedJaxpr, used_outputs: tuple[bool, ...]):
    return pe.dce_closed_jaxpr(closed, used_outputs)


def _jit_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    # memoized, so DCE keeps handing out the same inner jaxpr object (caches key on identity)
    new_closed, used_inputs = _dce_of(eqn.params["jaxpr"], tuple(used_outputs))
    donated = tuple(d for d, u in zip(eqn.params["donated_invars"], used_inputs) if u)
    return eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=dict(eqn.params, jaxpr=new_closed, donated_invars=donated))


jit_p = core.Primitive("jit")
jit_p.multiple_results = True
jit_p.eager_numpy = False
jit_p.pp_hide_if_empty = ("donated_invars",)
jit_p.pp_first_params = ("name",)  # JAX prints jit's name before its jaxpr
jit_p.def_impl(_jit_impl)
jit_p.def_abstract_eval(_jit_abstract_eval)
ad.primitive_jvps[jit_p] = _jit_jvp
pe.custom_partial_eval_rules[jit_p] = _jit_partial_eval
ad.primitive_transposes[jit_p] = _jit_transpose
batching.primitive_batchers[jit_p] = _jit_batch_rule
mlir.register_lowering(jit_p, _jit_lowering)
pe.dce_rules[jit_p] = _jit_dce_rule


# ---------------------------------------------------------------------------------------------
# The user-facing wrapper and its stages
# ---------------------------------------------------------------------------------------------

def _hashable_static(value, what: str):
    try:
        hash(value)
    except TypeError:
        raise ValueError(
            f"Non-hashable static arguments are not supported. An error occurred while trying "
            f"to hash an object of type {type(value)}, {value}. The error was:\nTypeError: "
            f"unhashable type: '{type(value).__name__}' ({what})") from None
    return value


# JAX: jax/_src/stages.py Lowered — differs: holds the module and the jaxpr only
class Lowered:
    """The result of `jit(f).lower(*args)`: StableHLO for one input signature."""

    def __init__(self, closed: ClosedJaxpr, in_tree, out_tree, name: str,
                 donated: tuple[bool, ...] = ()) -> None:
        self.jaxpr = closed
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._name = name
        self._donated = donated
        self._module = mlir.lower_jaxpr_to_module(closed, name, donated)

    def as_text(self) -> str:
        """The StableHLO module as text: `module @jit_f { func.func public @main(...) ... }`."""
        return str(self._module)

    def compiler_ir(self):
        """The `ir.Module` object."""
        return self._module

    def compile(self) -> "Compiled":
        """Compile the module with XLA (cache_stats["compiles"] counts it)."""
        exe = compiler.compile(self._module)
        cache_stats["compiles"] += 1
        usable = mlir.usable_donations(self.jaxpr, self._donated)
        _warn_unusable_donations(self.jaxpr, self._donated, usable)
        return Compiled(self.jaxpr, exe, self._in_tree, self._out_tree, usable)


# JAX: jax/_src/stages.py Compiled
class Compiled:
    """An XLA executable for one input signature; call it with arguments of those types."""

    def __init__(self, closed: ClosedJaxpr, executable, in_tree, out_tree,
                 usable_donations: tuple[bool, ...] = ()) -> None:
        self.jaxpr = closed
        self._executable = executable
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._usable_donations = usable_donations

    def as_text(self) -> str:
        """The optimized HLO XLA produced (after fusion)."""
        return self._executable.get_hlo_text()

    def cost_analysis(self):
        """XLA's estimates for the executable: a dict with 'flops', 'bytes accessed', ..."""
        return self._executable.cost_analysis()

    def memory_analysis(self):
        """XLA's buffer sizes in bytes (arguments, outputs, temporaries, generated code)."""
        return self._executable.get_compiled_memory_stats()

    def __call__(self, *args, **kwargs):
        """Run on arguments of the compiled types (static arguments left out).

        Raises TypeError naming each argument leaf whose type differs (expected vs got), or
        the pytree structures if those differ. Mirrors jax/_src/stages.py Compiled.call.
        """
        flat, in_tree = tree_flatten((args, kwargs))
        if in_tree != self._in_tree:
            raise TypeError("Compiled function called with a different pytree structure of "
                            f"arguments: compiled for {self._in_tree}, called with {in_tree}")
        avals = [core.get_aval(x) for x in flat]
        bad = [f"argument leaf {i}: compiled for {b.str_short()}, called with {a.str_short()}"
               for i, (a, b) in enumerate(zip(avals, self.jaxpr.in_avals))
               if not core.typematch(a, b)]
        if bad:
            raise TypeError("Argument types differ from the types for which this computation "
                            "was compiled. The mismatches are:\n" + "\n".join(bad))
        bufs = [to_device(x, a) for x, a in zip(flat, self.jaxpr.in_avals)]
        outs = compiler.execute(self._executable, bufs)
        _delete_donated(flat, self._usable_donations)
        committed = _committed(flat)
        return tree_unflatten(self._out_tree, [Array(a, buf=b, committed=committed)
                                               for a, b in zip(self.jaxpr.out_avals, outs)])


def _fast_runner(closed: ClosedJaxpr, consts: list, out_tree, donated: tuple[bool, ...],
                 name: str) -> Callable:
    """A closure that runs `closed`'s executable on flat concrete arguments (what JAX's C++
    dispatch does): no tracing, no bind, just buffers in and Arrays out."""
    exe, usable = _compiled(closed, donated, name)
    n = len(consts)
    usable_args = usable[n:] if any(usable) else None
    const_bufs = [to_device(c, a) for c, a in zip(consts, closed.in_avals[:n])]
    in_avals = closed.in_avals[n:]
    out_avals = closed.out_avals
    handlers = compiler.result_handlers(out_avals)

    def run(leaves):
        bufs = list(const_bufs)
        committed = False
        for x, a in zip(leaves, in_avals):
            if type(x) is Array:
                committed = committed or x._committed
                buf = x._buf
                bufs.append(buf if buf is not None else x.device_buffer())
            else:
                bufs.append(to_device(x, a))
        outs = compiler.execute(exe, bufs, handlers)
        if usable_args:
            _delete_donated(leaves, usable_args)
        return tree_unflatten(out_tree, [Array(a, None, b, committed)
                                         for a, b in zip(out_avals, outs)])

    return run


# JAX: jax/_src/pjit.py JitWrapped (the object `jax.jit` returns)
class JitWrapped:
    """`jit(fun)`: call it like `fun`. Traces once per (pytree structure, input avals incl.
    weak_type, static arguments), compiles once per traced jaxpr, and then only dispatches."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 donate_argnames=()) -> None:
        self.fun = fun
        self.__name__ = getattr(fun, "__name__", "fun")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        if isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        self.static_argnums = tuple(static_argnums)
        self.static_argnames = tuple(static_argnames)
        if isinstance(donate_argnums, int):
            donate_argnums = (donate_argnums,)
        if isinstance(donate_argnames, str):
            donate_argnames = (donate_argnames,)
        self.donate_argnums = tuple(donate_argnums)
        self.donate_argnames = tuple(donate_argnames)
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None
        self._cache: dict = {}
        # (pytree structure, avals) -> a closure that runs the executable directly: the fast
        # path for calls outside any transformation with no static or keyword arguments.
        self._fast_cache: dict = {}

    def _split(self, args, kwargs):
        nargs = len(args)
        static_nums = {i % nargs if nargs else i
                       for i in self.static_argnums if -nargs <= i < nargs}
        statics = tuple((i, _hashable_static(args[i], f"static argument {i}"))
                        for i in sorted(static_nums))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_nums)
        static_kw = tuple(sorted((k, _hashable_static(v, f"static argument {k!r}"))
                                 for k, v in kwargs.items() if k in self.static_argnames))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return statics, static_kw, dyn_args, dyn_kwargs

    def _donated_leaves(self, args, kwargs, statics) -> tuple[bool, ...]:
        """One flag per flat dynamic leaf: does it belong to a donated argument?"""
        if not self.donate_argnums and not self.donate_argnames:
            return ()
        static_nums = {i for i, _ in statics}
        nargs = len(args)
        donate = {i % nargs for i in self.donate_argnums if -nargs <= i < nargs}
        flags: list[bool] = []
        for i, a in enumerate(args):
            if i not in static_nums:
                flags += [i in donate] * len(tree_flatten(a)[0])
        for k in sorted(kwargs):
            if k not in self.static_argnames:
                flags += [k in self.donate_argnames] * len(tree_flatten(kwargs[k])[0])
        return tuple(flags)

    def _get_jaxpr(self, args, kwargs):
        statics, static_kw, dyn_args, dyn_kwargs = self._split(args, kwargs)
        flat, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = tuple(core.get_aval(x) for x in flat)
        key = (in_tree, avals, statics, static_kw)
        hit = self._cache.get(key)
        if hit is not None:
            return hit, flat, in_tree
        if config.jax_explain_cache_misses:
            _explain_cache_miss(self.__name__, key, list(self._cache))
        out_tree_box = []

        def flat_fun(*dyn_flat):
            d_args, d_kwargs = tree_unflatten(in_tree, dyn_flat)
            full_args, it = [], iter(d_args)
            static_map = dict(statics)
            for i in range(len(d_args) + len(statics)):
                full_args.append(static_map[i] if i in static_map else next(it))
            out = self.fun(*full_args, **d_kwargs, **dict(static_kw))
            out_flat, out_tree = tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_flat

        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat_fun, avals, fun_name=self.__name__,
                                                     purpose="jit")
        cache_stats["traces"] += 1
        closed, hoisted = _hoist_consts(ClosedJaxpr(jaxpr, consts))
        donated = self._donated_leaves(args, kwargs, statics)
        donated = (False,) * len(hoisted) + (donated or (False,) * len(flat))
        entry = (closed, hoisted, out_tree_box[0], donated)
        if not any(isinstance(c, Tracer) for c in hoisted):
            self._cache[key] = entry
        return entry, flat, in_tree

    def __call__(self, *args, **kwargs):
        fast_ok = not kwargs and not self.static_argnums and core.trace_ctx.trace is core.eval_trace
        if fast_ok:
            leaves, in_tree = tree_flatten(args)
            key = (in_tree, tuple([x.aval if type(x) is Array else core.get_aval(x)
                                   for x in leaves]))
            run = self._fast_cache.get(key)
            if run is not None:
                return run(leaves)
        (closed, consts, out_tree, donated), flat, _ = self._get_jaxpr(args, kwargs)
        if core.trace_ctx.trace is not core.eval_trace:
            donated = (False,) * len(donated)  # donation only applies to a top-level call
        outs = jit_p.bind(*consts, *flat, jaxpr=closed, name=self.__name__,
                          donated_invars=donated)
        if consts and core.trace_ctx.trace is core.eval_trace:
            committed = _committed(flat)  # as in JAX, closed-over arrays do not commit outputs
            for o in outs:
                o._committed = committed
        if fast_ok and not any(isinstance(c, Tracer) for c in consts):
            self._fast_cache[key] = _fast_runner(closed, consts, out_tree, donated,
                                                 self.__name__)
        return tree_unflatten(out_tree, outs)

    def trace(self, *args, **kwargs) -> "Traced":
        """Trace for the types of `args` (arrays or `ShapeDtypeStruct`s); no compilation.

        Returns a `Traced` with `.jaxpr`, `.out_info` and `.lower()`. Traced at most once per
        signature: the cache is the one calls use. Mirrors jax/_src/pjit.py JitWrapped.trace.
        """
        (closed, consts, out_tree, donated), _, in_tree = self._get_jaxpr(args, kwargs)
        return Traced(closed, consts, in_tree, out_tree, self.__name__, donated)

    def lower(self, *args, **kwargs) -> Lowered:
        return self.trace(*args, **kwargs).lower()


# JAX: jax/_src/stages.py Traced
class Traced:
    """The result of `jit(f).trace(*args)`: the jaxpr for one input signature."""

    def __init__(self, hoisted: ClosedJaxpr, consts, in_tree, out_tree, name: str,
                 donated: tuple[bool, ...]) -> None:
        n = len(consts)
        if n:
            # put the closed-over arrays back as constants, as in the traced program
            inner = hoisted.jaxpr
            hoisted = ClosedJaxpr(core.Jaxpr(inner.invars[:n], inner.invars[n:], inner.outvars,
                                             inner.eqns), consts)
        self.jaxpr = hoisted
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._name = name
        self._donated = donated[n:]
        from minijax.api import ShapeDtypeStruct  # api imports this module
        self.out_info = tree_unflatten(out_tree, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                                                  for a in hoisted.out_avals])

    def lower(self) -> Lowered:
        return Lowered(self.jaxpr, self._in_tree, self._out_tree, self._name, self._donated)


def _explain_cache_miss(name: str, key: tuple, previous: list[tuple]) -> None:
    """Warn why `name` is traced again: what differs from the closest earlier signature."""
    if not previous:
        warnings.warn(f"TRACING CACHE MISS for jit({name}): first call (nothing cached yet)",
                      stacklevel=4)  # the user's call of jit(f) or of .trace
        return
    in_tree, avals, statics, static_kw = key

    def differences(old) -> list[str]:
        o_tree, o_avals, o_statics, o_kw = old
        out = []
        if o_tree != in_tree:
            out.append(f"the pytree structure of the arguments changed from {o_tree} to "
                       f"{in_tree}")
        elif o_avals != avals:
            for i, (a, b) in enumerate(zip(o_avals, avals)):
                if a != b:
                    what = ("weak_type changed" if core.typematch(a, b) else "type changed")
                    out.append(f"argument leaf {i}: {what} from {a!r} to {b!r}")
        if o_statics != statics or o_kw != static_kw:
            out.append(f"static arguments changed from {dict(o_statics) | dict(o_kw)} to "
                       f"{dict(statics) | dict(static_kw)}")
        return out

    best = min((differences(k) for k in previous), key=len)
    warnings.warn(f"TRACING CACHE MISS for jit({name}) because: " + "; ".join(best),
                  stacklevel=4)


def jit(fun: Callable | None = None, *, static_argnums=(), static_argnames=(),
        donate_argnums=(), donate_argnames=()):
    """Compile `fun` with XLA.

    Args:
      fun: a function of arrays (pytrees of arrays) returning arrays.
      static_argnums / static_argnames: arguments treated as compile-time constants; they must
        be hashable (ValueError otherwise) and a new value retraces.
      donate_argnums / donate_argnames: arguments whose buffers the computation may reuse for
        outputs of the same type; afterwards those Arrays are deleted (reading them raises
        RuntimeError). A donation no output can use gives a warning.
    Returns: a `JitWrapped` callable with `.trace`, `.lower` stages.
    Mirrors jax/_src/api.py jit and jax/_src/pjit.py.
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    return JitWrapped(fun, static_argnums, static_argnames, donate_argnums, donate_argnames)
