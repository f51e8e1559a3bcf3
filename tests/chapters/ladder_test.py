"""The build-your-own-JAX ladder (chapters/ladder/README.md): one package, `tinyjax`, grown
rung by rung, each rung's module importing the earlier ones. Every test runs on the reference
solution (chapters/ladder/solution/tinyjax) against real JAX; with MINIJAX_LADDER=mine it runs
on the learner's copy instead (`make ladder` makes it, in chapters/exercises/mine/ladder/).

The skeleton a learner starts from is the solution with each `# BUILD rung N` block cut out
(tools/ladder.py): the last tests check that it imports and fails each rung with a message
naming the rung.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
LADDER = ROOT / "chapters" / "ladder"
MINE = ROOT / "chapters" / "exercises" / "mine" / "ladder"
LEARNER = os.environ.get("MINIJAX_LADDER") == "mine"


def load_package(root: Path, name: str):
    """Import `root/tinyjax` under the module name `name` (so several copies can coexist)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, root / "tinyjax" / "__init__.py", submodule_search_locations=[str(root / "tinyjax")])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    spec.loader.exec_module(pkg)
    for mod in ("core", "jaxpr", "jvp", "vmap", "linearize", "grad", "tree", "jit",
                "control_flow", "pallas", "named", "mlp"):
        setattr(pkg, mod, importlib.import_module(f"{name}.{mod}"))
    return pkg


@pytest.fixture(scope="module")
def tj():
    if LEARNER:
        return load_package(MINE, "tinyjax_mine")
    return load_package(LADDER / "solution", "tinyjax_solution")


RNG = np.random.RandomState(0)
X3 = RNG.randn(3).astype(np.float32)
Y3 = RNG.randn(3).astype(np.float32)
M23 = RNG.randn(2, 3).astype(np.float32)
M34 = RNG.randn(3, 4).astype(np.float32)


def ops(J):
    """The same operations in tinyjax (a package) and in JAX (J is jax)."""
    if J is jax:
        return dict(sin=jnp.sin, cos=jnp.cos, exp=jnp.exp, log=jnp.log, neg=jnp.negative,
                    add=jnp.add, mul=jnp.multiply, maximum=jnp.maximum, dot=jnp.dot,
                    sum=lambda x, axes: jnp.sum(x, axes), T=lambda x, p: jnp.transpose(x, p),
                    select=jnp.where, greater=jnp.greater,
                    bcast=lambda x, s, d: jax.lax.broadcast_in_dim(x, s, d))
    c = J.core
    return dict(sin=c.sin, cos=c.cos, exp=c.exp, log=c.log, neg=c.neg, add=c.add, mul=c.mul,
                maximum=c.maximum, dot=c.dot, sum=c.reduce_sum, T=c.transpose, select=c.select,
                greater=c.greater, bcast=c.broadcast_in_dim)


# programs of one f32[3] argument, written once for both libraries
PROGRAMS = {
    "sin_mul_add": lambda o, x: o["add"](o["mul"](o["sin"](x), x), o["cos"](x)),
    "exp_log": lambda o, x: o["log"](o["add"](o["exp"](x), o["exp"](o["neg"](x)))),
    "relu_select": lambda o, x: o["select"](o["greater"](x, np.zeros(3, np.float32)),
                                            o["maximum"](x, o["sin"](x)), o["mul"](x, x)),
    "matvec_sum": lambda o, x: o["sum"](o["mul"](o["dot"](M23, x), o["dot"](M23, x)), (0,)),
    "broadcast_transpose": lambda o, x: o["sum"](o["mul"](o["T"](o["bcast"](x, (2, 3), (1,)),
                                                                 (1, 0)), M23.T), (0, 1)),
}


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --------------------------------------------------------------------------- rung 1: eval
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung01_eval(tj, name):
    close(PROGRAMS[name](ops(tj), X3), PROGRAMS[name](ops(jax), X3))


def test_rung01_set_current_trace_restores(tj):
    before = tj.core.current_trace()
    with pytest.raises(RuntimeError, match="inside"):
        with tj.core.set_current_trace(tj.core.EvalTrace()):
            raise RuntimeError("inside the block")
    assert tj.core.current_trace() is before


# --------------------------------------------------------------------------- rung 2: jaxpr
def test_rung02_jaxpr_prints_as_jax(tj):
    def f(o, x, y):
        return o["add"](o["mul"](o["sin"](x), y), o["neg"](o["exp"](x)))
    got = str(tj.jaxpr.make_jaxpr(lambda x, y: f(ops(tj), x, y))(X3, Y3))
    want = str(jax.make_jaxpr(lambda x, y: f(ops(jax), x, y))(X3, Y3))
    assert got.split() == want.split(), (got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung02_eval_jaxpr(tj, name):
    jaxpr, consts, _ = tj.jaxpr.trace_to_jaxpr(lambda x: PROGRAMS[name](ops(tj), x),
                                               [((3,), np.dtype(np.float32))])
    close(tj.jaxpr.eval_jaxpr(jaxpr, consts, X3)[0], PROGRAMS[name](ops(jax), X3))


# --------------------------------------------------------------------------- rung 3: jvp
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung03_jvp(tj, name):
    got = tj.jvp.jvp(lambda x: PROGRAMS[name](ops(tj), x), (X3,), (Y3,))
    want = jax.jvp(lambda x: PROGRAMS[name](ops(jax), x), (X3,), (Y3,))
    for g, w in zip(got, want):
        close(g, w, 1e-4)


# --------------------------------------------------------------------------- rung 4: vmap
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung04_vmap(tj, name):
    xs = RNG.randn(3, 5).astype(np.float32)
    got = tj.vmap.vmap(lambda x: PROGRAMS[name](ops(tj), x), 1)(xs)
    close(got, jax.vmap(lambda x: PROGRAMS[name](ops(jax), x), 1)(xs))


def test_rung04_vmap_unbatched_and_batched_matmul(tj):
    w = RNG.randn(4, 3, 2).astype(np.float32)
    xs = RNG.randn(4, 3).astype(np.float32)
    close(tj.vmap.vmap(tj.core.dot)(xs, w), jax.vmap(jnp.dot)(xs, w))
    close(tj.vmap.vmap(tj.core.dot, (0, None))(xs, w[0]), jax.vmap(jnp.dot, (0, None))(xs, w[0]))


# --------------------------------------------------------------------------- rung 5: linearize
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung05_linearize_records_only_tangent_work(tj, name):
    out, f_lin, (jaxpr, _) = tj.linearize.linearize(lambda x: PROGRAMS[name](ops(tj), x), X3)
    want_out, want_lin = jax.linearize(lambda x: PROGRAMS[name](ops(jax), x), X3)
    close(out, want_out)
    close(f_lin(Y3), want_lin(Y3), 1e-4)
    # the primal half was computed, not recorded: no sin, cos, exp or log in the jaxpr
    assert not {e.prim.name for e in jaxpr.eqns} & {"sin", "cos", "exp", "log", "gt"}


# --------------------------------------------------------------------------- rung 6: grad
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung06_grad(tj, name):
    def scalar(o, x):
        y = PROGRAMS[name](o, x)
        return y if np.ndim(y) == 0 or getattr(y, "shape", None) == () else o["sum"](y, (0,))
    close(tj.grad.grad(lambda x: scalar(ops(tj), x))(X3),
          jax.grad(lambda x: scalar(ops(jax), x))(X3), 1e-4)


def test_rung06_grad_of_a_layer(tj):
    def f(o, w, x):
        h = o["maximum"](o["dot"](x, w), np.zeros((2, 4), np.float32))
        return o["sum"](o["mul"](h, h), (0, 1))
    close(tj.grad.grad(lambda w, x: f(ops(tj), w, x))(M34, M23),
          jax.grad(lambda w, x: f(ops(jax), w, x))(M34, M23), 1e-4)


# --------------------------------------------------------------------------- rung 7: pytrees
def test_rung07_flatten_and_value_and_grad_on_a_dict(tj):
    tree = {"b": [1.0, (2.0, None)], "a": 3.0}
    leaves, treedef = tj.tree.tree_flatten(tree)
    assert leaves == jax.tree_util.tree_leaves(tree)
    assert tj.tree.tree_unflatten(treedef, leaves) == tree
    params = {"w": M34, "v": X3}

    def loss(o, p, x):
        rows = o["add"](o["dot"](o["dot"](x, p["w"]), np.ones(4, np.float32)),
                        o["dot"](x, p["v"]))
        return o["sum"](o["mul"](rows, rows), (0,))
    val, g = tj.tree.value_and_grad(lambda p, x: loss(ops(tj), p, x))(params, M23)
    wval, wg = jax.value_and_grad(lambda p, x: loss(ops(jax), p, x))(params, M23)
    close(val, wval)
    for k in params:
        close(g[k], wg[k], 1e-4)


# --------------------------------------------------------------------------- rung 8: jit
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rung08_jit_runs_on_xla(tj, name):
    f = tj.jit.jit(lambda x: PROGRAMS[name](ops(tj), x))
    close(f(X3), PROGRAMS[name](ops(jax), X3))
    close(f(Y3), PROGRAMS[name](ops(jax), Y3))
    assert len(f.cache) == 1  # the second call reused the executable


def test_rung08_lowering_is_stablehlo(tj):
    jaxpr, _, _ = tj.jaxpr.trace_to_jaxpr(lambda x: tj.core.sin(x), [((3,), np.float32)])
    text = tj.jit.lower(jaxpr)
    assert "stablehlo.sine" in text and '"main"' in text


# --------------------------------------------------------------------------- rung 9: cond
def _cond_program(J, p, x):
    o = ops(J)
    if J is jax:
        return jax.lax.cond(p, lambda x: o["sin"](o["mul"](x, M23[0])), lambda x: o["mul"](x, x), x)
    return J.control_flow.cond(p, lambda x: o["sin"](o["mul"](x, M23[0])),
                               lambda x: o["mul"](x, x), x)


@pytest.mark.parametrize("pred", [True, False])
def test_rung09_cond_value_jvp_grad(tj, pred):
    close(_cond_program(tj, pred, X3), _cond_program(jax, pred, X3))
    got = tj.jvp.jvp(lambda x: _cond_program(tj, pred, x), (X3,), (Y3,))
    want = jax.jvp(lambda x: _cond_program(jax, pred, x), (X3,), (Y3,))
    for g, w in zip(got, want):
        close(g, w, 1e-5)
    loss = lambda J: (lambda x: ops(J)["sum"](_cond_program(J, pred, x), (0,)))
    close(tj.grad.grad(loss(tj))(X3), jax.grad(loss(jax))(X3), 1e-5)


def test_rung09_cond_is_one_equation_and_batches(tj):
    jaxpr = tj.jaxpr.make_jaxpr(lambda x: _cond_program(tj, True, x))(X3)
    assert [e.prim.name for e in jaxpr.eqns] == ["cond"]
    preds = np.array([True, False, True])
    xs = RNG.randn(3, 3).astype(np.float32)
    close(tj.vmap.vmap(lambda p, x: _cond_program(tj, p, x))(preds, xs),
          jax.vmap(lambda p, x: _cond_program(jax, p, x))(preds, xs))
    with pytest.raises(TypeError, match="cond branches differ"):
        tj.control_flow.cond(True, lambda x: x, lambda x: tj.core.reduce_sum(x, (0,)), X3)


# --------------------------------------------------------------------------- rung 10: pallas
def _pallas(J):
    if J is jax:
        from jax.experimental import pallas as pl
        return pl, lambda kernel, shape, **kw: pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct(*shape), interpret=True, **kw)
    return J.pallas, J.pallas.pallas_call


A46 = RNG.randn(4, 6).astype(np.float32)
B68 = RNG.randn(6, 8).astype(np.float32)


def _scale_by_program_id(J):
    pl, pallas_call = _pallas(J)
    o = ops(J)

    def kernel(x_ref, o_ref):  # (a kernel may not capture arrays: the scale is built here)
        block = x_ref[...]
        o_ref[...] = o["mul"](block, block * 0 + (1 + pl.program_id(0)))
    return pallas_call(kernel, ((4, 4), np.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((2, 4), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((2, 4), lambda i: (i, 0)))(A46[:, :4])


def _tiled_matmul(J):
    pl, pallas_call = _pallas(J)
    o = ops(J)

    def kernel(a_ref, b_ref, o_ref):  # one (2, 4) tile of the product per grid point
        o_ref[...] = o["dot"](a_ref[...], b_ref[...])
    return pallas_call(kernel, ((4, 8), np.float32), grid=(2, 2),
                       in_specs=[pl.BlockSpec((2, 6), lambda i, j: (i, 0)),
                                 pl.BlockSpec((6, 4), lambda i, j: (0, j))],
                       out_specs=pl.BlockSpec((2, 4), lambda i, j: (i, j)))(A46, B68)


@pytest.mark.parametrize("kernel", [_scale_by_program_id, _tiled_matmul],
                         ids=["scale_by_program_id", "tiled_matmul"])
def test_rung10_pallas_call_interpret_matches_jax(tj, kernel):
    close(kernel(tj), kernel(jax), 1e-5)
    with pytest.raises(RuntimeError, match="outside a pallas_call"):
        tj.pallas.program_id(0)


# --------------------------------------------------------------------------- rung 11: named axes
def test_rung11_psum_and_shard_map(tj):
    xs = RNG.randn(4, 3).astype(np.float32)
    got = tj.named.vmap_named(lambda x: tj.core.mul(x, tj.named.psum(x, "i")), "i")(xs)
    want = jax.vmap(lambda x: x * jax.lax.psum(x, "i"), axis_name="i")(xs)
    close(got, want)
    x = RNG.randn(8, 3).astype(np.float32)
    got = tj.named.shard_map(lambda b: tj.core.add(b, tj.named.psum(b, "d")), 4, "d")(x)
    blocks = x.reshape(4, 2, 3)
    close(got, (blocks + blocks.sum(0)).reshape(8, 3))
    with pytest.raises(NameError, match="unbound axis name"):
        tj.named.psum(X3, "i")


# --------------------------------------------------------------------------- rung 12: the MLP
def test_rung12_mlp_trains_and_its_gradient_is_jaxs(tj):
    rng = np.random.RandomState(1)
    x = rng.randn(64, 3).astype(np.float32)
    y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
    params = tj.mlp.init(0, [3, 16, 1])

    def jax_loss(p):
        h = x
        for i, layer in enumerate(p):
            h = h @ layer["w"] + layer["b"]
            h = jnp.maximum(h, 0) if i < len(p) - 1 else h
        return jnp.mean((h - y) ** 2)
    val, grads = tj.tree.value_and_grad(tj.mlp.loss)(params, x, y)
    wval, wgrads = jax.value_and_grad(jax_loss)(params)
    close(val, wval)
    for g, w in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(wgrads)):
        close(g, w, 1e-4)
    _, losses = tj.mlp.train(x, y, [3, 16, 1], steps=60, lr=0.1)
    assert losses[-1] < 0.3 * losses[0], losses[::10]


# --------------------------------------------------------------------------- the skeleton
@pytest.fixture(scope="module")
def skeleton(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        ladder = importlib.import_module("ladder")
    finally:
        sys.path.pop(0)
    dest = tmp_path_factory.mktemp("skeleton")
    ladder.write_skeleton(dest)
    return load_package(dest, "tinyjax_skeleton")


@pytest.mark.skipif(LEARNER, reason="checks the tracked skeleton, not the learner's copy")
def test_skeleton_imports_and_each_rung_says_what_to_build(skeleton):
    sk = skeleton
    probes = {
        1: lambda: sk.core.sin(X3),
        2: lambda: sk.jaxpr.eval_jaxpr(None, [], X3),
        5: lambda: sk.linearize.linearize(lambda x: x, X3),
        6: lambda: sk.grad.backward_pass(None, [], X3),
        7: lambda: sk.tree.tree_flatten({"a": 1}),
        8: lambda: sk.jit._lowering_rules(None, None),
        9: lambda: sk.control_flow._cond_impl(True, X3, branches=(None, None), n_consts=(0, 0)),
        10: lambda: sk.pallas.Ref(np.zeros(2), (slice(0, 1),))[...],
        11: lambda: sk.named._psum_batch_rule(None, [X3], [0], axis_name="i"),
        12: lambda: sk.mlp.train(M23, M23, [3, 1]),
    }
    for rung, probe in probes.items():
        with pytest.raises(NotImplementedError, match=f"rung {rung}\\b"):
            probe()
    assert sk.jvp.jvp_rules.keys() <= {sk.control_flow.cond_p}  # later rungs add theirs
    assert sk.vmap.batch_rules.keys() <= {sk.named.psum_p, sk.control_flow.cond_p}
    assert sk.grad.transpose_rules == {}
    # every block was cut (a marker the tool does not recognise would leave a solution in)
    for f in Path(sk.__file__).parent.glob("*.py"):
        assert "# BUILD" not in f.read_text() and "# END BUILD" not in f.read_text(), f
