"""Pytrees: nested tuples, lists, dicts, None, namedtuples and registered classes.

Transformations flatten their arguments to a flat list of leaves plus a `PyTreeDef` that can
rebuild the structure. Key paths name where each leaf sits (`['params'][0].w`). Mirrors
jax/_src/tree_util.py (whose registry and flattening are C++ in jaxlib).
Taught in chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, Hashable, NamedTuple, TypeVar

# ---------------------------------------------------------------------------------------------
# Key paths: one entry per level, from the root down to a leaf
# ---------------------------------------------------------------------------------------------


# JAX: jax/_src/tree_util.py SequenceKey
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """Position `idx` in a tuple or list; prints as `[0]`."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


# JAX: jax/_src/tree_util.py DictKey
@dataclasses.dataclass(frozen=True)
class DictKey:
    """Key `key` of a dict (or OrderedDict, defaultdict); prints as `['key']`."""
    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


# JAX: jax/_src/tree_util.py GetAttrKey
@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """Attribute `name` of a namedtuple or a registered dataclass; prints as `.name`."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


# JAX: jax/_src/tree_util.py FlattenedIndexKey
@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The `key`-th child of a custom node registered without keys; prints as
    `[<flat index 1>]`."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def _simple_str(key) -> str:
    for attr in ("idx", "key", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


# JAX: jax/_src/tree_util.py keystr
def keystr(keys: tuple, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: `"['a'][0].b"`; with `simple=True` only the bare keys
    (`"a/0/b"` with `separator="/"`)."""
    return separator.join(map(_simple_str if simple else str, keys))


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------

class _Node(NamedTuple):
    flatten: Callable          # obj -> (children, aux_data)
    unflatten: Callable        # (aux_data, children) -> obj
    flatten_with_keys: Callable | None  # obj -> ([(key, child), ...], aux_data)


_registry: dict[type, _Node] = {}


# JAX: jax/_src/tree_util.py register_pytree_node
def register_pytree_node(cls: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Register `cls` as a pytree node.

    Args:
      flatten_func: `obj -> (children, aux_data)`; aux_data must be hashable.
      unflatten_func: `(aux_data, children) -> obj`.
      flatten_with_keys_func: optional `obj -> ([(key, child), ...], aux_data)`, the key paths
        of `tree_flatten_with_path`; without it children get `FlattenedIndexKey(i)`.
    Raises ValueError if `cls` is already registered.
    """
    if cls in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {cls}.")
    _registry[cls] = _Node(flatten_func, unflatten_func, flatten_with_keys_func)
    _leaf_types.clear()  # `cls` may have been seen as a leaf type before


# The types `_leaves` has met as plain leaves (not registered, not a tuple or list): a child
# of one of these types is a leaf, found with one set lookup (emptied on each registration)
_leaf_types: set[type] = set()


# JAX: jax/_src/tree_util.py register_pytree_with_keys
def register_pytree_with_keys(cls: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Register `cls` by `flatten_with_keys: obj -> ([(key, child), ...], aux_data)`."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(cls, flatten_func, unflatten_func, flatten_with_keys)


# JAX: jax/_src/tree_util.py register_pytree_node_class
def register_pytree_node_class(cls: type) -> type:
    """Class decorator: `cls` defines `tree_flatten(self)` and classmethod `tree_unflatten`."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


# JAX: jax/_src/tree_util.py register_pytree_with_keys_class
def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: `cls` defines `tree_flatten_with_keys(self)` and `tree_unflatten`."""
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              getattr(cls, "tree_flatten", None))
    return cls


# JAX: jax/_src/tree_util.py register_dataclass — differs: a Python flatten (JAX's is C++)
def register_dataclass(nodetype: type, data_fields=None, meta_fields=None,
                       drop_fields=()) -> type:
    """Register a dataclass-like class: `data_fields` are children (leaves or subtrees),
    `meta_fields` aux data (static, hashable). For a dataclass both may be omitted: fields
    whose metadata has `static=True` are meta, the others data. Returns `nodetype`, so it
    works as a decorator. Raises TypeError if fields are missing or not a dataclass.
    """
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            f"when {nodetype.__name__} is not a dataclass")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    elif data_fields is None or meta_fields is None:
        raise TypeError("register_dataclass: give both data_fields and meta_fields, or neither")
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init}
        missing = init - set(data_fields) - set(meta_fields) - set(drop_fields)
        if missing:
            raise ValueError(f"register_dataclass: fields {sorted(missing)} of "
                             f"{nodetype.__name__} are neither data_fields nor meta_fields")

    def flatten_with_keys(x):
        return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(meta, children):
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, children)))

    register_pytree_with_keys(nodetype, flatten_with_keys, unflatten)
    return nodetype


def _sequence_keys(xs, aux):
    return [(SequenceKey(i), x) for i, x in enumerate(xs)], aux


register_pytree_node(tuple, lambda t: (t, None), lambda _, xs: tuple(xs),
                     lambda t: _sequence_keys(t, None))
register_pytree_node(list, lambda t: (t, None), lambda _, xs: list(xs),
                     lambda t: _sequence_keys(t, None))


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:  # JAX: jaxlib's pytree.cc raises this ValueError, from the TypeError
        raise ValueError("Comparator raised exception while sorting pytree dictionary "
                         "keys.") from e


def _flatten_dict(d: dict) -> tuple[list, tuple]:
    keys = _sorted_keys(d)  # sorted once: the children and the aux data share the order
    return [d[k] for k in keys], keys


def _dict_with_keys(children, keys):
    return [(DictKey(k), c) for k, c in zip(keys, children)]


register_pytree_node(dict, _flatten_dict, lambda keys, xs: dict(zip(keys, xs)),
                     lambda d: (_dict_with_keys(*_flatten_dict(d)), _sorted_keys(d)))
register_pytree_node(type(None), lambda _: ((), None), lambda _, xs: None,
                     lambda _: ((), None))
# An OrderedDict keeps its insertion order (part of its structure); a defaultdict is sorted
# like a dict and carries its default_factory.
register_pytree_node(
    collections.OrderedDict, lambda d: (list(d.values()), tuple(d)),
    lambda keys, xs: collections.OrderedDict(zip(keys, xs)),
    lambda d: (_dict_with_keys(d.values(), d), tuple(d)))


def _flatten_defaultdict(d):
    keys = tuple(sorted(d))  # registered in Python by JAX: unsortable keys are a TypeError
    return [d[k] for k in keys], (d.default_factory, keys)


def _flatten_defaultdict_with_keys(d):
    children, aux = _flatten_defaultdict(d)
    return _dict_with_keys(children, aux[1]), aux


register_pytree_node(
    collections.defaultdict, _flatten_defaultdict,
    lambda aux, xs: collections.defaultdict(aux[0], zip(aux[1], xs)),
    _flatten_defaultdict_with_keys)


def _is_namedtuple(t: type) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


# ---------------------------------------------------------------------------------------------
# PyTreeDef
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/tree_util.py PyTreeDef — differs: a plain Python class (JAX's is C++)
class PyTreeDef:
    """The structure of a pytree: node type, its aux data and child structures (`None` = leaf).

    Hashable and comparable, so it can be part of a cache key (`jit` uses it). As in JAX,
    `children()` and `node_data()` (`(type, aux data)`, None for a leaf) are methods."""

    __slots__ = ("node_type", "_data", "_children", "num_leaves", "_hash")

    def __init__(self, node_type: type | None, node_data: Hashable,
                 children: tuple["PyTreeDef", ...], num_leaves: int | None = None) -> None:
        self.node_type = node_type
        self._data = node_data
        self._children = children
        if num_leaves is None:  # (flattening counts them as it goes)
            num_leaves = 1 if node_type is None else sum(c.num_leaves for c in children)
        self.num_leaves = num_leaves
        self._hash = None  # computed when first asked: most treedefs are only compared

    def children(self) -> list["PyTreeDef"]:
        return list(self._children)

    def node_data(self) -> tuple[type, Any] | None:
        if self.node_type is None:
            return None
        # (a dict's keys come back as a list, as JAX gives them)
        return self.node_type, list(self._data) if self.node_type is dict else self._data

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self._children)

    def unflatten(self, leaves) -> Any:
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of `tree` at this treedef's leaves (ValueError if `tree` does not
        have this structure down to them)."""
        out: list = []
        _flatten_up_to(self, tree, out)
        return out

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            try:
                h = hash((self.node_type, self._data, self._children))
            except TypeError:  # unhashable aux data: as JAX, a node hashes by its type alone
                h = hash((self.node_type, self._children))
            self._hash = h
        return h

    def __eq__(self, other) -> bool:
        return self is other or (
            type(other) is PyTreeDef and self.node_type is other.node_type
            and self.num_leaves == other.num_leaves and self._data == other._data
            and self._children == other._children)

    def __repr__(self) -> str:
        return f"PyTreeDef({self._str()})"

    def _str(self) -> str:
        t = self.node_type
        if t is None:
            return "*"
        inner = ", ".join(c._str() for c in self._children)
        if t is tuple:
            return f"({inner}{',' if len(self._children) == 1 else ''})"
        if t is list:
            return f"[{inner}]"
        if t is dict:
            return "{" + ", ".join(f"{k!r}: {c._str()}" for k, c in
                                   zip(self._data, self._children)) + "}"
        if t is type(None):
            return "None"
        if t not in _registry and _is_namedtuple(t):
            return f"CustomNode(namedtuple[{t.__name__}], [{inner}])"
        return f"CustomNode({t.__name__}[{self._data}], [{inner}])"


_LEAF = PyTreeDef(None, None, ())


def _children(x: Any, with_keys: bool):
    """(children, aux, node type) of a node, or None for a leaf; with_keys: (key, child) pairs."""
    t = type(x)
    node = _registry.get(t)
    if node is not None:
        if not with_keys:
            children, aux = node.flatten(x)
        elif node.flatten_with_keys is not None:
            children, aux = node.flatten_with_keys(x)
        else:
            children, aux = node.flatten(x)
            children = [(FlattenedIndexKey(i), c) for i, c in enumerate(children)]
        return children, aux
    if _is_namedtuple(t):
        return (list(zip(map(GetAttrKey, t._fields), x)) if with_keys else x), None
    return None


def _flatten(x: Any, is_leaf: Callable | None, leaves: list) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    if t is tuple or t is list:  # the common containers, without a registry lookup
        children, aux = x, None
    else:  # _children(x, False), inline
        node = _registry.get(t)
        if node is not None:
            children, aux = node.flatten(x)
        elif _is_namedtuple(t):
            children, aux = x, None
        else:
            leaves.append(x)
            return _LEAF
    start, subs = len(leaves), []
    for c in children:  # a child that is plainly a leaf (an Array) is taken without a call
        tc = type(c)
        if is_leaf is None and tc not in _registry and not issubclass(tc, tuple):
            leaves.append(c)
            subs.append(_LEAF)
        else:
            subs.append(_flatten(c, is_leaf, leaves))
    return PyTreeDef(t, aux, tuple(subs), len(leaves) - start)


def _flatten_with_path(x: Any, is_leaf: Callable | None, path: tuple, out: list) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        out.append((path, x))
        return _LEAF
    node = _children(x, True)
    if node is None:
        out.append((path, x))
        return _LEAF
    pairs, aux = node
    return PyTreeDef(type(x), aux,
                     tuple([_flatten_with_path(c, is_leaf, path + (k,), out) for k, c in pairs]))


def _flatten_up_to(treedef: PyTreeDef, tree: Any, out: list) -> None:
    if treedef.node_type is None:
        out.append(tree)
        return
    node = _children(tree, False) if type(tree) is treedef.node_type else None
    if node is None:
        raise ValueError(f"Expected {treedef.node_type.__name__}, got {tree!r}.")
    children, aux = node
    if aux != treedef._data or len(children) != len(treedef._children):
        raise ValueError(f"Mismatch custom node data: {aux!r} != {treedef._data!r}; "
                         f"value: {tree!r}.")
    for c, sub in zip(children, treedef._children):
        _flatten_up_to(sub, c, out)


# JAX: jax/_src/tree_util.py tree_flatten
def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list, PyTreeDef]:
    """Flatten `tree` to (leaves, treedef).

    Leaves are in the order JAX uses (dicts by sorted key, OrderedDicts by insertion)."""
    leaves: list = []
    treedef = _flatten(tree, is_leaf, leaves)
    return leaves, treedef


# JAX: jax/_src/tree_util.py tree_flatten_with_path
def tree_flatten_with_path(tree: Any, is_leaf: Callable | None = None
                           ) -> tuple[list[tuple[tuple, Any]], PyTreeDef]:
    """Like tree_flatten, with each leaf paired with its key path: `[((DictKey('a'),
    SequenceKey(0)), leaf), ...]`."""
    out: list = []
    treedef = _flatten_with_path(tree, is_leaf, (), out)
    return out, treedef


def _unflatten(treedef: PyTreeDef, it) -> Any:
    if treedef.node_type is None:
        return next(it)
    children = [_unflatten(c, it) for c in treedef._children]
    t = treedef.node_type
    if t in _registry:
        return _registry[t].unflatten(treedef._data, children)
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


# JAX: jax/_src/tree_util.py tree_leaves
def tree_leaves(tree: Any, is_leaf: Callable | None = None) -> list:
    """The leaves of `tree`, in tree_flatten's order, without building its PyTreeDef (what
    `block_until_ready` on a pytree of results does on every call)."""
    if is_leaf is None and type(tree) in _leaf_types:
        return [tree]  # one leaf (an Array, the common case): no recursion
    leaves: list = []
    _leaves(tree, is_leaf, leaves)
    return leaves


def _leaves(x: Any, is_leaf: Callable | None, leaves: list) -> None:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return
    t = type(x)
    if t is tuple or t is list:
        children = x
    else:  # _children(x, False), inline: most calls end here, at a leaf
        node = _registry.get(t)
        if node is not None:
            children = node.flatten(x)[0]
        elif issubclass(t, tuple) and hasattr(t, "_fields"):  # a namedtuple
            children = x
        else:
            _leaf_types.add(t)  # (so are all values of its type)
            leaves.append(x)
            return
    for c in children:  # a child of a known leaf type is added without a call
        if is_leaf is None and type(c) in _leaf_types:
            leaves.append(c)
        else:
            _leaves(c, is_leaf, leaves)


# JAX: jax/_src/tree_util.py tree_leaves_with_path
def tree_leaves_with_path(tree: Any, is_leaf: Callable | None = None) -> list:
    return tree_flatten_with_path(tree, is_leaf)[0]


# JAX: jax/_src/tree_util.py tree_structure
def tree_structure(tree: Any, is_leaf: Callable | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def _rest_leaves(treedef: PyTreeDef, rest, is_leaf, what: str) -> list[list]:
    # The other trees may go deeper than the first (its leaves are their prefix), as in JAX.
    try:
        return [treedef.flatten_up_to(r) for r in rest]
    except ValueError as e:
        raise ValueError(f"{what}: the trees do not have the structure {treedef}: {e}") from None


# JAX: jax/_src/tree_util.py tree_map
def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None) -> Any:
    """Apply `f` leaf-wise to `tree` and the trees in `rest`, which must share its structure
    (ValueError otherwise)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = _rest_leaves(treedef, rest, is_leaf, "tree_map")
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


# JAX: jax/_src/tree_util.py tree_map_with_path
def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None):
    """Like tree_map, calling `f(key_path, leaf, *other_leaves)`."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    others = _rest_leaves(treedef, rest, is_leaf, "tree_map_with_path")
    return tree_unflatten(treedef, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


class _Unspecified:
    pass


# JAX: jax/_src/tree_util.py tree_reduce
def tree_reduce(function: Callable, tree: Any, initializer: Any = _Unspecified,
                is_leaf: Callable | None = None) -> Any:
    """`functools.reduce(function, leaves[, initializer])` over the leaves of `tree`."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _Unspecified:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


# JAX: jax/_src/tree_util.py tree_all
def tree_all(tree: Any, *, is_leaf: Callable | None = None) -> bool:
    """True if every leaf is truthy (`all` of the leaves)."""
    return all(tree_leaves(tree, is_leaf))


# JAX: jax/_src/tree_util.py tree_transpose
def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn a tree of structure outer(inner) into one of structure inner(outer), e.g. a list
    of tuples into a tuple of lists. `inner_treedef=None` takes it from the first subtree.
    Raises TypeError if the structures do not match."""
    outer = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer[0]) if outer else tree_structure(())
    try:
        inner = [inner_treedef.flatten_up_to(x) for x in outer]
    except ValueError as e:
        raise TypeError(f"Tree structure mismatch; expected {outer_treedef} of "
                        f"{inner_treedef}: {e}") from None
    columns = [tree_unflatten(outer_treedef, col) for col in zip(*inner)] if inner else \
        [tree_unflatten(outer_treedef, []) for _ in range(inner_treedef.num_leaves)]
    return tree_unflatten(inner_treedef, columns)


# JAX: jax/_src/tree_util.py treedef_children
def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return treedef.children()


# JAX: jax/_src/tree_util.py treedef_is_leaf — true for a single node, so also for None and ()
def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1


# ---------------------------------------------------------------------------------------------
# One level at a time, leaves, broadcasting, static nodes
# ---------------------------------------------------------------------------------------------

KeyEntry = TypeVar("KeyEntry", bound=Any)  # JAX: jax/_src/tree_util.py KeyEntry
KeyPath = tuple[KeyEntry, ...]  # JAX: jax/_src/tree_util.py KeyPath


# JAX: jax/_src/tree_util.py flatten_one_level
def flatten_one_level(tree: Any) -> tuple[Any, Hashable]:
    """`(children, aux_data)` of the node `tree`, one level down (the children are not
    flattened further). Raises ValueError for a leaf."""
    node = _children(tree, False)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return node[0], node[1]  # the children as the node's flatten gave them


# JAX: jax/_src/tree_util.py flatten_one_level_with_keys
def flatten_one_level_with_keys(tree: Any) -> tuple[list, Hashable]:
    """`([(key, child), ...], aux_data)` of the node `tree`. Raises ValueError for a leaf."""
    node = _children(tree, True)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return list(node[0]), node[1]


# JAX: jax/_src/tree_util.py is_tree_node
def is_tree_node(typ: type) -> bool:
    """Whether values of type `typ` are pytree nodes (registered, built in or a
    namedtuple) rather than leaves."""
    return typ in _registry or _is_namedtuple(typ)


# JAX: jax/_src/tree_util.py all_leaves
def all_leaves(iterable, is_leaf: Callable | None = None) -> bool:
    """True when every element of `iterable` is a leaf (not a node, and not None)."""
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


# JAX: jax/_src/tree_util.py treedef_tuple
def treedef_tuple(treedefs) -> PyTreeDef:
    """The structure of a tuple whose elements have the structures `treedefs`."""
    return PyTreeDef(tuple, None, tuple(treedefs))


# JAX: jax/_src/tree_util.py tree_broadcast
def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: Callable | None = None) -> Any:
    """`full_tree`'s structure with each leaf of `prefix_tree` (a prefix of it) repeated over
    the subtree it stands for. Raises ValueError when it is not a prefix."""
    out: list = []
    try:
        tree_map(lambda x, sub: out.extend([x] * tree_structure(sub).num_leaves),
                 prefix_tree, full_tree, is_leaf=is_leaf)
    except ValueError as e:
        raise ValueError(f"broadcast_prefix prefix_tree: {prefix_tree!r} is not a tree prefix "
                         f"of {full_tree!r} ({e})") from None
    return tree_unflatten(tree_structure(full_tree), out)


def _parallel_reduce(xs: list, op: Callable, identity: Any) -> Any:
    if not xs:
        if identity is _Unspecified:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    if len(xs) == 1:
        return xs[0]
    half = len(xs) // 2
    return op(_parallel_reduce(xs[:half], op, identity), _parallel_reduce(xs[half:], op,
                                                                          identity))


# JAX: jax/_src/tree_util.py tree_reduce_associative
def tree_reduce_associative(operation: Callable, tree: Any, *, identity: Any = _Unspecified,
                            is_leaf: Callable | None = None) -> Any:
    """Reduce the leaves with an associative `operation` as a balanced tree (the left half,
    the right half, then the two), which keeps the depth of nested calls logarithmic.
    TypeError for a tree without leaves and no `identity`."""
    return _parallel_reduce(tree_leaves(tree, is_leaf), operation, identity)


# JAX: jax/_src/tree_util.py register_static
def register_static(cls: type) -> type:
    """Register `cls` as a node without children: its instances (which must be hashable) are
    aux data, so `jit` treats them as static. Returns `cls` (usable as a decorator)."""
    register_pytree_node(cls, lambda x: ((), x), lambda x, _: x)
    return cls


# ---------------------------------------------------------------------------------------------
# Partial: a function with bound arguments that is itself a pytree
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/tree_util.py _HashableCallableShim
class _HashableCallableShim:
    """Wraps a functools.partial given to Partial, which Python would otherwise merge into the
    new partial (its bound arguments would become children); it stays static aux data."""

    def __init__(self, fun: Callable) -> None:
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other) -> bool:
        return self.fun == (other.fun if isinstance(other, _HashableCallableShim) else other)


# JAX: jax/_src/tree_util.py Partial
class Partial(functools.partial):
    """`functools.partial` as a pytree: the bound arguments are its children (so arrays in
    them are leaves that transformations see), the function is aux data (static).

    So a `Partial` may be passed into or returned from `jit`; `linearize` returns one, whose
    leaves are the residuals (`vjp` returns `api.VJP`, a pytree of the same kind)."""

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _HashableCallableShim(func)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(
    Partial, lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
    lambda p: (((GetAttrKey("args"), p.args), (GetAttrKey("keywords"), p.keywords)), p.func))


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
