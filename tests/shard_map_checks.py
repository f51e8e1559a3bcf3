"""The checks of tests/shard_map_test.py, run in one child process with 8 CPU devices.

XLA_FLAGS must give 8 host devices before JAX is imported, so this file is a script (run by
shard_map_test.py), not a test module. Each `check_*` runs one program through JAX and
minijax (`def program(J)`) and compares; the script prints one JSON line:
{"passed": [...], "failed": {name: traceback}}.
"""

from eight_devices import request_eight_devices, run_checks

request_eight_devices()  # before JAX is imported

import re  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import minijax  # noqa: E402

MODULES = (jax, minijax)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.standard_normal((16, 2)).astype(np.float32)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def mesh2(J):
    return J.make_mesh((4, 2), ("x", "y"), axis_types=(J.sharding.AxisType.Auto,) * 2)


def mesh1(J):
    return J.make_mesh((8,), ("i",), axis_types=(J.sharding.AxisType.Auto,))


def smap(J, f, mesh, in_specs, out_specs, **kw):
    return J.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)


def close(a, b, tol=1e-5):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb), (len(la), len(lb))
    for u, v in zip(la, lb):
        u, v = np.asarray(u), np.asarray(v)
        assert u.shape == v.shape and u.dtype == v.dtype, (u.shape, v.shape, u.dtype, v.dtype)
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


def both(program):
    return [program(J) for J in MODULES]


def raises(fn):
    try:
        fn()
    except Exception as e:  # the kind and message are what is compared
        return type(e).__name__, str(e)
    return None, None


def collectives_program(J):
    L, P = J.lax, J.sharding.PartitionSpec

    def body(a, b):
        return (L.psum(a, "x"), L.pmax(a, ("x", "y")), L.pmin(a, "y"), L.pmean(a, "x"),
                L.all_gather(a, "y", tiled=True), L.all_gather(a, "x", axis=1),
                L.psum_scatter(b, "x", scatter_dimension=0, tiled=True),
                L.psum_scatter(b[:2], "y", scatter_dimension=0),
                L.ppermute(a, "x", [(i, (i + 1) % 4) for i in range(4)]),
                L.ppermute(a, ("x", "y"), [(0, 7), (7, 0)]),
                L.all_to_all(b, "x", 0, 1, tiled=True),
                L.all_to_all(b, "x", 0, 0, tiled=True),
                L.all_to_all(b, "x", 0, 1),
                L.axis_index("y")[None], L.axis_index(("x", "y"))[None],
                np.float32(L.axis_size("x")) + 0 * a)
    specs = (P("x", "y"), P("x"))
    outs = (P(None, "y"), P(), P("x"), P(None, "y"), P("x", "y"), P(None, "x", "y"),
            P("x", "y"), P(("x", "y")), P("x", "y"), P("x", "y"), P("x", "y"), P("x", "y"),
            P("x", "y"), P(("x", "y")), P(("x", "y")), P("x", "y"))
    f = smap(J, body, mesh2(J), specs, outs)
    return f(X, Y), J.jit(f)(X, Y)


def check_collective_values():
    (j_eager, j_jit), (m_eager, m_jit) = both(collectives_program)
    close(j_jit, m_jit)
    close(j_eager, m_eager)
    close(m_eager, m_jit)


def check_lowering_mirrors_jax():
    """sdy.manual_computation with the same shardings, manual axes and replica groups."""
    def program(J):
        L, P = J.lax, J.sharding.PartitionSpec
        body = lambda a, b: (L.psum(a, "x"), L.all_gather(a, "y", tiled=True),
                             L.psum_scatter(b, "x", tiled=True),
                             L.ppermute(a, "x", [(0, 1), (1, 2), (2, 3), (3, 0)]),
                             L.all_to_all(b, "x", 0, 0, tiled=True))
        f = smap(J, body, mesh2(J), (P("x", "y"), P("x")),
                 (P(None, "y"), P("x", "y"), P("x"), P("x", "y"), P("x")))
        return J.jit(f).lower(X, Y).as_text()
    texts = both(program)
    pat = re.compile(r"(sdy\.manual_computation.*?manual_axes=\{[^}]*\}|"
                     r"\"stablehlo\.\w+\"|replica_groups = dense<[^>]*>|"
                     r"source_target_pairs = dense<[^>]*>|split_count = \d+|"
                     r"(?:all_gather_dim|scatter_dimension) = \d+|sdy\.mesh @mesh = <[^>]*>)")
    j, m = (pat.findall(t) for t in texts)
    assert j == m, (j, m)
    assert len(j) >= 12


def count_collectives(hlo: str) -> dict:
    ops = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
    return {o: len(re.findall(rf"= [^=]*\b{o}(?:-start)?\(", hlo)) for o in ops}


def check_compiled_collectives_match():
    def program(J):
        f = J.jit(smap(J, lambda a: (J.lax.psum(a, "i"), J.lax.ppermute(
            a, "i", [(k, (k + 1) % 8) for k in range(8)])), mesh1(J), J.P("i"),
            (J.P(), J.P("i"))))
        return count_collectives(f.lower(X).compile().as_text())
    j, m = both(program)
    assert j == m and j["all-reduce"] == 1 and j["collective-permute"] == 1, (j, m)


def dp_loss(J):
    jnp, L, P = J.numpy, J.lax, J.sharding.PartitionSpec

    def loss(w, x):
        body = lambda wb, xb: L.psum(jnp.sum(jnp.tanh(xb @ wb) ** 2), "i")
        return smap(J, body, mesh1(J), (P(), P("i")), P())(w, x)
    return loss


def check_grad_of_replicated_params():
    """grad through shard_map sums the gradient of a P() input over devices, as JAX does."""
    def program(J):
        loss = dp_loss(J)
        return (loss(W, X), J.grad(loss)(W, X), J.jit(J.grad(loss, argnums=(0, 1)))(W, X),
                J.jvp(lambda w: loss(w, X), (W,), (np.ones_like(W),)))
    j, m = both(program)
    close(j, m, 1e-4)
    ref = jax.grad(lambda w, x: jax.numpy.sum(jax.numpy.tanh(x @ w) ** 2))(W, X)
    close(m[1], ref, 1e-4)


def canonical_jaxpr(text: str) -> str:
    """Variables renamed in order of binding; JAX's `reshard` of a literal (the `1.0` that
    seeds grad) replaced by the literal itself."""
    for var, lit in re.findall(r"^\s*(\w+):\S+ = reshard (\S+)\n", text, re.M):
        text = re.sub(rf"^\s*{var}:\S+ = reshard \S+\n", "", text, flags=re.M)
        text = re.sub(rf"(?<![\w']){var}(?![\w'=:])", lit, text)
    names = dict.fromkeys(re.findall(r"(?<![\w'])([a-z]+):[a-z]+\d*\[", text))
    canon = {v: f"v{i}" for i, v in enumerate(names)}
    keep = r"\{V:[^}]*\}|axis_name=\w+|"  # axis names, left as they are
    return re.sub(keep + r"(?<![\w'.:])([a-z]+)(?![\w'=(])",
                  lambda m: canon.get(m.group(1), m.group(1)) if m.group(1) else m.group(0),
                  text)


def check_grad_jaxpr_is_jaxs():
    """The gradient's jaxpr is JAX's: a pvary forward and a psum backward, typed as JAX's;
    the forward shard_map returns residuals first, a residual that is an input is passed
    straight on, and the transposed shard_map takes its cotangent first."""
    texts = [str(J.make_jaxpr(J.grad(dp_loss(J)))(W, X)) for J in MODULES]
    for t in texts:
        assert t.count("pvary[") >= 1 and t.count("psum_invariant[") >= 2, t
    j, m = map(canonical_jaxpr, texts)
    assert j == m, f"\n{j}\n{m}"


def check_fsdp_schedule_is_jaxs():
    """XLA orders the compiled FSDP step as JAX's: the loss all-reduce after the first
    backward matmuls (it follows the order of the residuals and outputs in the program)."""
    rng = np.random.default_rng(1)
    w1, w2, xs = (rng.standard_normal(s, np.float32) for s in ((8, 16), (16, 8), (16, 8)))

    def program(J):
        L, jnp = J.lax, J.numpy

        def body(w1s, w2s, xb):
            h = jnp.maximum(xb @ L.all_gather(w1s, "i", tiled=True), 0.0)
            return L.psum(jnp.sum((h @ L.all_gather(w2s, "i", tiled=True)) ** 2), "i")
        f = smap(J, body, mesh1(J), (J.P("i"),) * 3, J.P())
        hlo = J.jit(J.value_and_grad(f, argnums=(0, 1))).lower(w1, w2, xs).compile().as_text()
        return re.findall(r"^\s*%\S+ = \S+ ([\w-]+)\(", hlo[hlo.index("ENTRY"):], re.M)
    j, m = both(program)
    assert j == m and "all-reduce" in j and j.index("all-reduce") > j.index("dot"), (j, m)


def check_jaxpr_text_with_vma():
    def program(J):
        P = J.sharding.PartitionSpec
        f = smap(J, lambda a, w: J.lax.psum(J.numpy.sin(a) * w, "x"), mesh2(J),
                 (P("x", "y"), P()), P(None, "y"))
        return str(J.make_jaxpr(f)(X, X[:2, :2]))
    j, m = both(program)
    assert j == m, f"\n{j}\n{m}"


def check_transposes():
    """vjp of each linear collective (the transpose pairs), against JAX."""
    def program(J):
        L, P, jnp = J.lax, J.sharding.PartitionSpec, J.numpy
        m = mesh1(J)
        sq = np.tile(X, (1, 2))
        fs = [
            smap(J, lambda a: L.all_gather(a, "i", tiled=True) * jnp.arange(8.)[:, None],
                 m, P("i"), P("i")),
            smap(J, lambda a: L.psum_scatter(a, "i", tiled=True) ** 2, m, P(), P("i")),
            smap(J, lambda a: L.ppermute(a, "i", [(k, (k + 3) % 8) for k in range(8)])
                 * jnp.arange(1., 3.)[:, None], m, P("i"), P("i")),
            smap(J, lambda a: L.all_to_all(a, "i", 0, 1, tiled=True) * jnp.arange(2.)[:, None],
                 m, P(None, "i"), P(None, "i")),
            smap(J, lambda a: L.psum(a, "i") * 3.0, m, P("i"), P()),
        ]
        args = [X, X, X, sq, X]
        return [J.grad(lambda a, f=f: (f(a) ** 2).sum())(a) for f, a in zip(fs, args)]
    j, m = both(program)
    close(j, m, 1e-4)


def check_jaxprs_typecheck_after_each_transformation():
    """check_jaxpr (with shard_map's own typecheck rule, which binds the body's axis names)
    on the jaxprs of f, jvp(f), grad(f) and vmap(f); and the primal/tangent jvp values."""
    from minijax import core as mcore
    P, L, jnp = minijax.P, minijax.lax, minijax.numpy
    f = smap(minijax, lambda a, w: L.psum_scatter(jnp.tanh(L.all_gather(a, "i", tiled=True) @ w)
                                                  , "i", tiled=True), mesh1(minijax),
             (P("i"), P()), P("i"))
    g = lambda a: jnp.sum(f(a, W) ** 2)
    for closed in (minijax.make_jaxpr(f)(X, W),
                   minijax.make_jaxpr(lambda a: minijax.jvp(g, (a,), (a,)))(X),
                   minijax.make_jaxpr(minijax.grad(g))(X),
                   minijax.make_jaxpr(minijax.vmap(f, in_axes=(0, None)))(np.stack([X, X]), W)):
        mcore.check_jaxpr(closed.jaxpr)
    jf = jax.shard_map(lambda a, w: jax.lax.psum_scatter(jax.numpy.tanh(
        jax.lax.all_gather(a, "i", tiled=True) @ w), "i", tiled=True), mesh=mesh1(jax),
        in_specs=(jax.P("i"), jax.P()), out_specs=jax.P("i"))
    jg = lambda a: jax.numpy.sum(jf(a, W) ** 2)
    close(minijax.jvp(g, (X,), (X,)), jax.jvp(jg, (X,), (X,)), 1e-4)


def check_grads_finite_differences():
    from minijax.public_test_util import check_grads
    L, P, jnp = minijax.lax, minijax.P, minijax.numpy
    m = mesh1(minijax)
    f = smap(minijax, lambda a, w: L.psum_scatter(jnp.tanh(L.all_gather(a, "i", tiled=True)
                                                           @ w), "i", tiled=True),
             m, (P("i"), P()), P("i"))
    check_grads(f, (X, W), order=1, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)


def check_all_gather_invariant():
    """to='invarying': typed as replicated (so out_specs=P() holds), and its transpose."""
    def program(J):
        P, L = J.sharding.PartitionSpec, J.lax
        f = smap(J, lambda a: L.all_gather(a, "i", tiled=True, to="invarying") * 2.0,
                 mesh1(J), P("i"), P())
        g = smap(J, lambda a: L.all_gather(a, "i", to="invarying") ** 2, mesh1(J), P("i"), P())
        types = str(J.make_jaxpr(f)(X)).count("{V:i}")
        return (f(X), J.grad(lambda a: (f(a) * np.arange(4.0)).sum())(X),
                J.grad(lambda a: g(a).sum())(X), types)
    j, m = both(program)
    close(j[:3], m[:3])
    assert j[3] == m[3], (j[3], m[3])


def check_partial_manual_axis_names():
    """axis_names={'x'} on a 4 x 2 mesh: manual along x, the partitioner splits along y."""
    def program(J):
        P, L, jnp = J.sharding.PartitionSpec, J.lax, J.numpy
        body = lambda a: (L.psum(a, "x"), L.axis_index("x")[None],
                          L.ppermute(a, "x", [(0, 1), (1, 0), (2, 3), (3, 2)]),
                          jnp.sin(a) @ jnp.ones((4, 6)))
        f = smap(J, body, mesh2(J), P("x"), (P(), P("x"), P("x"), P("x")), axis_names={"x"})
        text = J.jit(f).lower(X).as_text()
        manual = [ln.strip() for ln in text.splitlines() if "manual_computation" in ln]
        return (J.jit(f)(X), J.grad(lambda a: f(a)[0].sum() + (f(a)[3] ** 2).sum())(X)), manual
    (j, jt), (m, mt) = both(program)
    close(j, m, 1e-4)
    assert jt == mt and len(mt) == 2, (jt, mt)


def check_control_flow_inside():
    """Loops and cond in a body: carries that start invariant (zeros_like is as varying as
    its operand, as in JAX), values and gradients against JAX."""
    def program(J):
        P, L, jnp = J.sharding.PartitionSpec, J.lax, J.numpy
        bodies = [lambda a: L.fori_loop(0, 3, lambda i, c: c + a, jnp.zeros_like(a)),
                  lambda a: L.fori_loop(0, 2, lambda i, c: c * 2 + L.psum(c, "i"), a),
                  lambda a: L.scan(lambda c, r: (c + r, c * r), a[0], a)[1],
                  lambda a: L.cond(L.axis_index("i") > 3, lambda t: t * 2, lambda t: t - 1, a)]
        outs = []
        for b in bodies:
            f = smap(J, b, mesh1(J), P("i"), P("i"))
            outs.append((J.jit(f)(X), J.grad(lambda a, f=f: (f(a) ** 2).sum())(X)))
        return outs
    j, m = both(program)
    close(j, m, 1e-4)


def check_cond_branches_vma():
    """Branches of cond/switch that differ in vma: JAX's TypeError (with a pcast hint that,
    applied, makes the program run in both); branches that agree: JAX's jaxpr and values."""
    R = X[:1] * 0 + 1.0

    def programs(J, fixed=False):
        P, L = J.sharding.PartitionSpec, J.lax
        fix = (lambda v: L.pcast(v, "i", to="varying")) if fixed else (lambda v: v)
        bodies = [lambda a, r: L.cond(r.sum() > 0, lambda: a, lambda: fix(r)),
                  lambda a, r: L.switch(r[0, 0].astype(np.int32), [lambda: a, lambda: fix(r)]),
                  lambda a, r: L.cond(r.sum() > 0, lambda: fix(L.psum(a, "i")), lambda: a)]
        return [smap(J, b, mesh1(J), (P("i"), P()), P("i")) for b in bodies]
    norm = lambda m: re.search(r"The output of .*? do not match\.", m.replace(
        "float32", "f32").replace("branch1", "branch 1")).group(0)
    for fj, fm in zip(programs(jax), programs(minijax)):
        (kj, mj), (km, mm) = (raises(lambda f=f: f(X, R)) for f in (fj, fm))
        assert kj == km == "TypeError" and norm(mj) == norm(mm), (mj, mm)
        assert "manual axis types do not match" in mm and "pcast(..., ('i',)" in mm, mm
    for fj, fm in zip(programs(jax, True), programs(minijax, True)):
        close(fj(X, R), fm(X, R))

    def agreeing(J):
        P, L = J.sharding.PartitionSpec, J.lax
        f = smap(J, lambda a, r: (L.cond(r.sum() > 0, lambda: a, lambda: a * 2),
                                  L.cond(r.sum() > 0, lambda: r, lambda: r * 2)),
                 mesh1(J), (P("i"), P()), (P("i"), P()))
        return canonical_jaxpr(str(J.make_jaxpr(f)(X, R))), J.jit(f)(X, R)
    (tj, vj), (tm, vm) = both(agreeing)
    assert tj == tm, f"\n{tj}\n{tm}"
    close(vj, vm)


def check_cond_varying_index():
    """An index that varies picks a branch per device: minijax types the result as varying
    (JAX 0.10.2 does not, jax-ml/jax#40823), so out_specs=P() is refused and the gradient of a
    replicated operand sums over the devices."""
    R = X[:1] * 0 + 1.0

    def f(J, out):
        P, L = J.sharding.PartitionSpec, J.lax
        return smap(J, lambda a, r: L.cond(a.sum() > 0, lambda: r, lambda: r * 3.0),
                    mesh1(J), (P("i"), P()), out)
    close(f(jax, jax.P("i"))(X, R), f(minijax, minijax.P("i"))(X, R))
    kind, _ = raises(lambda: f(minijax, minijax.P())(X, R))
    assert kind == "ValueError", kind
    g = minijax.jit(minijax.grad(lambda r: f(minijax, minijax.P("i"))(X, r).sum()))(R)
    close(g, (np.where(X.sum(1) > 0, 1.0, 3.0).sum() * np.ones_like(R)).astype(np.float32))


def check_nested_shard_map():
    """A shard_map over y inside one over x (axis_names={'x'}), the inner one taking the mesh
    from its context: values, grad, jaxpr (meshes aside) and the two nested manual regions
    as JAX's; its errors. With residuals in the inner body JAX 0.10.2 fails to lower the grad
    (their in_shardings name x, manual already), so minijax's grad of such a body is checked
    against the same program written as one shard_map over x and y."""
    def nested(J, body):
        P = J.sharding.PartitionSpec
        inner = lambda a: J.shard_map(body(J), in_specs=P(None, "y"), out_specs=P(None, "y"))(a)
        return smap(J, lambda a: inner(a) * 2, mesh2(J), P("x"), P("x"), axis_names={"x"})
    first = lambda J: lambda b: J.lax.psum(b, "y") + J.lax.axis_index("y") + J.lax.axis_index("x")
    second = lambda J: lambda b: J.lax.psum(b, "y") * J.lax.axis_index("x") + J.numpy.sin(b)

    def program(J):
        P = J.sharding.PartitionSpec
        f = nested(J, first)
        loss = lambda a: (f(a) ** 2).sum()
        text = re.sub(r"mesh=\w*Mesh\(.*\)", "mesh", str(J.make_jaxpr(J.grad(loss))(X)))
        hlo = J.jit(f).lower(X).as_text()
        regions = [ln.strip() for ln in hlo.splitlines() if "manual_computation" in ln]
        bad = [lambda: smap(J, lambda a: J.shard_map(lambda b: b, in_specs=P("x", "y"),
                                                     out_specs=P("x", "y"))(a),
                            mesh2(J), P("x"), P("x"), axis_names={"x"})(X)]
        return (J.jit(f)(X), J.jit(J.grad(loss))(X)), canonical_jaxpr(text), regions, \
            [raises(b)[0] for b in bad]
    (vj, tj, rj, ej), (vm, tm, rm, em) = both(program)
    close(vj, vm)
    assert tj == tm, f"\n{tj}\n{tm}"
    assert rj == rm and len(rm) == 2, (rj, rm)
    assert ej == em == ["ValueError"], (ej, em)
    flat = smap(jax, lambda b: second(jax)(b) * 2, mesh2(jax), jax.P("x", "y"), jax.P("x", "y"))
    g = minijax.jit(minijax.grad(lambda a: (nested(minijax, second)(a) ** 2).sum()))(X)
    close(g, jax.grad(lambda a: (flat(a) ** 2).sum())(X))


def check_vmap_named_axes():
    def program(J):
        L = J.lax
        v = lambda f, **kw: J.vmap(f, axis_name="i", **kw)
        return (v(lambda a: L.psum(a, "i"))(X), v(lambda a: L.psum(1, "i"))(X),
                v(lambda a: a - L.pmean(a, "i"))(X), v(lambda a: L.pmax(a, "i"))(X),
                v(lambda a: L.all_gather(a, "i"))(X),
                v(lambda a: L.all_gather(a, "i", tiled=True))(X),
                v(lambda a: L.ppermute(a, "i", [(k, (k + 1) % 8) for k in range(8)]))(X),
                v(lambda a: L.axis_index("i"))(X),
                v(lambda a: L.psum_scatter(a, "i", tiled=True))(np.tile(X, (1, 2))),
                v(lambda a: L.all_to_all(a, "i", 0, 0, tiled=True))(
                    np.arange(64, dtype=np.float32).reshape(8, 8)),
                J.vmap(J.vmap(lambda a: L.psum(a, ("i", "j")), axis_name="j"),
                       axis_name="i")(X.reshape(2, 4, 4)),
                J.grad(lambda x: v(lambda a: L.psum(a, "i") * a)(x).sum())(X))
    j, m = both(program)
    close(j, m)


def check_int_and_bool_reductions():
    """psum of bools counts them (int32), pmean of ints is a float mean, as in JAX."""
    I = np.arange(16, dtype=np.int32).reshape(8, 2)
    B = (np.arange(8) % 3 == 0).reshape(8, 1)

    def program(J):
        L, P = J.lax, J.sharding.PartitionSpec
        f = smap(J, lambda i, b: (L.psum(b, "i"), L.pmean(i, "i"), L.pmax(b, "i"),
                                  L.psum(i, "i")), mesh1(J), P("i"), P())
        v = J.vmap(lambda i, b: (L.psum(b, "i"), L.pmean(i, "i")), axis_name="i")
        return f(I, B), J.jit(f)(I, B), v(I, B)
    j, m = both(program)
    close(j, m)


def check_loop_carry_vma_errors():
    """A loop carry whose varying axes the body changes is JAX's TypeError (scan, fori_loop,
    while_loop), with its pcast hint when the initial carry varies along fewer axes."""
    def cases(J):
        L, P = J.lax, J.sharding.PartitionSpec
        z = np.zeros((1, 4), np.float32)
        f = lambda body: smap(J, body, mesh1(J), P("i"), P("i"))
        return [f(lambda a: L.scan(lambda c, x: (c + x, None), z[0], a)[0][None]),
                f(lambda a: L.scan(lambda c, x: (L.psum(c, "i"), None), a[0], a)[0][None]),
                f(lambda a: L.fori_loop(0, 3, lambda i, c: c + a, z)),
                f(lambda a: L.while_loop(lambda c: c[0, 0] < 3, lambda c: c + a + 1, z)),
                f(lambda a: L.fori_loop(0, 3, lambda i, c: c + a, L.pcast(z, "i", to="varying")))]
    got = [[raises(lambda c=c: c(X)) for c in cases(J)] for J in MODULES]
    assert [k for k, _ in got[0]] == [k for k, _ in got[1]] == ["TypeError"] * 4 + [None], got
    hint = lambda m: "This might be fixed by applying `jax.lax.pcast(..., ('i',)" in m
    assert [hint(m) for _, m in got[1][:4]] == [hint(m) for _, m in got[0][:4]], got


def check_vmap_of_shard_map():
    def program(J):
        P = J.sharding.PartitionSpec
        f = smap(J, lambda a: J.lax.all_gather(a, "i", tiled=True) * 2, mesh1(J), P("i"),
                 P("i"))
        return J.vmap(f)(np.stack([X, X + 1])), J.vmap(f, in_axes=1, out_axes=1)(
            np.stack([X, X - 1], 1))
    j, m = both(program)
    close(j, m)


def check_nested_jit_inside():
    def program(J):
        P = J.sharding.PartitionSpec
        inner = J.jit(lambda a: J.lax.psum(a * 2, "i"))
        return J.jit(smap(J, lambda a: inner(a), mesh1(J), P("i"), P()))(X)
    j, m = both(program)
    close(j, m)


def check_check_vma_false():
    """Values, and gradients of replicated and split inputs, with the types turned off."""
    def program(J):
        P, jnp = J.sharding.PartitionSpec, J.numpy
        lie = smap(J, lambda a: a * 2.0, mesh1(J), P("i"), P(), check_vma=False)(X)
        body = lambda w, xb: J.lax.psum(jnp.sum(jnp.tanh(xb @ w) ** 2), "i")
        f = smap(J, body, mesh1(J), (P(), P("i")), P(), check_vma=False)
        per = smap(J, lambda w, xb: jnp.tanh(xb @ w), mesh1(J), (P(), P("i")), P("i"),
                   check_vma=False)
        return lie, J.grad(f, argnums=(0, 1))(W, X), J.grad(lambda w: per(w, X).sum())(W)
    j, m = both(program)
    close(j, m, 1e-4)
    np.testing.assert_allclose(np.asarray(m[0]), X[:1] * 2)


def check_experimental_path():
    from jax.experimental.shard_map import shard_map as jsm

    from minijax.experimental.shard_map import shard_map as msm
    outs = [sm(lambda a, L=J.lax: L.psum(a, "i"), mesh1(J), J.P("i"), J.P())(X)
            for sm, J in ((jsm, jax), (msm, minijax))]
    close(*outs)


def check_errors():
    """The errors JAX users meet, raised by both with the same kind."""
    def cases(J):
        P, L = J.sharding.PartitionSpec, J.lax
        m = mesh1(J)
        return [
            lambda: smap(J, lambda a: L.psum(a, "j"), m, P("i"), P("i"))(X),      # unbound
            lambda: smap(J, lambda a: a, m, P("i", None, None), P("i"))(X),       # spec rank
            lambda: smap(J, lambda a: a, m, P("i"), P("i"))(X[:6]),               # divisible
            lambda: smap(J, lambda a: a * 2, m, P("i"), P())(X),                  # replication
            lambda: smap(J, lambda a: L.ppermute(a, "i", [(0, 1), (1, 1)]), m, P("i"),
                         P("i"))(X),                                              # perm
        ]
    got = [[raises(c)[0] for c in cases(J)] for J in MODULES]
    # an unbound name: JAX 0.10 fails an internal assert, minijax raises NameError (below)
    assert got[0][1:] == got[1][1:] and None not in got[0], got
    # JAX's replication message, word for word (JAX names an internal wrapper function)
    norm = lambda m: re.sub(r"out_specs\[\d+\]", "out_specs", re.sub(
        r"function '[^']*'", "function f", m.split("\n--")[0]))
    msgs = [norm(raises(cases(J)[3])[1]) for J in MODULES]
    assert msgs[0] == msgs[1], msgs
    two = [norm(raises(lambda J=J: smap(J, lambda a: (a, a), mesh2(J), J.P("x", "y"),
                                        (J.P("x", "y"), J.P()))(X))[1]) for J in MODULES]
    assert two[0] == two[1], two
    kind, msg = raises(cases(minijax)[0])
    assert kind == "NameError" and "unbound axis name: j" in msg, msg
    # outside any shard_map or vmap (JAX raises an AssertionError here; minijax NameError)
    kind, msg = raises(lambda: minijax.jit(lambda a: minijax.lax.psum(a, "j"))(X))
    assert kind == "NameError" and "unbound axis name: j" in msg, msg


def check_clearer_errors_where_jax_fails_internally():
    # JAX 0.10.2 fails with an internal AssertionError (an axis name no shard_map binds) or
    # IndexError (a ppermute position past the axis); minijax keeps errors naming the axis
    def cases(J):
        P, L = J.sharding.PartitionSpec, J.lax
        m = mesh1(J)
        return [lambda: smap(J, lambda a: L.psum(a, "j"), m, P("i"), P("i"))(X),
                lambda: smap(J, lambda a: L.ppermute(a, "i", [(0, 9)]), m, P("i"), P("i"))(X)]
    assert [raises(c)[0] for c in cases(jax)] == ["AssertionError", "IndexError"]
    (k1, m1), (k2, m2) = [raises(c) for c in cases(minijax)]
    assert k1 == "NameError" and "unbound axis name: j" in m1 and "['i']" in m1, m1
    assert k2 == "ValueError" and "ppermute" in m2 and "[0, 8)" in m2 and "'i'" in m2, m2


def check_explicit_mesh_in_specs_against_the_input_type():
    # on an Explicit mesh the input's type carries its layout: in_specs that disagree with it
    # (an uncommitted array or NumPy value typed unsplit, or another split) raise JAX's
    # ValueError; agreeing ones run, and left out they are read from the type
    def outcomes(J):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        m = J.make_mesh((8,), ("i",), axis_types=(J.sharding.AxisType.Explicit,))
        x = np.arange(64.0, dtype=np.float32).reshape(8, 8)
        out = []
        for arg, spec in [(J.numpy.asarray(x), P("i")), (x, P("i")),
                          (J.device_put(x, NS(m, P(None, "i"))), P("i")),
                          (J.device_put(x, NS(m, P("i"))), P("i")),
                          (J.numpy.asarray(x), P())]:
            try:
                r = J.shard_map(lambda t: t * 2, mesh=m, in_specs=spec, out_specs=spec)(arg)
                out.append(np.asarray(r).tolist())
            except ValueError as e:
                out.append(str(e))
        return out
    want = outcomes(jax)
    assert outcomes(minijax) == want, want
    assert sum(isinstance(w, str) for w in want) == 3


if __name__ == "__main__":
    run_checks(globals())
