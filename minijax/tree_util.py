"""Pytrees: nested tuples, lists, dicts, None, namedtuples and registered classes.

Transformations flatten their arguments to a flat list of leaves plus a `PyTreeDef` that can
rebuild the structure. Mirrors jax/_src/tree_util.py (whose fast path is C++).
Taught in chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

_registry: dict[type, tuple[Callable, Callable]] = {}


# JAX: jax/_src/tree_util.py register_pytree_node
def register_pytree_node(cls: type, flatten_func: Callable, unflatten_func: Callable) -> None:
    """Register `cls` as a pytree node.

    Args:
      flatten_func: `obj -> (children, aux_data)`; aux_data must be hashable.
      unflatten_func: `(aux_data, children) -> obj`.
    """
    _registry[cls] = (flatten_func, unflatten_func)


# JAX: jax/_src/tree_util.py register_pytree_node_class
def register_pytree_node_class(cls: type) -> type:
    """Class decorator: `cls` defines `tree_flatten(self)` and classmethod `tree_unflatten`."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


register_pytree_node(tuple, lambda t: (list(t), None), lambda _, xs: tuple(xs))
register_pytree_node(list, lambda t: (list(t), None), lambda _, xs: list(xs))


def _flatten_dict(d: dict) -> tuple[list, tuple]:
    keys = tuple(sorted(d))  # sorted once: the children and the aux data share the order
    return [d[k] for k in keys], keys


register_pytree_node(dict, _flatten_dict, lambda keys, xs: dict(zip(keys, xs)))
register_pytree_node(type(None), lambda _: ([], None), lambda _, xs: None)


# JAX: jax/_src/tree_util.py PyTreeDef — differs: a plain Python class (JAX's is C++)
class PyTreeDef:
    """The structure of a pytree: node type, its aux data and child structures (`None` = leaf).

    Hashable and comparable, so it can be part of a cache key (`jit` uses it)."""

    __slots__ = ("node_type", "node_data", "children", "num_leaves", "_hash")

    def __init__(self, node_type: type | None, node_data: Hashable,
                 children: tuple["PyTreeDef", ...]) -> None:
        self.node_type = node_type
        self.node_data = node_data
        self.children = children
        self.num_leaves = 1 if node_type is None else sum(c.num_leaves for c in children)
        self._hash = hash((node_type, node_data, children))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (
            type(other) is PyTreeDef and self._hash == other._hash
            and self.node_type is other.node_type and self.node_data == other.node_data
            and self.children == other.children)

    def __repr__(self) -> str:
        return f"PyTreeDef({self._str()})"

    def _str(self) -> str:
        if self.node_type is None:
            return "*"
        inner = ", ".join(c._str() for c in self.children)
        if self.node_type is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.node_type is list:
            return f"[{inner}]"
        if self.node_type is dict:
            return "{" + ", ".join(f"'{k}': {c._str()}" for k, c in
                                   zip(self.node_data, self.children)) + "}"
        if self.node_type is type(None):
            return "None"
        return f"{self.node_type.__name__}({inner})"


_LEAF = PyTreeDef(None, None, ())


def _flatten(x: Any, is_leaf: Callable | None, leaves: list) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    if t is tuple or t is list:  # the common containers, without a registry lookup
        children, aux = x, None
    elif t in _registry:
        children, aux = _registry[t][0](x)
    elif isinstance(x, tuple) and hasattr(t, "_fields"):  # a namedtuple
        children, aux = x, None
    else:
        leaves.append(x)
        return _LEAF
    return PyTreeDef(t, aux, tuple([_flatten(c, is_leaf, leaves) for c in children]))


# JAX: jax/_src/tree_util.py tree_flatten
def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list, PyTreeDef]:
    """Flatten `tree` to (leaves, treedef).

    Leaves are in the order JAX uses (dicts by sorted key)."""
    leaves: list = []
    treedef = _flatten(tree, is_leaf, leaves)
    return leaves, treedef


def _unflatten(treedef: PyTreeDef, it) -> Any:
    if treedef.node_type is None:
        return next(it)
    children = [_unflatten(c, it) for c in treedef.children]
    t = treedef.node_type
    if t in _registry:
        return _registry[t][1](treedef.node_data, children)
    return t(*children)  # namedtuple


# JAX: jax/_src/tree_util.py tree_unflatten
def tree_unflatten(treedef: PyTreeDef, leaves) -> Any:
    """Rebuild a pytree of structure `treedef` from an iterable of leaves.

    Raises ValueError if the number of leaves does not match `treedef.num_leaves`.
    """
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree_unflatten: {treedef} expects {treedef.num_leaves} leaves, "
                         f"got {len(leaves)}")
    return _unflatten(treedef, iter(leaves))


def tree_leaves(tree: Any, is_leaf: Callable | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


# JAX: jax/_src/tree_util.py tree_map
def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None) -> Any:
    """Apply `f` leaf-wise to `tree` and the trees in `rest`, which must share its structure."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef} vs {r_def}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return list(treedef.children)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.node_type is None
