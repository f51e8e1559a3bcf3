"""Function wrappers the transformations share: flattening a function's pytree inputs and
outputs, splitting its arguments into transformed and fixed (static) ones, and memoizing
jaxpr-to-jaxpr work on the identity of the jaxpr.

Mirrors jax/_src/api_util.py (`flatten_fun_nokwargs`, `argnums_partial`,
`_ensure_index_tuple`). Used by minijax/api.py and minijax/pjit.py.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Sequence

from minijax.tree_util import PyTreeDef, tree_flatten, tree_unflatten


def fun_name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


# JAX: jax/_src/api_util.py check_callable
def check_callable(fun) -> None:
    """TypeError unless `fun` is a callable that is not a generator function (tracing runs a
    function once; a generator's body would not run at all)."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun}")
    if inspect.isgeneratorfunction(fun):
        raise TypeError(f"Expected a function, got a generator function: {fun}")


# JAX: jax/_src/api_util.py infer_argnums_and_argnames
def infer_argnums_and_argnames(sig: inspect.Signature | None, argnums: tuple[int, ...],
                               argnames: tuple[str, ...]) -> tuple[tuple[int, ...],
                                                                   tuple[str, ...]]:
    """Complete `argnums` with the positions of `argnames` and `argnames` with the names of
    `argnums`, from the signature: an argument marked either way is marked however it is
    passed (positionally or by keyword)."""
    if sig is None:
        return argnums, argnames
    params = list(sig.parameters.values())
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keyword = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    nums = set(argnums) | {positional.index(n) for n in argnames if n in positional}
    names = set(argnames) | {positional[i] for i in argnums
                             if -len(positional) <= i < len(positional)
                             and positional[i] in keyword}
    return tuple(sorted(nums)), tuple(sorted(names))


# JAX: jax/_src/api_util.py _ensure_index_tuple
def ensure_index_tuple(x: int | Sequence[int]) -> tuple[int, ...]:
    return (int(x),) if isinstance(x, int) else tuple(int(i) for i in x)


# JAX: jax/_src/api_util.py flatten_fun_nokwargs
def flatten_fun_nokwargs(fun: Callable, in_tree: PyTreeDef, out_store: list) -> Callable:
    """A function of flat leaves that calls `fun` on the rebuilt pytrees and flattens its
    output (whose structure lands in `out_store`)."""
    def flat_fun(*leaves):
        args = tree_unflatten(in_tree, leaves)
        out_flat, out_tree = tree_flatten(fun(*args))
        out_store[:] = [out_tree]
        return out_flat
    return flat_fun


# JAX: jax/_src/api_util.py flatten_fun_nokwargs — differs: also flattens an aux output
def flatten_fun_nokwargs_aux(fun: Callable, in_tree: PyTreeDef, out_store: list) -> Callable:
    """Like `flatten_fun_nokwargs` for `fun` returning `(out, aux)`: returns the flat leaves of
    both, `(out_leaves, aux_leaves)`, and `out_store` gets (out_tree, aux_tree).
    `ad.jvp_flat(..., has_aux=True)` keeps the aux leaves out of differentiation."""
    def flat_fun(*leaves):
        args = tree_unflatten(in_tree, leaves)
        res = fun(*args)
        if not (isinstance(res, tuple) and len(res) == 2):
            raise TypeError("with has_aux=True the function must return a pair (output, aux), "
                            f"got {type(res).__name__}")
        out, aux = res
        out_flat, out_tree = tree_flatten(out)
        aux_flat, aux_tree = tree_flatten(aux)
        out_store[:] = [out_tree, aux_tree]
        return out_flat, aux_flat
    return flat_fun


# JAX: jax/_src/api_util.py argnums_partial — differs: a plain closure, no WrappedFun
def argnums_partial(fun: Callable, dyn_argnums: Sequence[int], args: Sequence[Any],
                    kwargs: dict | None = None) -> tuple[Callable, tuple]:
    """Fix every positional argument of `fun` except those at `dyn_argnums` (non-negative,
    in range): returns `(f, dyn_args)` with `f(*dyn_args)` calling `fun` on all of `args`
    (and `kwargs`)."""
    dyn_args = tuple(args[i] for i in dyn_argnums)
    kwargs = kwargs or {}

    def f(*new_dyn):
        full = list(args)
        for i, a in zip(dyn_argnums, new_dyn):
            full[i] = a
        return fun(*full, **kwargs)
    f.__name__ = fun_name(fun)  # error messages name the user's function
    return f, dyn_args


def hashable_static(value, what: str):
    """`value` (a static argument) if it is hashable; ValueError, as JAX raises, if not."""
    try:
        hash(value)
    except TypeError:
        raise ValueError(
            f"Non-hashable static arguments are not supported. An error occurred while trying "
            f"to hash an object of type {type(value)}, {value}. The error was:\nTypeError: "
            f"unhashable type: '{type(value).__name__}' ({what})") from None
    return value


def split_static(args: Sequence[Any], kwargs: dict, static_argnums: Sequence[int],
                 static_argnames: Sequence[str]):
    """Split a call's arguments into static and dynamic ones, as `jit` and `make_jaxpr` do.

    Returns `(statics, static_kw, dyn_args, dyn_kwargs)`: `statics` is a sorted tuple of
    (position, value), `static_kw` of (name, value); static values must be hashable
    (ValueError). Negative `static_argnums` count from the end; out-of-range ones are ignored.
    """
    nargs = len(args)
    nums = {i % nargs for i in static_argnums if -nargs <= i < nargs}
    statics = tuple((i, hashable_static(args[i], f"static argument {i}")) for i in sorted(nums))
    dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
    static_kw = tuple(sorted((k, hashable_static(v, f"static argument {k!r}"))
                             for k, v in kwargs.items() if k in static_argnames))
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_argnames}
    return statics, static_kw, dyn_args, dyn_kwargs


def merge_static(statics: tuple, dyn_args: Sequence[Any]) -> list:
    """The full positional argument list: `statics` ((position, value) pairs) put back
    among `dyn_args`."""
    static_map = dict(statics)
    it = iter(dyn_args)
    return [static_map[i] if i in static_map else next(it)
            for i in range(len(dyn_args) + len(statics))]


identity_caches: list = []  # every identity_cache's table, for `clear_caches`


# JAX: jax/_src/util.py weakref_lru_cache — differs: no LRU bound
def identity_cache(fn: Callable) -> Callable:
    """Memoize `fn(obj, *args)` on (the identity of `obj`, args), holding `obj` weakly: the
    entries die with `obj`. While `obj` lives, the same call gets the same result object, which
    keeps the caches downstream (keyed on identity too) hitting."""
    cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def cached(obj, *args):
        per_obj = cache.get(obj)
        if per_obj is None:
            per_obj = cache[obj] = {}
        hit = per_obj.get(args, _MISSING)
        if hit is _MISSING:
            hit = per_obj[args] = fn(obj, *args)
        return hit
    cached.__name__, cached.__doc__, cached.__wrapped__ = fn.__name__, fn.__doc__, fn
    cached.cache = cache
    identity_caches.append(cache)
    return cached


_MISSING = object()
