"""Tests for minijax/tree_util.py and minijax/tree.py against jax.tree_util / jax.tree.

One program, two modules: each program runs with `J=jax` and `J=minijax` and must give the same
leaves, the same treedef text, the same rebuilt values and types, and raise the same errors.
"""

import collections
import dataclasses

import jax
import numpy as np
import pytest

import minijax

NT = collections.namedtuple("NT", "a b")


def _plain(x):
    """Leaves as Python/numpy values, so results of both modules compare with ==."""
    if isinstance(x, (jax.Array, minijax.Array)):
        return ("array", np.asarray(x).tolist(), str(np.asarray(x).dtype))
    return x


def _same(program):
    got, want = program(minijax), program(jax)
    g = jax.tree_util.tree_map(_plain, got, is_leaf=lambda x: isinstance(x, minijax.Array))
    w = jax.tree_util.tree_map(_plain, want)
    assert repr(g) == repr(w), (g, w)
    return got


TREES = [
    {"b": 1, "a": [2.0, (3, None)], "c": "s"},
    collections.OrderedDict([("z", 1), ("a", 2), ("m", {"y": 3, "x": 4})]),
    collections.defaultdict(list, {"b": 1, "a": (2, 3)}),
    NT(1, NT(2, [3, 4])),
    [NT(a=(), b=None), {}, ()],
    {1: "one", 0: "zero"},
    (1,),
    None,
    5,
]


def test_treedef_equality_and_hash_between_trees_as_jax():
    # every pair of structures (leaves swapped for others, containers changed, leaf counts
    # equal but nested otherwise) is equal, and hashes alike, exactly where JAX says so
    trees = TREES + [[1, [2]], [[1], 2], [1, 2, 3], {"a": [1, 2]}, {"a": (1, 2)},
                     {"a": [9, 8]}, [NT(1, 2)], [(1, 2)], [None, 1], [1, None]]

    def program(J):
        defs = [J.tree_util.tree_structure(t) for t in trees]
        return [[a == b for b in defs] for a in defs], [d.num_leaves for d in defs]
    got, want = program(minijax), program(jax)
    assert got == want
    defs = [minijax.tree_util.tree_structure(t) for t in trees]
    for i, a in enumerate(defs):
        for b in defs[i:]:
            assert a != b or hash(a) == hash(b)


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_unflatten_and_repr(tree):
    def program(J):
        leaves, treedef = J.tree_util.tree_flatten(tree)
        rebuilt = J.tree_util.tree_unflatten(treedef, [f"L{i}" for i in range(len(leaves))])
        return (leaves, str(treedef), treedef.num_leaves, treedef.num_nodes,
                [str(c) for c in treedef.children()], str(treedef.node_data()),
                [str(c) for c in J.tree_util.treedef_children(treedef)],
                J.tree_util.treedef_is_leaf(treedef), type(rebuilt).__name__, repr(rebuilt),
                str(J.tree.structure(tree)), J.tree.leaves(tree))
    _same(program)


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_key_paths(tree):
    def program(J):
        pairs, treedef = J.tree_util.tree_flatten_with_path(tree)
        return ([(repr(p), J.tree_util.keystr(p), J.tree_util.keystr(p, simple=True,
                                                                      separator="/"), x)
                 for p, x in pairs], str(treedef),
                J.tree.map_with_path(lambda p, x: J.tree_util.keystr(p), tree),
                [repr(p) for p, _ in J.tree.leaves_with_path(tree)])
    _same(program)


def test_key_types_and_registered_nodes_without_keys():
    class Box:
        def __init__(self, *xs):
            self.xs = xs

    def program(J):
        tu = J.tree_util
        tu.register_pytree_node(Box, lambda b: (b.xs, None), lambda _, xs: Box(*xs))
        keys = [tu.DictKey("k"), tu.SequenceKey(3), tu.GetAttrKey("w"), tu.FlattenedIndexKey(2)]
        pairs, _ = tu.tree_flatten_with_path({"box": Box(1, [2])})
        again = [tu.DictKey("k"), tu.SequenceKey(3), tu.GetAttrKey("w"), tu.FlattenedIndexKey(2)]
        return ([(repr(k), str(k), k == k2, hash(k) == hash(k2), k == tu.DictKey("other"))
                 for k, k2 in zip(keys, again)],
            [(tu.keystr(p), x) for p, x in pairs], keys[0].key, keys[1].idx, keys[2].name)
    _same(program)


def test_ordered_and_default_dicts_through_transformations():
    od = collections.OrderedDict([("w", np.float32(2.0)), ("b", np.float32(3.0))])
    dd = collections.defaultdict(int, {"w": np.float32(2.0), "b": np.float32(3.0)})

    def program(J):
        loss = lambda p: p["w"] * p["b"] ** 2
        g_od, g_dd = J.grad(loss)(od), J.jit(J.grad(loss))(dd)
        out = J.vmap(lambda p: J.tree.map(lambda x: x * 2, p))(
            collections.OrderedDict(z=np.ones(3, np.float32), a=np.zeros(3, np.float32)))
        return (type(g_od).__name__, list(g_od.items()), type(g_dd).__name__,
                g_dd.default_factory, sorted(g_dd.items()), type(out).__name__, list(out))
    _same(program)


def test_register_dataclass():
    @dataclasses.dataclass
    class Params:
        w: object
        b: object
        name: str = dataclasses.field(default="p", metadata=dict(static=True))

    @dataclasses.dataclass
    class Pair:
        x: object
        tag: str

    def program(J):
        P = J.tree_util.register_dataclass(
            dataclasses.make_dataclass("Params", [("w", object), ("b", object), (
                "name", str, dataclasses.field(default="p", metadata=dict(static=True)))]))
        Q = dataclasses.make_dataclass("Pair", [("x", object), ("tag", str)])
        J.tree_util.register_dataclass(Q, data_fields=["x"], meta_fields=["tag"])
        p = P(np.float32(2.0), np.float32(3.0), "lin")
        leaves, treedef = J.tree_util.tree_flatten(p)
        g = J.grad(lambda p: p.w * p.b)(p)
        q_leaves, q_def = J.tree_util.tree_flatten_with_path(Q([1, 2], "t"))
        return (leaves, str(treedef), type(g).__name__, g.name, float(g.w), float(g.b),
                [(J.tree_util.keystr(k), v) for k, v in q_leaves], str(q_def))
    _same(program)
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.tree_util.register_dataclass(type("NotADataclass", (), {}))
        with pytest.raises(ValueError):  # a field that is neither data nor meta
            J.tree_util.register_dataclass(Pair, data_fields=["x"], meta_fields=[])


def test_tree_functions():
    def program(J):
        t = {"a": [1, 2], "b": (3,)}
        return (J.tree.map(lambda x, y: x * 10 + y, t, {"a": [5, 6], "b": (7,)}),
                J.tree.map(lambda x: x is None, [None, 1], is_leaf=lambda x: x is None),
                J.tree.reduce(lambda a, b: a + b, t), J.tree.reduce(lambda a, b: a + b, t, 100),
                J.tree.all(t), J.tree.all([1, 0]), J.tree.all([]),
                J.tree.transpose(J.tree.structure([0, 0]), J.tree.structure((0, 0, 0)),
                                 [(1, 2, 3), (4, 5, 6)]),
                J.tree.transpose(J.tree.structure([0, 0]), None, [{"x": 1}, {"x": 2}]),
                J.tree.flatten(t)[0], J.tree.unflatten(J.tree.structure(t), range(3)),
                # the other trees may be deeper than the first one (its leaves are a prefix)
                J.tree.map(lambda x, y: (x, y), [1, 2], [(3, 4), {"k": 5}]),
                J.tree_util.tree_structure(t).flatten_up_to({"a": [[1], 2], "b": (None,)}),
                J.tree_util.tree_structure(t).num_nodes)
    _same(program)


@pytest.mark.parametrize("bad", [
    lambda J: J.tree.map(lambda x, y: x, [1, 2], [1, 2, 3]),
    lambda J: J.tree.map(lambda x, y: x, {"a": 1}, {"b": 1}),
    lambda J: J.tree.map(lambda x, y: x, (1, 2), [1, 2]),
    lambda J: J.tree.unflatten(J.tree.structure([0, 0]), [1]),
    lambda J: J.tree.reduce(lambda a, b: a + b, []),
    lambda J: J.tree.transpose(J.tree.structure([0, 0]), J.tree.structure((0, 0)),
                               [(1, 2), (3,)]),
    lambda J: J.tree_util.register_pytree_node(tuple, lambda t: (t, None), tuple),
])
def test_errors_like_jax(bad):
    with pytest.raises(Exception) as want:
        bad(jax)
    with pytest.raises(want.type):
        bad(minijax)


@pytest.mark.parametrize("flatten", [
    lambda J, t: J.tree_util.tree_flatten(t),
    lambda J, t: J.tree_util.tree_leaves(t),
    lambda J, t: J.tree_util.tree_flatten_with_path(t),
    lambda J, t: J.tree.map(lambda x: x, t),
    lambda J, t: J.tree_util.tree_flatten(collections.defaultdict(list, t)),
])
def test_dict_with_unsortable_keys_raises_jaxs_error(flatten):
    tree = {1: 2.0, "a": 3.0}
    with pytest.raises(Exception) as want:
        flatten(jax, tree)
    with pytest.raises(want.type) as got:
        flatten(minijax, tree)
    assert str(got.value) == str(want.value)


def test_partial_is_a_pytree():
    def program(J):
        add = J.tree_util.Partial(lambda x, y, scale=1.0: (x + y) * scale, np.float32(1.0),
                                  scale=np.float32(3.0))
        call = J.jit(lambda f, y: f(y))
        leaves, treedef = J.tree_util.tree_flatten(add)
        back = J.jit(lambda f: f)(add)
        return (call(add, 2.0), leaves, str(treedef).split("[")[0], type(back).__name__,
                back(np.float32(1.0)), J.tree_util.tree_structure(add) == treedef)
    _same(program)


# ---------------------------------------------------------------------------------------------
# Pytrees through the transformations: what JAX leaves alone comes back as it came
# ---------------------------------------------------------------------------------------------

def _typed(tree, J):
    """Each leaf as (type family, value): arrays of either module compare equal, while a
    Python int/float/str/bool (JAX may return a float subclass) stays distinguishable."""
    def one(x):
        if isinstance(x, (jax.Array, minijax.Array)):
            return ("array", str(x.dtype), np.asarray(x).tolist())
        if isinstance(x, np.ndarray) or isinstance(x, np.generic):
            return ("numpy", np.asarray(x).tolist())
        for t in (bool, int, float, str):
            if isinstance(x, t):
                return (t.__name__, t(x))
        return (type(x).__name__, x)
    return J.tree_util.tree_map(one, tree)


def _same_typed(program):
    got, want = _typed(program(minijax), minijax), _typed(program(jax), jax)
    assert repr(got) == repr(want), (got, want)


AUX = {"n": 3, "f": 1.5, "s": "hi", "none": None, "b": True, "od": collections.OrderedDict(
    z=1, a=2.5)}


@pytest.mark.parametrize("which", ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jit_grad"])
def test_has_aux_payload_passes_through(which):
    def program(J):
        f = lambda x: ((x * x).sum(), dict(AUX, arr=x * 2))
        x = np.arange(3, dtype=np.float32)
        if which == "grad":
            return J.grad(f, has_aux=True)(x)
        if which == "value_and_grad":
            return J.value_and_grad(f, has_aux=True)(x)
        if which == "vjp":
            out, f_vjp, aux = J.vjp(f, x, has_aux=True)
            return out, f_vjp(np.float32(1.0)), aux
        if which == "jvp":
            return J.jvp(f, (x,), (x,), has_aux=True)
        if which == "jacrev":
            return J.jacrev(f, has_aux=True)(x)
        return J.jit(J.grad(lambda x: (f(x)[0], {"arr": f(x)[1]["arr"]}), has_aux=True))(x)
    _same_typed(program)


def test_has_aux_jacfwd_rejects_strings_like_jax():
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.jacfwd(lambda x: (x, {"s": "hi"}), has_aux=True)(np.float32(1.0))


@pytest.mark.parametrize("c", [2.5, 7, True, np.float32(3.0), np.arange(2)])
def test_vmap_unbatched_out_axes_none_passes_through(c):
    def program(J):
        xs = np.ones((3, 2), np.float32)
        return (J.vmap(lambda x, c: (x * 2, c), in_axes=(0, None), out_axes=(0, None))(xs, c),
                J.vmap(lambda x, c: c, in_axes=(0, None), out_axes=None)(xs, c),
                J.vmap(lambda x: 3.0, out_axes=None)(xs),
                J.vmap(lambda x, c: c, in_axes=(0, None))(xs, c))  # out_axes=0: broadcast
    _same_typed(program)


def test_vmap_rejects_string_outputs_like_jax():
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.vmap(lambda x: (x, "s"), out_axes=(0, None))(np.ones(3))


def test_stop_gradient_on_pytrees():
    tree = {"a": np.ones(2, np.float32), "f": 1.5, "i": 3, "ints": np.arange(3, dtype=np.int32),
            "none": None, "t": (2.0, [np.float32(4.0)])}

    def program(J):
        eager = J.lax.stop_gradient(tree)
        jitted = J.jit(lambda t: J.lax.stop_gradient(t))(tree)
        g = J.grad(lambda x: J.lax.stop_gradient({"a": x, "b": 2})["a"] * x
                   + J.lax.stop_gradient(J.numpy.arange(3)).sum() * x)(3.0)
        return eager, jitted, g, type(J.lax.stop_gradient(collections.OrderedDict(b=1.0))
                                      ).__name__
    _same_typed(program)
    def both(J):
        return lambda x: J.lax.stop_gradient((x, J.numpy.arange(2) + 1))
    jaxprs = [str(J.make_jaxpr(both(J))(1.0)) for J in (jax, minijax)]
    assert jaxprs[0].count("stop_gradient") == jaxprs[1].count("stop_gradient") == 2
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.lax.stop_gradient({"s": "not an array"})


@pytest.mark.parametrize("which", ["vjp", "linearize"])
def test_vjp_and_linearize_return_pytrees(which):
    x = np.array([0.5, 1.0, 2.0], np.float32)

    def program(J):
        def make(x):
            if which == "vjp":
                return J.vjp(lambda x: J.numpy.sin(x) * x, x)[1]
            return J.linearize(lambda x: J.numpy.sin(x) * x, x)[1]
        fn = J.jit(make)(x)  # a function returned from jit
        leaves = J.tree_util.tree_leaves(make(x))
        n_res = len(J.make_jaxpr(make)(x).jaxpr.outvars)
        again = J.jit(lambda f, t: f(t))(fn, x)  # and passed into one
        return (type(fn).__name__, fn(x), again, len(leaves), n_res,
                J.tree.map(lambda r: r.shape, leaves))
    _same_typed(program)


def test_vmap_axes_prefixes_follow_the_tree_structure():
    od = collections.OrderedDict(z=np.ones((3, 2), np.float32), a=np.arange(2.0, dtype=np.float32))

    def program(J):
        f = lambda d: collections.OrderedDict(s=d["z"] * d["a"], a=d["a"])
        spec = collections.OrderedDict(z=0, a=None)
        out = J.vmap(f, in_axes=(spec,), out_axes=collections.OrderedDict(s=1, a=None))(od)
        return type(out).__name__, out["s"], out["a"]
    _same_typed(program)
    for bad in [({"z": 0, "a": None},), ([0, 1],)]:  # wrong node type at a prefix position
        arg = od if isinstance(bad[0], dict) else (np.ones(3), np.ones(3))
        for J in (jax, minijax):
            with pytest.raises(ValueError):
                J.vmap(lambda d: d, in_axes=bad)(arg)


# flatten_util.ravel_pytree: one vector of the promoted dtype and the function back
def _ravel_program(J):
    import importlib
    ravel = importlib.import_module(J.__name__ + ".flatten_util").ravel_pytree
    tree = {"a": np.ones((2, 3), np.float32), "b": [np.arange(3, dtype=np.int32), 2.0],
            "c": (np.float16(1.5),)}
    flat, unravel = ravel(tree)
    same, unravel_same = ravel([np.ones(2, np.float32), np.arange(3, dtype=np.float32)])
    empty, unravel_empty = ravel({})
    errors = []
    for bad in (flat[:3], flat.astype(np.int32)):
        try:
            unravel(bad)
        except (TypeError, ValueError) as e:
            errors.append((type(e).__name__, str(e)))
    return (flat, unravel(flat * 2), unravel_same(same.astype(np.float16)), empty,
            unravel_empty(empty), J.jit(lambda t: ravel(t)[0])(tree), errors)


def test_ravel_pytree_as_jax():
    got, want = _ravel_program(minijax), _ravel_program(jax)
    _same(lambda J: got if J is minijax else want)


# ---------------------------------------------------------------------------------------------
# One level at a time, leaves, broadcasting, associative reduction, static nodes
# ---------------------------------------------------------------------------------------------

def _same_repr(f):
    """f(J) with J = jax and J = minijax, compared as printed text."""
    got, want = f(minijax), f(jax)
    assert repr(got) == repr(want), (got, want)


@pytest.mark.parametrize("tree", [[1, (2, 3)], (1, [2]), None, {"b": 1, "a": (2,)},
                                  collections.OrderedDict(z=1, a=2)], ids=repr)
def test_flatten_one_level_as_jax(tree):
    _same_repr(lambda J: [list(c) for c in (J.tree_util.flatten_one_level(tree)[0],)]
          + [J.tree_util.flatten_one_level(tree)[1]])
    _same_repr(lambda J: list(J.tree_util.flatten_one_level_with_keys(tree)[0]))
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="can't tree-flatten type: <class 'int'>"):
            J.tree_util.flatten_one_level(3)


def test_leaf_and_node_predicates_as_jax():
    Point = collections.namedtuple("Point", "x y")
    for typ in (dict, list, tuple, type(None), Point, int, np.ndarray, collections.OrderedDict):
        _same_repr(lambda J, t=typ: J.tree_util.is_tree_node(t))
    for items in ([1, 2.0, np.ones(2)], [1, None], [(1,)], [], [{}]):
        _same_repr(lambda J, it=items: J.tree_util.all_leaves(it))
    _same_repr(lambda J: J.tree_util.all_leaves([(1,), 2], is_leaf=lambda x: isinstance(x, tuple)))
    _same_repr(lambda J: J.tree_util.treedef_tuple(
        [J.tree_util.tree_structure(1), J.tree_util.tree_structure({"a": (1, 2)})]))


def test_broadcast_and_reduce_associative_as_jax():
    full = ((3, 4), {"a": 5, "b": (6, 7)}, [8])
    _same_repr(lambda J: J.tree_util.tree_broadcast((1, 2, 3), full))
    _same_repr(lambda J: J.tree.broadcast((1, {"a": 0, "b": 9}, [2]), full))
    for J in (jax, minijax):
        with pytest.raises(ValueError):
            J.tree_util.tree_broadcast((1, 2), full)
    # the association order is part of the contract: string concatenation shows it
    for n in range(1, 8):
        _same_repr(lambda J, n=n: J.tree.reduce_associative(lambda a, b: f"({a}+{b})",
                                                       list(range(n))))
    _same_repr(lambda J: J.tree_util.tree_reduce_associative(lambda a, b: a + b, [], identity=0))
    for J in (jax, minijax):
        with pytest.raises(TypeError, match="Must specify identity"):
            J.tree_util.tree_reduce_associative(lambda a, b: a + b, [])


def test_register_static_and_tree_static_as_jax():
    for J in (jax, minijax):
        @J.tree_util.register_static
        class Mode:
            def __init__(self, name):
                self.name = name

            def __hash__(self):
                return hash(self.name)

            def __eq__(self, other):
                return isinstance(other, Mode) and other.name == self.name

        tree = {"mode": Mode("train"), "w": np.ones(2, np.float32)}
        leaves, treedef = J.tree_util.tree_flatten(tree)
        assert len(leaves) == 1 and treedef.unflatten(leaves)["mode"].name == "train"
        out = J.jit(lambda t: t["w"] * (2.0 if t["mode"].name == "train" else 0.0))(tree)
        np.testing.assert_array_equal(np.asarray(out), [2.0, 2.0])

        @dataclasses.dataclass
        class Layer:
            w: np.ndarray
            act: str = J.tree.static(default="relu")

        J.tree_util.register_dataclass(Layer)
        leaves, treedef = J.tree_util.tree_flatten(Layer(np.zeros(3)))
        assert len(leaves) == 1 and treedef.unflatten(leaves).act == "relu"


def test_custom_node_with_unhashable_aux_data_as_jax():
    # JAX hashes a custom node by its type and compares its aux data with ==: a dict of aux
    # data works as a jit argument, and a changed value retraces
    class Box:
        def __init__(self, x, mul):
            self.x, self.mul = x, mul

    def program(J):
        J.tree_util.register_pytree_node(Box, lambda b: ((b.x,), {"mul": b.mul}),
                                         lambda aux, ch: Box(*ch, **aux))
        traces = []

        @J.jit
        def calc(b, y):
            traces.append(b.mul)
            return b.x * y if b.mul else y
        out = [calc(Box(2.0, True), 3.0), calc(Box(2.0, True), 3.0), calc(Box(2.0, False), 3.0)]
        s1, s2 = J.tree_util.tree_structure(Box(1, True)), J.tree_util.tree_structure(Box(1, True))
        return [float(o) for o in out], traces, s1 == s2, hash(s1) == hash(s2)
    assert program(minijax) == program(jax)
