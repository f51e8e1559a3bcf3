"""Flatten and unflatten one fixed pytree of builtin containers, fast: jit's cached call.

A cached call of a `jit` function flattens its arguments and rebuilds its outputs every time.
In JAX both are C++ (jaxlib's `PyTreeDef`, called from the C++ dispatch `PjitFunction`); the
generic walk in `tree_util.py` is Python: it builds a new `PyTreeDef` each call, which is then
compared node by node with the cached one, and rebuilding walks the treedef again; for a few
nested tuples that was most of the Python in the call. This module stands in for that C++: for
a structure made only of tuples, lists, dicts and None, it writes the Python for that one
structure (as `collections.namedtuple` and `dataclasses` write their methods) and compiles it
once. Used by `minijax/pjit.py: JitWrapped.__call__` (the cached call of chapters/07-jit.md).
"""

from __future__ import annotations

from typing import Callable

from minijax.tree_util import PyTreeDef

_BUILTIN = (tuple, list, dict, type(None))
_MAX_DEPTH = 32  # deeper structures keep the generic walk (Python's parser nests ~200 levels)


def _walk(tree: PyTreeDef, path: str, keys: list, checks: list, leaves: list, depth: int) -> str:
    """Collect, for the node at `path` (an expression such as `a[0]['w']`): the checks that it
    has `tree`'s structure, in an order safe to evaluate, and the paths of its leaves. Returns
    the expression that rebuilds the node from leaf variables `x0, x1, ...`. A dict's keys are
    named `k0, k1, ...` in the code and passed in `keys`."""
    t = tree.node_type
    if t is None:
        leaves.append(path)
        return f"x{len(leaves) - 1}"
    if t not in _BUILTIN or depth > _MAX_DEPTH:
        raise NotImplementedError  # a namedtuple, an OrderedDict, a registered class
    if t is type(None):
        checks.append(f"{path} is None")
        return "None"
    children = tree._children
    checks.append(f"type({path}) is {t.__name__} and len({path}) == {len(children)}")
    if t is dict:  # the keys in sorted order, as the treedef holds them
        if not (all(type(k) is str for k in tree._data)
                or all(type(k) is int for k in tree._data)):
            # keys of other types may sort by insertion order (frozensets, NaN) or equal
            # keys of another type (1 and True): the generic walk keeps their order and types
            raise NotImplementedError
        names = [f"k{len(keys) + i}" for i in range(len(children))]
        keys.extend(tree._data)
        parts = [f"{n}: {_walk(c, f'{path}[{n}]', keys, checks, leaves, depth + 1)}"
                 for n, c in zip(names, children)]
        return "{" + ", ".join(parts) + "}"
    parts = [_walk(c, f"{path}[{i}]", keys, checks, leaves, depth + 1)
             for i, c in enumerate(children)]
    if t is list:
        return "[" + ", ".join(parts) + "]"
    return "(" + "".join(p + ", " for p in parts) + ")"


# JAX: jax/_src/tree_util.py PyTreeDef — differs: jaxlib flattens and unflattens in C++; here
# Python written for one structure of builtin containers stands in for it
def specialize(tree: PyTreeDef) -> tuple[Callable, Callable] | None:
    """(flatten, unflatten) for `tree`, or None unless it is made of tuples, lists, dicts
    (keys all `str` or all `int`) and None only. `flatten(x)` is `x`'s leaves if `x` has
    exactly `tree`'s structure (the same container types, lengths and dict keys; what sits
    at a leaf is not checked), else None; it raises nothing. `unflatten(leaves)` is
    `tree_unflatten(tree, leaves)` for any iterable of exactly `tree.num_leaves` leaves
    (else Python's ValueError from unpacking).

    For `tree` = `(*, [*, *], {'b': *})` the code written is:

        def flatten(a):
            try:
                if type(a) is tuple and len(a) == 3 and type(a[1]) is list and len(a[1]) == 2
                        and type(a[2]) is dict and len(a[2]) == 1:
                    return [a[0], a[1][0], a[1][1], a[2][k0]]
            except KeyError:  # a dict with other keys (of the same number)
                pass

        def unflatten(leaves):
            [x0, x1, x2, x3] = leaves
            return (x0, [x1, x2], {k0: x3}, )
    """
    keys: list = []
    checks: list = []
    leaves: list = []
    try:
        rebuilt = _walk(tree, "a", keys, checks, leaves, 0)
    except NotImplementedError:
        return None
    names = ", ".join(f"x{i}" for i in range(len(leaves)))
    source = (f"def flatten(a):\n"
              f"    try:\n"
              f"        if {' and '.join(checks) or 'True'}:\n"
              f"            return [{', '.join(leaves)}]\n"
              f"    except KeyError:\n"
              f"        pass\n"
              f"def unflatten(leaves):\n"
              f"    [{names}] = leaves\n"
              f"    return {rebuilt}\n")
    namespace = {f"k{i}": k for i, k in enumerate(keys)}
    exec(compile(source, "<minijax specialised flatten>", "exec"), namespace)
    return namespace["flatten"], namespace["unflatten"]
