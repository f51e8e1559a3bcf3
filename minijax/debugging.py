"""Debugging callbacks: `debug.callback` and `debug.print`, which look at runtime values.

Both bind a primitive with no outputs and a `DebugEffect` (or `OrderedDebugEffect` with
`ordered=True`), so dead-code elimination keeps them. Eagerly they call the host function at
once; under `jit` they lower to a host callback (`minijax/callback.py:
emit_python_callback`) that runs each time the compiled program does; under `vmap` they run
once per example; under `jvp`/`grad` they see the primal values, and the backward pass adds
no calls (their transpose does nothing).
Mirrors jax/_src/debugging.py. Taught in chapters/14-callbacks-effects.md and
chapters/15-debugging.md.
"""

from __future__ import annotations

import string
import sys
from functools import partial
from typing import Any, Callable

import numpy as np

from minijax import core, effects
from minijax.array import array_from_numpy
from minijax.callback import emit_python_callback, index_in_dim
from minijax.interpreters import ad, batching, mlir
from minijax.tree_util import tree_flatten, tree_unflatten


# JAX: jax/_src/debugging.py DebugEffect
class DebugEffect(effects.Effect):
    """The effect of an unordered debug callback."""

    def __str__(self) -> str:
        return "Debug"


# JAX: jax/_src/debugging.py OrderedDebugEffect
class OrderedDebugEffect(effects.Effect):
    """The effect of `debug.callback`/`debug.print(..., ordered=True)`: a runtime token
    sequences these calls with each other."""

    def __str__(self) -> str:
        return "OrderedDebug"


debug_effect = DebugEffect()
ordered_debug_effect = OrderedDebugEffect()
effects.ordered_effects.add_type(OrderedDebugEffect)


# JAX: jax/_src/debugging.py _split_callback_args
def _split_callback_args(args, kwargs):
    """(in_tree, array leaves, {position: other leaf}): only arrays are traced; the rest
    (strings, None, ...) are handed to the callback as they are."""
    flat, in_tree = tree_flatten((args, kwargs))
    static_args, dyn_args = {}, []
    for i, a in enumerate(flat):
        try:
            core.get_aval(a)
            dyn_args.append(a)
        except TypeError:
            static_args[i] = a
    return in_tree, dyn_args, static_args


# JAX: jax/_src/debugging.py merge_callback_args
def merge_callback_args(in_tree, dyn_args, static_args):
    static = dict(static_args)
    di = iter(dyn_args)
    flat = [static[i] if i in static else next(di)
            for i in range(len(static) + len(dyn_args))]
    return tree_unflatten(in_tree, flat)


def _make_flat_callback(in_tree, callback: Callable, static_args) -> Callable:
    def _flat_callback(*dyn_args):
        args, kwargs = merge_callback_args(in_tree, dyn_args, static_args)
        callback(*args, **kwargs)
        return ()
    return _flat_callback


# ---------------------------------------------------------------------------------------------
# debug_callback
# ---------------------------------------------------------------------------------------------

def _debug_callback_impl(*args, callback: Callable, effect, partitioned: bool):
    # the host function gets Arrays, as JAX's gets jax.Arrays
    callback(*[array_from_numpy(np.asarray(a)) for a in args])
    return []


def _debug_callback_abstract_eval(*avals, callback, effect, partitioned):
    return [], {effect}


# JAX: jax/_src/debugging.py debug_batching_rule
def _debug_batch_rule(vals, dims, *, axis_size, primitive, **params):
    """One call per example, unrolled (example 0 first)."""
    for i in range(axis_size):
        primitive.bind(*[x if d is None else index_in_dim(x, i, d) for x, d in zip(vals, dims)],
                       **params)
    return [], []


def _debug_jvp(primals, tangents, *, primitive, **params):
    return primitive.bind(*primals, **params), []


def _debug_transpose(cts, *args, **params):
    return [None] * len(args)


def _debug_callback_lowering(ctx, *args, callback, effect, partitioned):
    def host(*flat):
        _debug_callback_impl(*flat, callback=callback, effect=effect, partitioned=partitioned)
        return ()
    ordered = effect if effects.ordered_effects.contains(effect) else None
    emit_python_callback(ctx, host, args, [], has_side_effect=True, ordered_effect=ordered,
                         partitioned=partitioned)
    return []


debug_callback_p = core.Primitive("debug_callback")
debug_callback_p.multiple_results = True
debug_callback_p.pp_param_formatters = {"callback": lambda f: core.mask_addresses(repr(f))}
debug_callback_p.def_impl(_debug_callback_impl)
debug_callback_p.def_effectful_abstract_eval(_debug_callback_abstract_eval)
ad.primitive_jvps[debug_callback_p] = partial(_debug_jvp, primitive=debug_callback_p)
ad.primitive_transposes[debug_callback_p] = _debug_transpose
batching.primitive_batchers[debug_callback_p] = partial(_debug_batch_rule,
                                                        primitive=debug_callback_p)
mlir.register_lowering(debug_callback_p, _debug_callback_lowering)


# JAX: jax/_src/debugging.py debug_callback
def debug_callback(callback: Callable[..., None] | None = None, *args: Any,
                   ordered: bool = False, partitioned: bool = False, **kwargs: Any):
    """Call `callback(*args, **kwargs)` with the runtime values of `args`, from traced code.

    Array leaves of `args`/`kwargs` arrive as Arrays; other leaves (strings, ...) as given.
    Returns None. With `ordered=True` the ordered debug callbacks of a program, and of
    successive jitted calls, run in program order. Two-call form: `debug_callback(ordered=
    True)(callback, *args)`. Raises TypeError if `callback` is not callable.
    """
    def _debug_callback(callback, *c_args, **c_kwargs):
        if not callable(callback):
            raise TypeError("first argument to jax.debug.callback must be callable, but got "
                            f"an object of type {type(callback)}")
        in_tree, dyn_args, static_args = _split_callback_args(c_args, c_kwargs)

        def _flat_callback(*dyn_args_flat):  # defined here: jaxprs name it as JAX's do
            args_, kwargs_ = merge_callback_args(in_tree, dyn_args_flat, static_args)
            callback(*args_, **kwargs_)
            return ()

        debug_callback_p.bind(
            *dyn_args, callback=_flat_callback,
            effect=ordered_debug_effect if ordered else debug_effect, partitioned=partitioned)

    if callback is not None:
        _debug_callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_callback


# ---------------------------------------------------------------------------------------------
# debug_print
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/debugging.py _DebugPrintFormatChecker
class _DebugPrintFormatChecker(string.Formatter):
    """Checks a format string against its arguments at trace time, formatting nothing."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused_args = [a for i, a in enumerate(args) if i not in used_args]
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused_args}")
        if unused_kwargs:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {unused_kwargs}. You may be "
                "passing an f-string (i.e, `f\"{x}\"`) into `jax.debug.print` and instead "
                "should pass in a regular string.")


_formatter = _DebugPrintFormatChecker()


# JAX: jax/_src/debugging.py _format_print_callback — differs: no logging records
def _format_print_callback(fmt: str, np_printoptions, has_placeholders: bool, *args,
                           **kwargs):
    if has_placeholders:
        with np.printoptions(**np_printoptions):
            msg = fmt.format(*args, **kwargs)
    else:
        msg = " ".join((fmt, *(str(a) for a in args)))
    sys.stdout.write(msg + "\n")


def _print_callback(fmt, in_tree, static_args, np_printoptions, has_placeholders) -> Callable:
    callback = partial(_format_print_callback, fmt, dict(np_printoptions), has_placeholders)
    return _make_flat_callback(in_tree, callback, static_args)


def _debug_print_impl(*args, fmt, ordered, partitioned, in_tree, static_args, np_printoptions,
                      has_placeholders, logging_record):
    return _debug_callback_impl(
        *args, callback=_print_callback(fmt, in_tree, static_args, np_printoptions,
                                        has_placeholders),
        effect=None, partitioned=partitioned)


def _debug_print_abstract_eval(*avals, ordered, **params):
    return [], {ordered_debug_effect if ordered else debug_effect}


def _debug_print_lowering(ctx, *args, fmt, ordered, partitioned, in_tree, static_args,
                          np_printoptions, has_placeholders, logging_record):
    return _debug_callback_lowering(
        ctx, *args, callback=_print_callback(fmt, in_tree, static_args, np_printoptions,
                                             has_placeholders),
        effect=ordered_debug_effect if ordered else debug_effect, partitioned=partitioned)


debug_print_p = core.Primitive("debug_print")
debug_print_p.multiple_results = True
debug_print_p.def_impl(_debug_print_impl)
debug_print_p.def_effectful_abstract_eval(_debug_print_abstract_eval)
ad.primitive_jvps[debug_print_p] = partial(_debug_jvp, primitive=debug_print_p)
ad.primitive_transposes[debug_print_p] = _debug_transpose
batching.primitive_batchers[debug_print_p] = partial(_debug_batch_rule, primitive=debug_print_p)
mlir.register_lowering(debug_print_p, _debug_print_lowering)


# JAX: jax/_src/debugging.py debug_print
def debug_print(fmt: str | None = None, *args, ordered: bool = False,
                partitioned: bool = False, skip_format_check: bool = False, **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the runtime values, from traced code.

    Use `{}`/`{name}` placeholders, not an f-string (formatting happens when the program
    runs). Arrays print as NumPy prints them, under the print options current at trace
    time. Without placeholders the arguments follow `fmt`, space separated. With
    `ordered=True` ordered prints come out in program order. Two-call form:
    `debug_print(ordered=True)("x={x}", x=x)`. Returns None.
    Raises ValueError for arguments the format does not use, and what `str.format` raises
    for missing ones (at trace time).
    """
    def _debug_print(fmt: str, *c_args, **c_kwargs):
        if not skip_format_check:
            _formatter.format(fmt, *c_args, **c_kwargs)
        has_placeholders = False
        if fmt:
            _, field_name, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field_name is not None
        in_tree, dyn_args, static_args = _split_callback_args(c_args, c_kwargs)
        debug_print_p.bind(
            *dyn_args, fmt=fmt, ordered=ordered, partitioned=partitioned, in_tree=in_tree,
            static_args=tuple(static_args.items()),
            np_printoptions=tuple(np.get_printoptions().items()),
            has_placeholders=has_placeholders, logging_record=None)

    if fmt is not None:
        _debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_print
