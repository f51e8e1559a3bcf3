"""The checks of tests/sharding_test.py, run in one child process with 8 CPU devices.

XLA_FLAGS must give 8 host devices before JAX is imported, so this file is a script (run by
sharding_test.py), not a test module. Each `check_*` compares minijax with JAX; the script
prints one JSON line: {"passed": [...], "failed": {name: traceback}}.
"""

from eight_devices import request_eight_devices, run_checks

request_eight_devices()  # before JAX is imported

import functools  # noqa: E402
import re  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import minijax  # noqa: E402
from minijax import compiler  # noqa: E402

J_SH, M_SH = jax.sharding, minijax.sharding
AUTO = (J_SH.AxisType.Auto,) * 2


def meshes(axis_types=None):
    """The same (4, 2) mesh in both modules; axis_types: None (make_mesh's default) or Auto."""
    jm = jax.make_mesh((4, 2), ("x", "y"),
                       axis_types=None if axis_types is None else AUTO)
    mm = minijax.make_mesh((4, 2), ("x", "y"),
                           axis_types=None if axis_types is None else
                           (M_SH.AxisType.Auto,) * 2)
    return jm, mm


def both(jm, mm, *spec):
    return J_SH.NamedSharding(jm, J_SH.PartitionSpec(*spec)), \
        M_SH.NamedSharding(mm, M_SH.PartitionSpec(*spec))


def shards_of(x):
    """(device id, index as (start, stop) tuples, value) per shard, sorted by device."""
    out = []
    for s in x.addressable_shards:
        idx = tuple((sl.start, sl.stop) for sl in s.index)
        out.append((s.device.id, idx, np.asarray(s.data).tolist()))
    return sorted(out)


SPECS = [(), ("x",), ("x", "y"), (None, "y"), ("y", "x"), (("x", "y"),), (("y", "x"), None)]


def check_devices():
    assert minijax.devices() == jax.devices()
    assert minijax.device_count() == jax.device_count() == 8
    assert minijax.local_devices() == jax.local_devices()


def check_mesh_repr_eq_hash():
    for types in (None, "auto"):
        jm, mm = meshes(types)
        assert str(mm) == str(jm), (str(mm), str(jm))
        assert repr(mm) == repr(jm), (repr(mm), repr(jm))
        assert [t.name for t in mm.axis_types] == [t.name for t in jm.axis_types]
        assert dict(mm.shape) == dict(jm.shape) and mm.size == jm.size
        assert (mm.device_ids == jm.device_ids).all()
        mm2 = minijax.make_mesh((4, 2), ("x", "y"), axis_types=mm.axis_types)
        assert mm == mm2 and hash(mm) == hash(mm2)
    # JAX 0.10: make_mesh's default axis types are Explicit; Mesh's and AbstractMesh's Auto
    assert [t.name for t in minijax.make_mesh((8,), ("d",)).axis_types] == ["Explicit"]
    jm, mm = meshes()
    assert mm != minijax.make_mesh((4, 2), ("x", "y"), axis_types=(M_SH.AxisType.Auto,) * 2)
    devs = np.array(minijax.devices()).reshape(2, 4)
    assert repr(M_SH.Mesh(devs, ("a", "b"))) == repr(J_SH.Mesh(devs, ("a", "b")))
    assert (repr(M_SH.AbstractMesh((4, 2), ("x", "y"))) ==
            repr(J_SH.AbstractMesh((4, 2), ("x", "y"))))
    assert mm.abstract_mesh == minijax.make_mesh((4, 2), ("x", "y")).abstract_mesh
    assert repr(M_SH.AxisType.Explicit) == repr(J_SH.AxisType.Explicit)
    for bad in [((3, 4), ("a", "b")), ((2, 2), ("a",))]:
        try:
            jax.make_mesh(*bad)
        except Exception as e:
            jax_error = type(e)
        try:
            minijax.make_mesh(*bad)
        except Exception as e:
            assert isinstance(e, jax_error), (e, jax_error)
        else:
            raise AssertionError(f"make_mesh{bad} did not raise")


def check_partition_spec():
    P, JP = minijax.P, jax.P
    cases = [(), (None,), ("x",), (("x",),), ("x", None), (("x", "y"), None), (["x", "y"],)]
    for a in cases:
        assert repr(P(*a)) == repr(JP(*a)), (P(*a), JP(*a))
        assert len(P(*a)) == len(JP(*a)) and tuple(P(*a)) == tuple(JP(*a))
        for b in cases:
            assert (P(*a) == P(*b)) == (JP(*a) == JP(*b)), (a, b)
            if P(*a) == P(*b):
                assert hash(P(*a)) == hash(P(*b))
    assert minijax.sharding.PartitionSpec is P
    assert (P("x") == ("x",)) == (JP("x") == ("x",))
    assert repr(P("x") + (None, "y")) == repr(JP("x") + (None, "y"))


def check_named_sharding():
    jm, mm = meshes()
    for spec in SPECS:
        js, ms = both(jm, mm, *spec)
        assert repr(ms) == repr(js), (repr(ms), repr(js))
        assert ms.is_fully_replicated == js.is_fully_replicated, spec
        assert ms.is_fully_addressable and ms.num_devices == js.num_devices
        assert ms.device_set == js.device_set
        shape = (8, 4)
        jmap = {d.id: tuple((s.start, s.stop) for s in i)
                for d, i in js.devices_indices_map(shape).items()}
        mmap = {d.id: tuple((s.start, s.stop) for s in i)
                for d, i in ms.devices_indices_map(shape).items()}
        assert jmap == mmap, (spec, jmap, mmap)
        assert ms.shard_shape(shape) == js.shard_shape(shape)
    a, b = both(jm, mm, "x")[1], both(jm, mm, "x", None)[1]
    ja, jb = both(jm, mm, "x")[0], both(jm, mm, "x", None)[0]
    assert (a == b) == (ja == jb)
    assert both(jm, mm, "x")[1] == both(jm, mm, "x")[1]
    assert hash(both(jm, mm, "x")[1]) == hash(both(jm, mm, "x")[1])
    d = minijax.devices()[1]
    assert repr(M_SH.SingleDeviceSharding(d)) == repr(J_SH.SingleDeviceSharding(d))
    assert M_SH.SingleDeviceSharding(d) == M_SH.SingleDeviceSharding(d)
    assert M_SH.SingleDeviceSharding(d).device_set == {d}
    assert isinstance(M_SH.SingleDeviceSharding(d), M_SH.Sharding)
    assert isinstance(a, M_SH.Sharding)


def check_device_put_shards():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    for types in (None, "auto"):
        jm, mm = meshes(types)
        for spec in SPECS:
            js, ms = both(jm, mm, *spec)
            jx, mx = jax.device_put(x, js), minijax.device_put(x, ms)
            assert str(mx.sharding.spec) == str(jx.sharding.spec)
            assert mx.sharding == ms
            assert shards_of(mx) == shards_of(jx), spec
            assert [s.replica_id for s in mx.addressable_shards] == \
                [s.replica_id for s in jx.addressable_shards]
            assert mx.is_fully_replicated == jx.is_fully_replicated
            assert mx.is_fully_addressable == jx.is_fully_addressable
            assert mx.committed == jx.committed
            assert mx.devices() == jx.devices()
            np.testing.assert_array_equal(np.asarray(mx), x)
    # a pytree, and an already sharded minijax Array
    jm, mm = meshes()
    js, ms = both(jm, mm, "x")
    tree = minijax.device_put({"a": x, "b": np.ones(8, np.int32)}, ms)
    assert shards_of(tree["b"]) == shards_of(jax.device_put(np.ones(8, np.int32), js))
    again = minijax.device_put(tree["a"], both(jm, mm, None, "y")[1])
    assert shards_of(again) == shards_of(jax.device_put(x, both(jm, mm, None, "y")[0]))
    unsharded = minijax.device_put(x)
    assert unsharded.sharding == M_SH.SingleDeviceSharding(minijax.devices()[0])
    assert repr(unsharded.sharding) == repr(jax.device_put(x).sharding)


def _error_of(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return e
    raise AssertionError("no error raised")


def check_device_put_errors():
    jm, mm = meshes()
    cases = [((6, 4), ("x",)),            # 6 rows do not split 4 ways
             ((8, 4), ("x", "y", None)),  # spec longer than the rank
             ((8, 6), (None, ("x", "y")))]
    for shape, spec in cases:
        js, ms = both(jm, mm, *spec)
        je = _error_of(jax.device_put, np.ones(shape), js)
        me = _error_of(minijax.device_put, np.ones(shape), ms)
        assert type(me).__name__ == type(je).__name__, (me, je)
        assert isinstance(me, ValueError) and str(ms.spec) in str(me), me
    for spec in [("z",), ("x", "x")]:
        je = _error_of(J_SH.NamedSharding, jm, J_SH.PartitionSpec(*spec))
        me = _error_of(M_SH.NamedSharding, mm, M_SH.PartitionSpec(*spec))
        assert type(me).__name__ == type(je).__name__, (me, je)
        assert str(me) == str(je), (str(me), str(je))
    # nothing placed when one leaf of a pytree does not fit
    placed = []
    real = compiler.device_put_sharded
    compiler.device_put_sharded = lambda v, s: placed.append(v) or real(v, s)
    try:
        ms = both(jm, mm, "x")[1]
        _error_of(lambda: minijax.device_put([np.ones(8), np.ones(6)], ms))
        with minijax.set_mesh(mm):  # reshard, eagerly: the same all-or-nothing
            e = _error_of(lambda: minijax.sharding.reshard([np.ones(8), np.ones(6)], M_SH.P("x")))
        assert isinstance(e, ValueError) and "P('x',)" in str(e), e
    finally:
        compiler.device_put_sharded = real
    assert placed == [], placed


def check_make_array_from_callback():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    jm, mm = meshes()
    for spec in [("x", "y"), (None, "x"), ()]:
        js, ms = both(jm, mm, *spec)
        mx = minijax.make_array_from_callback(x.shape, ms, lambda i: x[i])
        jx = jax.make_array_from_callback(x.shape, js, lambda i: x[i])
        assert shards_of(mx) == shards_of(jx) and mx.sharding == ms
        np.testing.assert_array_equal(np.asarray(mx), x)
    js, ms = both(jm, mm, "x")
    je = _error_of(lambda: jax.make_array_from_callback(x.shape, js, lambda i: x))
    me = _error_of(lambda: minijax.make_array_from_callback(x.shape, ms, lambda i: x))
    assert type(me) is type(je) is ValueError and str(me) == str(je), (me, je)


def _normalize(text: str) -> str:
    """JAX's module text without what minijax does not emit yet: result names
    (`jax.result_info`) and the parentheses they need around result types."""
    text = re.sub(r'jax\.result_info = "[^"]*"(, )?', "", text)
    text = re.sub(r"> \{\}", ">", text)
    text = re.sub(r"-> \((tensor<[^>]*>)\) \{", r"-> \1 {", text)
    return text


def _programs(J, mesh):
    """(name, function, argument specs, jit kwargs) — one program per line of the chapter."""
    NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
    np_ = J.numpy
    lax = J.lax

    def reduce0(a):
        return np_.sin(a).sum(0)

    def matmul(a, w):
        return np_.tanh(a @ w)

    def constrain(a):
        return lax.with_sharding_constraint(a * 2, NS(mesh, P(None, "y")))

    def total(a):
        return a.sum()

    return [("reduce0", reduce0, [("x", "y")], {}),
            ("matmul", matmul, [("x", None), (None, "y")], {}),
            ("constrain", constrain, [("x", "y")], {}),
            ("total", total, [(("x", "y"),)], {}),
            ("out_replicated", reduce0, [("x", "y")],
             dict(out_shardings=NS(mesh, P()))),
            ("in_given", matmul, [None, None],
             dict(in_shardings=(NS(mesh, P("x")), NS(mesh, P(None, "y")))))]


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all")


def count_collectives(hlo: str) -> dict:
    return {c: len(re.findall(rf"= \S+ {c}(-start)?\(", hlo)) for c in COLLECTIVES}


def check_jit_programs():
    jm, mm = meshes("auto")
    x8x4 = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    inputs = {"reduce0": [x8x4], "matmul": [x8x4, w], "constrain": [x8x4],
              "total": [x8x4.reshape(-1)[:8]], "out_replicated": [x8x4],
              "in_given": [x8x4, w]}
    for (name, jf, specs, jkw), (_, mf, _, mkw) in zip(_programs(jax, jm),
                                                       _programs(minijax, mm)):
        args = inputs[name]
        jargs = [a if s is None else jax.device_put(a, both(jm, mm, *s)[0])
                 for a, s in zip(args, specs)]
        margs = [a if s is None else minijax.device_put(a, both(jm, mm, *s)[1])
                 for a, s in zip(args, specs)]
        jj, mj = jax.jit(jf, **jkw), minijax.jit(mf, **mkw)
        jout, mout = jj(*jargs), mj(*margs)
        np.testing.assert_allclose(np.asarray(mout), np.asarray(jout), rtol=1e-6, atol=1e-6)
        assert str(mout.sharding.spec) == str(jout.sharding.spec), \
            (name, mout.sharding.spec, jout.sharding.spec)
        assert shards_of(mout) == shards_of(jout) or name == "matmul" and \
            [s[:2] for s in shards_of(mout)] == [s[:2] for s in shards_of(jout)], name
        jtext, mtext = jj.lower(*jargs).as_text(), mj.lower(*margs).as_text()
        assert mtext.strip() == _normalize(jtext).strip(), \
            f"{name}:\n{mtext}\n---\n{_normalize(jtext)}"
        jhlo = jj.lower(*jargs).compile().as_text()
        mhlo = mj.lower(*margs).compile().as_text()
        assert count_collectives(mhlo) == count_collectives(jhlo), \
            (name, count_collectives(mhlo), count_collectives(jhlo))
        # a second call reuses the executable and keeps the layout
        again = mj(*margs)
        assert again.sharding == mout.sharding and again.committed


def check_jit_chain_and_cache():
    jm, mm = meshes("auto")
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    f = minijax.jit(lambda a: a * 2.0 + 1.0)
    before = minijax.stages.cache_stats["compiles"] if hasattr(minijax, "stages") else None
    a = f(minijax.device_put(x, both(jm, mm, "x")[1]))
    b = f(minijax.device_put(x, both(jm, mm, None, "y")[1]))  # same avals, another layout
    c = f(x)  # unsharded: the single-device path
    assert str(a.sharding.spec) == "P('x',)" and str(b.sharding.spec) == "P(None, 'y')"
    assert isinstance(c.sharding, M_SH.SingleDeviceSharding)
    for r in (a, b, c):
        np.testing.assert_array_equal(np.asarray(r), x * 2 + 1)
    d = f(a)  # a sharded result feeds the next call without a host round-trip
    np.testing.assert_array_equal(np.asarray(d), (x * 2 + 1) * 2 + 1)
    assert d.sharding == a.sharding
    del before


def check_grad_and_vmap_with_constraint():
    jm, mm = meshes("auto")
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)

    def loss(J, mesh):
        NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec

        def f(a):
            a = J.lax.with_sharding_constraint(a, NS(mesh, P("x")))
            return (J.numpy.sin(a) ** 2).sum()
        return f
    jg = jax.jit(jax.grad(loss(jax, jm)))(jax.device_put(x, both(jm, mm, "x")[0]))
    mg = minijax.jit(minijax.grad(loss(minijax, mm)))(minijax.device_put(x, both(jm, mm, "x")[1]))
    np.testing.assert_allclose(np.asarray(mg), np.asarray(jg), rtol=1e-6)
    assert str(mg.sharding.spec) == str(jg.sharding.spec)

    def per_row(J, mesh):
        NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
        return lambda r: J.lax.with_sharding_constraint(r * 3, NS(mesh, P("y")))
    jv = jax.jit(jax.vmap(per_row(jax, jm)))(x)
    mv = minijax.jit(minijax.vmap(per_row(minijax, mm)))(x)
    np.testing.assert_allclose(np.asarray(mv), np.asarray(jv))
    assert str(mv.sharding.spec) == str(jv.sharding.spec), (mv.sharding, jv.sharding)
    # eagerly, the constraint lays the value out
    e = minijax.lax.with_sharding_constraint(minijax.numpy.ones((8, 4)), both(jm, mm, "x")[1])
    assert str(e.sharding.spec) == "P('x',)"


def check_in_shardings_pytree_prefix():
    jm, mm = meshes("auto")
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    w = np.ones((4, 4), np.float32)

    def f(params, a):
        return (a @ params[0] @ params[1]).sum(1)
    jrep, mrep = both(jm, mm)
    jrow, mrow = both(jm, mm, "x")
    jo = jax.jit(f, in_shardings=((jrep, jrep), jrow))((w, w), x)
    mo = minijax.jit(f, in_shardings=((mrep, mrep), mrow))((w, w), x)
    np.testing.assert_allclose(np.asarray(mo), np.asarray(jo), rtol=1e-6)
    assert str(mo.sharding.spec) == str(jo.sharding.spec)
    e = _error_of(minijax.jit(f, in_shardings=(mrep,)), (w, w), x)
    assert isinstance(e, ValueError) and "in_shardings" in str(e)


def check_equivalent_layout_is_passed_through():
    # P() and P(None, None) put the same slices on the same devices: a sharded call given an
    # argument laid out as one, compiled for the other, uses its buffers as they are instead
    # of fetching and re-placing them (as JAX does), and the result equals JAX's.
    jm, mm = meshes("auto")
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    jsh, msh = both(jm, mm, None, None)
    want = jax.jit(lambda a: a * 2, in_shardings=jsh)(jax.device_put(x, both(jm, mm)[0]))
    arg = minijax.device_put(x, M_SH.NamedSharding(mm, M_SH.PartitionSpec()))
    f = minijax.jit(lambda a: a * 2, in_shardings=msh)
    f(arg)  # compile
    placed = []
    original = compiler.device_put_sharded
    compiler.device_put_sharded = lambda *a: placed.append(a) or original(*a)
    try:
        got = f(arg)
    finally:
        compiler.device_put_sharded = original
    assert not placed, "the argument was re-placed through the host"
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def check_dict_shardings_of_a_training_step():
    # in_shardings and out_shardings as dicts of NamedShardings (a parameter tree), as a
    # sharded training step passes them: the step's outputs come back in those layouts.
    jm, mm = meshes("auto")
    params = {"w": np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4),
              "b": np.zeros(4, np.float32)}
    x = np.ones((8, 8), np.float32)

    def step(p, a):
        g = {"w": a.T @ (a @ p["w"] + p["b"]), "b": (a @ p["w"]).sum(0)}
        return {k: p[k] - 0.1 * g[k] for k in p}, (a @ p["w"]).sum()
    outs = {}
    for J, mesh in ((jax, jm), (minijax, mm)):
        ns = lambda *s, J=J, mesh=mesh: J.sharding.NamedSharding(mesh, J.P(*s))
        psh = {"w": ns("x", "y"), "b": ns("y")}
        f = J.jit(step, in_shardings=(psh, ns("x")), out_shardings=(psh, ns()))
        new, loss = f(params, x)
        new2, _ = f(new, x)  # a second call hits the cache keyed on the dict of shardings
        outs[J] = (new2, loss, {k: tuple(v.sharding.spec) for k, v in new2.items()})
    np.testing.assert_allclose(np.asarray(outs[minijax][1]), np.asarray(outs[jax][1]), rtol=1e-6)
    for k in params:
        np.testing.assert_allclose(np.asarray(outs[minijax][0][k]), np.asarray(outs[jax][0][k]),
                                   rtol=1e-6)
    assert outs[minijax][2] == outs[jax][2] == {"w": ("x", "y"), "b": ("y",)}


def check_mixed_donated_transformed_calls():
    jm, mm = meshes("auto")
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    w = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    c = np.full((8, 4), 2.0, np.float32)  # closed over: a hoisted constant
    js, ms = both(jm, mm, "x")
    # a sharded argument next to a NumPy one (whose layout the partitioner picks)
    oj = jax.jit(lambda a, b: jax.numpy.tanh(a @ b) + c)(jax.device_put(x, js), w)
    om = minijax.jit(lambda a, b: minijax.numpy.tanh(a @ b) + c)(minijax.device_put(x, ms), w)
    np.testing.assert_allclose(np.asarray(om), np.asarray(oj), rtol=1e-6)
    assert str(om.sharding.spec) == str(oj.sharding.spec)
    # donation deletes the sharded input, the output keeps the layout
    a = minijax.device_put(x, ms)
    b = minijax.jit(lambda t: t * 2, donate_argnums=0)(a)
    assert a.is_deleted() and b.sharding == ms
    np.testing.assert_array_equal(np.asarray(b), x * 2)
    # jit under vmap and grad, eagerly, on sharded arrays
    v = minijax.vmap(minijax.jit(lambda r: r * 2))(minijax.device_put(x, ms))
    np.testing.assert_array_equal(np.asarray(v), x * 2)
    g = minijax.grad(minijax.jit(lambda t: (t ** 2).sum()))(minijax.device_put(x, ms))
    np.testing.assert_array_equal(np.asarray(g), 2 * x)
    # an executable compiled for one device, called with a sharded array: gathered first
    comp = minijax.jit(lambda t: t + 1).lower(x).compile()
    np.testing.assert_array_equal(np.asarray(comp(minijax.device_put(x, ms))), x + 1)


def check_committed_argument_errors():
    jm, mm = meshes("auto")
    x = np.ones((8, 4), np.float32)
    jm4 = jax.make_mesh((4,), ("x",), axis_types=(J_SH.AxisType.Auto,),
                        devices=jax.devices()[4:])
    mm4 = minijax.make_mesh((4,), ("x",), axis_types=(M_SH.AxisType.Auto,),
                            devices=minijax.devices()[4:])
    cases = [  # (arg sharding, in_shardings, out_shardings) as (mesh, spec) pairs
        (("m", ("x",)), ("m", ("y",)), None),
        (("m4", ("x",)), ("m", ("x",)), None),
        (("m4", ("x",)), None, ("m", ("x",)))]
    for arg, ins, outs in cases:
        made = []
        for J, NS, P, mesh, mesh4 in ((jax, J_SH.NamedSharding, J_SH.PartitionSpec, jm, jm4),
                                      (minijax, M_SH.NamedSharding, M_SH.PartitionSpec, mm,
                                       mm4)):
            pick = {"m": mesh, "m4": mesh4}
            def ns(ms, NS=NS, P=P, pick=pick):
                return None if ms is None else NS(pick[ms[0]], P(*ms[1]))
            a = J.device_put(x, ns(arg))
            made.append(_error_of(J.jit(lambda t: t * 2, in_shardings=ns(ins),
                                        out_shardings=ns(outs)), a))
        je, me = made
        assert type(me) is type(je) is ValueError, (me, je)
        if "does not match" in str(je):
            assert str(me) == str(je), (str(me), str(je))
    # the same layout in other words is accepted: P('x') and P('x', None)
    a = minijax.device_put(x, both(jm, mm, "x")[1])
    out = minijax.jit(lambda t: t * 2, in_shardings=both(jm, mm, "x", None)[1])(a)
    np.testing.assert_array_equal(np.asarray(out), x * 2)


def check_set_mesh_and_bare_specs():
    assert repr(M_SH.get_abstract_mesh()) == repr(J_SH.get_abstract_mesh())
    assert minijax.set_mesh is M_SH.set_mesh
    x = np.arange(8, dtype=np.float32)
    je = _error_of(jax.device_put, x, jax.P("x"))
    me = _error_of(minijax.device_put, x, minijax.P("x"))
    assert type(me) is type(je) and str(me).replace("minijax", "jax") == str(je), (me, je)
    jm, mm = jax.make_mesh((8,), ("x",)), minijax.make_mesh((8,), ("x",))
    with jax.set_mesh(jm), minijax.set_mesh(mm):
        assert M_SH.get_abstract_mesh() == mm.abstract_mesh
        jx, mx = jax.device_put(x, jax.P("x")), minijax.device_put(x, minijax.P("x"))
        assert repr(mx.sharding) == repr(jx.sharding) and shards_of(mx) == shards_of(jx)
        # Explicit axes: the constraint is an assert (a match binds nothing), reshard moves
        def wsc(J, spec):
            return lambda t: J.lax.with_sharding_constraint(t * 2, spec)
        je = _error_of(jax.jit(wsc(jax, jax.P())), jx)
        me = _error_of(minijax.jit(wsc(minijax, minijax.P())), mx)
        assert type(me) is type(je) and str(me) == str(je), (me, je)
        assert str(minijax.make_jaxpr(wsc(minijax, minijax.P("x")))(mx)) == \
            str(jax.make_jaxpr(wsc(jax, jax.P("x")))(jx))
        def resh(J):
            return lambda t: J.sharding.reshard(t * 2, J.P())
        out, jout = minijax.jit(resh(minijax))(mx), jax.jit(resh(jax))(jx)
        assert str(out.sharding.spec) == str(jout.sharding.spec)
        np.testing.assert_array_equal(np.asarray(out), x * 2)
    assert M_SH.get_abstract_mesh().empty
    minijax.set_mesh(mm)  # as a global setter
    try:
        assert M_SH.get_abstract_mesh() == mm.abstract_mesh
    finally:
        minijax.set_mesh(None)
    assert M_SH.get_abstract_mesh().empty


# ---------------------------------------------------------------------------------------------
# Sharding in types (Explicit axes)
# ---------------------------------------------------------------------------------------------

def _explicit_inputs(J, mesh):
    NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    w = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    return {"xy": J.device_put(x, NS(mesh, P("x", "y"))),
            "x": J.device_put(x, NS(mesh, P("x"))),
            "w_y": J.device_put(w, NS(mesh, P(None, "y"))),
            "w_row_y": J.device_put(w, NS(mesh, P("y")))}


def _typed_programs(J):
    jnp = J.numpy
    return [
        ("elementwise_reduce", ("xy",), lambda a: jnp.sin(a).sum(0) + 1.0),
        ("broadcast", ("xy",), lambda a: jnp.broadcast_to(a.sum(1)[:, None], (8, 4)) * a),
        ("reshape_merge", ("x",), lambda a: a.reshape(32)),
        ("reshape_split", ("x",), lambda a: a.reshape(4, 2, 4)),
        ("transpose_convert", ("xy",), lambda a: a.T.astype(jnp.int32)),
        ("matmul", ("x", "w_y"), lambda a, b: jnp.tanh(a @ b)),
        ("select_max", ("xy",), lambda a: (jnp.where(a > 0, a, 0.0), a.max(1), jnp.argmax(a, 0))),
        ("slice_concat", ("x",), lambda a: jnp.concatenate([a[:, 1:3], a[:, :2]], axis=1)),
        ("einsum", ("x", "w_y"), lambda a, b: jnp.einsum("ij,jk->ik", a, b)),
        ("cond", ("xy",), lambda a: J.lax.cond(a.sum() > 0, jnp.sin, jnp.cos, a)),
        ("scan", ("x",), lambda a: J.lax.scan(lambda c, r: (c + r, c * r), a.T[0] * 0, a.T)),
        ("grad_matmul", ("x", "w_y"),
         J.grad(lambda a, b: jnp.tanh(a @ b).sum(), argnums=(0, 1))),
        ("vmap", ("xy",), J.vmap(lambda r: jnp.sin(r) * 2.0)),
    ]


def check_typeof_and_typed_jaxprs():
    jm, mm = jax.make_mesh((4, 2), ("x", "y")), minijax.make_mesh((4, 2), ("x", "y"))
    ji, mi = _explicit_inputs(jax, jm), _explicit_inputs(minijax, mm)
    assert str(minijax.typeof(mi["xy"])) == str(jax.typeof(ji["xy"])) == "float32[8@x,4@y]"
    assert str(minijax.typeof(mi["x"]).sharding.spec) == str(jax.typeof(ji["x"]).sharding.spec)
    assert str(minijax.typeof(np.ones(3))) == str(jax.typeof(np.ones(3)))
    # the same aval with and without a sharding: different types, unchanged printing
    plain = minijax.core.ShapedArray((8, 4), np.float32)
    assert minijax.typeof(mi["x"]) != plain and minijax.typeof(mi["x"]).str_short() == "f32[8@x,4]"
    mismatched = []
    for (name, names, jf), (_, _, mf) in zip(_typed_programs(jax), _typed_programs(minijax)):
        jt = str(jax.make_jaxpr(jf)(*[ji[n] for n in names]))
        mt = str(minijax.make_jaxpr(mf)(*[mi[n] for n in names]))
        if jt != mt:
            mismatched.append(f"{name}:\n{mt}\n--- JAX:\n{jt}")
    assert not mismatched, "\n\n".join(mismatched)


def check_typed_jit_values_specs_hlo():
    jm, mm = jax.make_mesh((4, 2), ("x", "y")), minijax.make_mesh((4, 2), ("x", "y"))
    ji, mi = _explicit_inputs(jax, jm), _explicit_inputs(minijax, mm)
    for (name, names, jf), (_, _, mf) in zip(_typed_programs(jax), _typed_programs(minijax)):
        jargs, margs = [ji[n] for n in names], [mi[n] for n in names]
        jo, mo = jax.jit(jf)(*jargs), minijax.jit(mf)(*margs)
        for a, b in zip(jax.tree.leaves(jo), minijax.tree_util.tree_leaves(mo)):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
            assert str(b.sharding.spec) == str(a.sharding.spec), (name, b.sharding, a.sharding)
            assert str(minijax.typeof(b)) == str(jax.typeof(a)), name
        if name in ("elementwise_reduce", "matmul", "transpose_convert"):
            jtext = jax.jit(jf).lower(*jargs).as_text()
            mtext = minijax.jit(mf).lower(*margs).as_text()
            jtext = re.sub(r"module @\S+", "module", _normalize(jtext))
            mtext = re.sub(r"module @\S+", "module", mtext)
            assert mtext.strip() == jtext.strip(), f"{name}:\n{mtext}\n---\n{jtext}"
            jhlo = jax.jit(jf).lower(*jargs).compile().as_text()
            mhlo = minijax.jit(mf).lower(*margs).compile().as_text()
            assert count_collectives(mhlo) == count_collectives(jhlo), name


def check_sharding_type_errors():
    jm, mm = jax.make_mesh((4, 2), ("x", "y")), minijax.make_mesh((4, 2), ("x", "y"))
    ji, mi = _explicit_inputs(jax, jm), _explicit_inputs(minijax, mm)
    cases = [("contracting", ("xy", "w_row_y"), lambda J: lambda a, b: a @ b),
             ("slice", ("x",), lambda J: lambda a: a[0]),
             ("broadcasting", ("xy", "xy"), lambda J: lambda a, b: a + b.T.reshape(8, 4)),
             ("select", ("xy", "x"), lambda J: lambda a, b: J.numpy.where(a > 0, a, b))]
    for name, names, prog in cases:
        je = _error_of(jax.make_jaxpr(prog(jax)), *[ji[n] for n in names])
        me = _error_of(minijax.make_jaxpr(prog(minijax)), *[mi[n] for n in names])
        assert type(me).__name__ == type(je).__name__ == "ShardingTypeError", (name, me, je)
        if name in ("contracting", "slice"):
            assert str(me) == str(je), (str(me), str(je))
    # out_sharding resolves the contracting ambiguity, for matmul, dot, einsum and lax
    with jax.set_mesh(jm), minijax.set_mesh(mm):
        for fn in ("matmul", "dot"):
            def f(J, fn=fn):
                return lambda a, b: getattr(J.numpy, fn)(a, b, out_sharding=J.P("x"))
            jo = jax.jit(f(jax))(ji["xy"], ji["w_row_y"])
            mo = minijax.jit(f(minijax))(mi["xy"], mi["w_row_y"])
            np.testing.assert_allclose(np.asarray(mo), np.asarray(jo), rtol=1e-5)
            assert str(mo.sharding.spec) == str(jo.sharding.spec)
            assert count_collectives(jax.jit(f(jax)).lower(ji["xy"], ji["w_row_y"])
                                     .compile().as_text()) == \
                count_collectives(minijax.jit(f(minijax)).lower(mi["xy"], mi["w_row_y"])
                                  .compile().as_text())

        def e(J):
            return lambda a, b: J.numpy.einsum("ij,jk->ki", a, b, out_sharding=J.P(None, "x"))
        jo, mo = jax.jit(e(jax))(ji["xy"], ji["w_row_y"]), minijax.jit(e(minijax))(
            mi["xy"], mi["w_row_y"])
        np.testing.assert_allclose(np.asarray(mo), np.asarray(jo), rtol=1e-5)
        assert str(mo.sharding.spec) == str(jo.sharding.spec)
    je = _error_of(lambda: jax.numpy.matmul(ji["xy"], ji["w_row_y"], out_sharding=jax.P("x")))
    me = _error_of(lambda: minijax.numpy.matmul(mi["xy"], mi["w_row_y"],
                                                out_sharding=minijax.P("x")))
    assert type(me) is type(je) is ValueError and str(me) == str(je), (me, je)


def check_reshard_grad_vmap_eager():
    jm, mm = jax.make_mesh((4, 2), ("x", "y")), minijax.make_mesh((4, 2), ("x", "y"))
    ji, mi = _explicit_inputs(jax, jm), _explicit_inputs(minijax, mm)

    def moved(J):
        return lambda a: J.sharding.reshard(a, J.sharding.NamedSharding(
            jm if J is jax else mm, J.P(None, "x"))) * 2

    assert str(minijax.make_jaxpr(moved(minijax))(mi["xy"])) == \
        str(jax.make_jaxpr(moved(jax))(ji["xy"]))
    jo, mo = jax.jit(moved(jax))(ji["xy"]), minijax.jit(moved(minijax))(mi["xy"])
    assert str(mo.sharding.spec) == str(jo.sharding.spec) and shards_of(mo) == shards_of(jo)
    # eagerly: reshard places the value; ops on sharded arrays keep the sharding in the type
    for op in (moved, lambda J: lambda a: J.numpy.sin(a) + 1.0, lambda J: lambda a: a.sum(0)):
        jo, mo = op(jax)(ji["xy"]), op(minijax)(mi["xy"])
        assert str(mo.sharding.spec) == str(jo.sharding.spec), (mo.sharding, jo.sharding)
        assert str(minijax.typeof(mo)) == str(jax.typeof(jo))
        assert shards_of(mo) == [(d, i, np.asarray(v, np.float32).tolist())
                                 for d, i, v in shards_of(jo)] or np.allclose(
            np.asarray(mo), np.asarray(jo), rtol=1e-6)
    # cotangents carry the primal's sharding, through reshard and dot_general's transpose

    def loss(J):
        return lambda a, b: (J.numpy.tanh(moved(J)(a) @ b) ** 2).sum()
    jg = jax.jit(jax.grad(loss(jax), argnums=(0, 1)))(ji["xy"], ji["w_y"])
    mg = minijax.jit(minijax.grad(loss(minijax), argnums=(0, 1)))(mi["xy"], mi["w_y"])
    for a, b in zip(jg, mg):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
        assert str(b.sharding.spec) == str(a.sharding.spec), (b.sharding, a.sharding)
    jv = jax.jit(jax.vmap(lambda r: jax.numpy.sin(r).sum()))(ji["xy"])
    mv = minijax.jit(minijax.vmap(lambda r: minijax.numpy.sin(r).sum()))(mi["xy"])
    np.testing.assert_allclose(np.asarray(mv), np.asarray(jv), rtol=1e-6)
    assert str(mv.sharding.spec) == str(jv.sharding.spec)


def check_auto_and_explicit_axes():
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    w = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)

    def programs(J):
        SH = J.sharding
        return [lambda a, b: SH.auto_axes(lambda a, b: a @ b, out_sharding=J.P("x"))(a, b),
                lambda a, b: SH.auto_axes(lambda t: (t * 2).sum(0), axes="x",
                                          out_sharding=J.P("y"))(a)]
    jm, mm = jax.make_mesh((4, 2), ("x", "y")), minijax.make_mesh((4, 2), ("x", "y"))
    with jax.set_mesh(jm), minijax.set_mesh(mm):
        jargs = (jax.device_put(x, jax.P("x", "y")), jax.device_put(w, jax.P("y")))
        margs = (minijax.device_put(x, minijax.P("x", "y")), minijax.device_put(w, minijax.P("y")))
        for jf, mf in zip(programs(jax), programs(minijax)):
            assert str(minijax.make_jaxpr(mf)(*margs)) == str(jax.make_jaxpr(jf)(*jargs))
            jo, mo = jax.jit(jf)(*jargs), minijax.jit(mf)(*margs)
            np.testing.assert_allclose(np.asarray(mo), np.asarray(jo), rtol=1e-5)
            assert str(mo.sharding.spec) == str(jo.sharding.spec)
        e = _error_of(lambda: minijax.sharding.auto_axes(lambda t: t)(margs[0]))
        assert type(e) is TypeError and "out_sharding" in str(e)
    jm, mm = meshes("auto")
    with jax.set_mesh(jm), minijax.set_mesh(mm):
        jx, mx = jax.device_put(x, jax.P("x", "y")), minijax.device_put(x, minijax.P("x", "y"))
        jf = jax.sharding.explicit_axes(lambda t: t * 2, in_sharding=jax.P("x"))
        mf = minijax.sharding.explicit_axes(lambda t: t * 2, in_sharding=minijax.P("x"))
        assert str(minijax.make_jaxpr(mf)(mx)) == str(jax.make_jaxpr(jf)(jx))
        jo, mo = jax.jit(jf)(jx), minijax.jit(mf)(mx)
        np.testing.assert_allclose(np.asarray(mo), x * 2)
        assert str(mo.sharding.spec) == str(jo.sharding.spec)
    e = _error_of(lambda: minijax.sharding.explicit_axes(lambda t: t, in_sharding=minijax.P())(x))
    assert type(e) is ValueError and "Context mesh cannot be empty" in str(e)


def check_visualize_array_sharding():
    import contextlib
    import io
    jm, mm = meshes()
    cases = [(("x", "y"), (8, 4)), (("x",), (8, 4)), ((None, "y"), (8, 4)), ((), (8, 4)),
             (("x",), (8,)), ((("x", "y"),), (16,)), (("y", "x"), (8, 8))]
    for spec, shape in cases:
        js, ms = both(jm, mm, *spec)
        texts = []
        for J, s in ((jax, js), (minijax, ms)):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                J.debug.visualize_array_sharding(J.device_put(np.ones(shape, np.float32), s))
            texts.append(buf.getvalue())
        assert texts[0] == texts[1], f"{spec} {shape}:\n{texts[1]}\n--- JAX:\n{texts[0]}"
    e = _error_of(minijax.debug.visualize_array_sharding, minijax.numpy.ones((2, 2, 2)))
    assert isinstance(e, ValueError) and "1 and 2 dimensions" in str(e)


# ---------------------------------------------------------------- host callbacks, sharded inputs

def _callback_program(J, mesh, spec):
    """pure_callback, ordered io_callback (called twice, then an unsharded call between) and
    debug.callback on an (8, 4) input laid out by `spec`; what each host function saw."""
    log = []

    def host(what):
        def fn(v):
            log.append((what, np.shape(v), np.asarray(v).tolist()))
            return np.asarray(v) + 1
        return fn

    sd = J.ShapeDtypeStruct((8, 4), np.float32)
    a = J.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                     J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec(*spec)))
    f = J.jit(lambda v: J.experimental.io_callback(
        host("io"), sd, J.pure_callback(host("pure"), sd, v * 2), ordered=True))
    one = J.jit(lambda v: J.experimental.io_callback(host("io, one device"), sd, v, ordered=True))
    J.debug.callback(host("eager"), a)  # outside jit: the whole array
    y1 = f(a)
    y2 = one(np.zeros((8, 4), np.float32))  # its token: back on one device, after y1's call
    y3 = f(a)
    J.effects_barrier()
    ordered = [e for e in log if e[0].startswith("io")]  # the token orders these, across calls
    return (sorted(log), ordered, [np.asarray(y).tolist() for y in (y1, y2, y3)],
            y3.sharding.is_fully_replicated)


def check_callbacks_see_whole_arrays():
    for types in (None, "auto"):  # Explicit axes (make_mesh's default) and Auto
        jm, mm = meshes(types)
        for spec in [("x", "y"), ("y",), ()]:
            got_j = _callback_program(jax, jm, spec)
            got_m = _callback_program(minijax, mm, spec)
            assert got_m == got_j, (types, spec, got_m, got_j)
            assert [w for w, *_ in got_j[1]] == ["io", "io, one device", "io"], got_j[1]
            assert [shape for _, shape, _ in got_j[0]] == [(8, 4)] * 6, got_j[0]


def _callback_lowering_and_errors(J, mesh):
    """The maximal-sharding annotations of an io_callback placed on device 5, and the
    errors for a NamedSharding `sharding=` and for a callback in a partial-manual shard_map."""
    a = J.device_put(np.ones((8, 4), np.float32),
                     J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("x")))
    sd = J.ShapeDtypeStruct((8, 4), np.float32)
    on5 = J.sharding.SingleDeviceSharding(J.devices()[5])
    text = J.jit(lambda v: J.experimental.io_callback(
        lambda u: u, sd, v, sharding=on5, ordered=True)).lower(a).as_text()
    found = sorted(re.findall(r"sdy\.mesh @maximal\w+ = <[^>]*>|"
                              r"sdy\.sharding_per_value<\[.*?\]>(?=\})", text))
    named = J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec())
    smap = J.shard_map(lambda v: J.pure_callback(lambda u: u, J.ShapeDtypeStruct(
        (2, 4), np.float32), v), mesh=mesh, in_specs=J.P("x"), out_specs=J.P("x"),
        axis_names={"x"})
    errs = [type(e).__name__ + ": " + str(e).splitlines()[0] for e in (
        _error_of(J.jit(lambda v: J.pure_callback(lambda u: u, sd, v, sharding=named)), a),
        _error_of(J.jit(smap), a))]
    return found, errs


def check_callback_lowering_and_errors():
    jm, mm = meshes("auto")
    (text_j, errs_j), (text_m, errs_m) = (_callback_lowering_and_errors(jax, jm),
                                          _callback_lowering_and_errors(minijax, mm))
    assert text_j == text_m and len(text_j) == 2, (text_j, text_m)
    assert errs_j[1] == errs_m[1], (errs_j, errs_m)  # partial-manual shard_map
    assert errs_j[0].split(", but got")[0] == errs_m[0].split(", but got")[0], (errs_j, errs_m)


def _ordered_in_shard_map(J, mesh):
    """An ordered io_callback per device inside shard_map, called twice: what each call saw
    (per call, sorted by device) and how the token crosses the manual computation."""
    log = []
    a = J.device_put(np.arange(16, dtype=np.float32).reshape(8, 2),
                     J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("x")))

    def body(v):
        return J.experimental.io_callback(lambda u: (log.append(u.tolist()), u * 2)[1],
                                          J.ShapeDtypeStruct((2, 2), np.float32), v,
                                          ordered=True)

    f = J.jit(J.shard_map(body, mesh=mesh, in_specs=J.P("x"), out_specs=J.P("x"),
                          axis_names={"x", "y"}))
    outs = [np.asarray(f(a)).tolist(), np.asarray(f(a + 100)).tolist()]
    J.effects_barrier()
    text = f.lower(a).as_text()
    manual = re.findall(r"manual_computation\(.*?\) (in_shardings=.*?) \(", text)
    # each device's second call after its first: the k-th time a shard was seen precedes
    # the k-th time it was seen plus 100 (devices run concurrently, so no global order)
    pos = {}
    for i, v in enumerate(log):
        pos.setdefault(str(v), []).append(i)
    in_order = all(a < b for v in log if v[0][0] < 100
                   for a, b in zip(pos[str(v)], pos[str((np.array(v) + 100).tolist())]))
    return sorted(log), in_order, outs, manual


def check_ordered_callback_inside_shard_map():
    jm, mm = meshes("auto")
    got, want = _ordered_in_shard_map(minijax, mm), _ordered_in_shard_map(jax, jm)
    assert got == want and len(want[0]) == 16 and want[1] and want[3], (got, want)

def _debug_in_partial_manual(J, mesh, manual, spec, shape):
    """debug.callback and debug.print in a shard_map manual along `manual` only: what the
    host saw (sorted: devices run concurrently), the printed lines and the nested manual
    computations of the lowered module."""
    import contextlib
    import io
    log = []
    a = J.device_put(np.arange(np.prod(shape), dtype=np.float32).reshape(shape),
                     J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec(*spec)))

    def body(v):
        w = v * 2  # the partitioner may split it along the automatic axes
        J.debug.callback(lambda u, s: log.append((np.shape(u), np.asarray(u).tolist(),
                                                  float(s))), w, w.sum())
        J.debug.print("sum={s}", s=v.sum())
        return v

    f = J.jit(J.shard_map(body, mesh=mesh, in_specs=J.P(*spec), out_specs=J.P(*spec),
                          axis_names=manual))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = f(a)
        J.effects_barrier()
    text = f.lower(a).as_text()
    nested = re.findall(r"in_shardings=\[.*?\] out_shardings=\[\] manual_axes=\{.*?\}", text)
    return sorted(log), sorted(buf.getvalue().splitlines()), np.asarray(out).tolist(), nested


def check_debug_callback_in_partial_manual_shard_map():
    jm, mm = meshes("auto")
    for manual, spec in (({"x"}, ("x",)), ({"y"}, (None, "y"))):
        got = _debug_in_partial_manual(minijax, mm, manual, spec, (8, 4))
        want = _debug_in_partial_manual(jax, jm, manual, spec, (8, 4))
        assert got == want and want[0] and want[3], (manual, got, want)
    # two automatic axes: JAX 0.10.2 raises TypeError (axis_index given two names); minijax
    # runs it once per shard of x, as JAX does with the two axes fused into one
    j3 = jax.make_mesh((2, 2, 2), ("x", "y", "z"), axis_types=(J_SH.AxisType.Auto,) * 3)
    m3 = minijax.make_mesh((2, 2, 2), ("x", "y", "z"), axis_types=(M_SH.AxisType.Auto,) * 3)
    e = _error_of(_debug_in_partial_manual, jax, j3, {"x"}, ("x",), (4, 4))
    assert isinstance(e, TypeError) and "axis_index" in str(e), e
    fused = jax.make_mesh((2, 4), ("x", "yz"), axis_types=AUTO)
    got = _debug_in_partial_manual(minijax, m3, {"x"}, ("x",), (4, 4))[:3]
    assert got == _debug_in_partial_manual(jax, fused, {"x"}, ("x",), (4, 4))[:3], got
    # Explicit automatic axes: JAX's error for closing the nested shard_map over a body value
    jm, mm = meshes()
    errs = [_error_of(_debug_in_partial_manual, J, m, {"x"}, ("x",), (8, 4))
            for J, m in ((jax, jm), (minijax, mm))]
    assert [type(e) for e in errs] == [NotImplementedError] * 2, errs
    assert str(errs[1]) == str(errs[0]).splitlines()[0], errs
    from minijax.interpreters import mlir
    from minijax.lax import parallel
    assert not parallel.ctx.meshes and not mlir._module_contexts  # nothing left behind
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace



def check_eager_ops_on_auto_mesh_keep_layout():
    # an eager op on an array laid out over an Auto mesh runs on the mesh (JAX's
    # apply_primitive jits the primitive), so the result's layout is XLA's choice in both
    jm, mm = meshes(AUTO)
    js, ms = both(jm, mm, "x", "y")
    v = np.arange(32, dtype=np.float32).reshape(8, 4)
    jx, mx = jax.device_put(v, js), minijax.device_put(v, ms)
    for op in (lambda J, a: a + 1, lambda J, a: J.numpy.sin(a), lambda J, a: a @ a.T,
               lambda J, a: a.sum(0), lambda J, a: a.T, lambda J, a: a * a):
        jo, mo = op(jax, jx), op(minijax, mx)
        assert type(mo.sharding).__name__ == type(jo.sharding).__name__, mo.sharding
        assert str(mo.sharding.spec) == str(jo.sharding.spec), (mo.sharding, jo.sharding)
        assert shards_of(mo) == shards_of(jo)
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace

# ---------------------------------------------------------------------------------------------
# Sharded programs under composition (tests/sharded_programs.py found these; one check each)
# ---------------------------------------------------------------------------------------------

def _layout(x):
    """What the two modules must agree on for a result: values, spec (without trailing Nones:
    `P('i')` and `P('i', None)` are one layout, and JAX writes either), mesh shape, type."""
    s = x.sharding
    spec = type(s).__name__
    if hasattr(s, "spec"):
        parts = list(s.spec)
        while parts and parts[-1] is None:
            parts.pop()
        spec = str(type(s.spec)(*parts))
    return (np.round(np.asarray(x), 5).tolist(), spec,
            tuple(getattr(getattr(s, "mesh", None), "axis_sizes", ())), str(J_typeof(x)))


def J_typeof(x):
    return (jax if isinstance(x, jax.Array) else minijax).typeof(x)


def _both(program):
    """program(J) under both modules: results (or error types) that must agree."""
    out = []
    for J in (jax, minijax):
        try:
            out.append([_layout(x) for x in J.tree_util.tree_leaves(program(J))])
        except Exception as e:  # the error's type is the outcome
            out.append(type(e).__name__)
    assert out[0] == out[1], out
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace
    return out[0]


def _explicit_1d(J):
    return J.make_mesh((8,), ("i",), axis_types=(J.sharding.AxisType.Explicit,))


def check_jit_out_shardings_retype_the_result():
    # the result's type and buffers follow out_shardings, not the argument's sharding, so a
    # shard_map fed with it reads what it expects (it crashed the interpreter before)
    def program(J):
        S = J.sharding
        P = S.PartitionSpec
        mesh = _explicit_1d(J)
        with J.set_mesh(mesh):
            x = J.device_put(np.ones((8, 4), np.float32), S.NamedSharding(mesh, P()))
            v = J.jit(lambda p: p * 2.0, out_shardings=S.NamedSharding(mesh, P("i")))(x)
            w = J.shard_map(lambda a: a + 1.0, mesh=mesh, in_specs=P("i"),
                            out_specs=P("i"))(v)
            return v, w
    got = _both(program)
    assert got[0][1] == "P('i',)" and got[0][3] == "float32[8@i,4]", got


def check_scalar_on_mesh_reads_back():
    def program(J):
        S = J.sharding
        P = S.PartitionSpec
        for types in (None, (S.AxisType.Auto,)):
            mesh = J.make_mesh((8,), ("i",), axis_types=types)
            x = J.device_put(np.float32(3.0), S.NamedSharding(mesh, P()))
            yield x, J.jit(lambda a: a * 2)(x), x.addressable_shards[5].data
    got = _both(lambda J: list(program(J)))
    assert got[0][0] == 3.0 and got[1][0] == 6.0, got


def check_jit_on_a_mesh_of_one_device():
    # XLA partitions nothing for one device: the program runs on that device, as JAX's does
    def program(J):
        S = J.sharding
        P = S.PartitionSpec
        mesh = J.make_mesh((1,), ("x",), devices=[J.devices()[6]])
        x = J.device_put(np.arange(16, dtype=np.float32).reshape(4, 4),
                         S.NamedSharding(mesh, P("x")))
        y = J.jit(lambda q: q @ q)(x)
        assert sorted(d.id for d in y.devices()) == [6]
        return [y, J.jit(lambda q: (q.sum(), q * 2))(x)]
    got = _both(program)
    assert got[0][0][0] == [56.0, 62.0, 68.0, 74.0], got


def check_eager_cache_keeps_placement():
    # the eager-op caches are keyed on whether an operand lies on a mesh too
    def program(J):
        S = J.sharding
        P = S.PartitionSpec
        mesh = J.make_mesh((4, 2), ("i", "j"), axis_types=(S.AxisType.Auto,) * 2)
        x = J.device_put(np.ones((8, 4), np.float32), S.NamedSharding(mesh, P()))
        np.asarray(x)  # a host copy too: the one-op fast path must not take it
        return [J.numpy.sin(J.numpy.ones((8, 4))), J.numpy.sin(x), x * x,
                J.numpy.ones((8, 4)) * J.numpy.ones((8, 4)), x * x]
    got = _both(program)
    assert got[1][1] == "P()" and got[0][1] == "SingleDeviceSharding", got


def check_psum_over_varying_and_invariant_axes():
    def program(J):
        S = J.sharding
        P = S.PartitionSpec
        mesh = J.make_mesh((2, 4), ("a", "b"), axis_types=(S.AxisType.Explicit,) * 2)
        x = J.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                         S.NamedSharding(mesh, P("a")))
        sm = functools.partial(J.shard_map, mesh=mesh, in_specs=P("a"), out_specs=P())
        ok = sm(lambda v: J.lax.psum(J.lax.psum(v, "a"), "b"))(x)  # one state at a time
        return ok, sm(lambda v: J.lax.psum(v, ("a", "b")))(x)      # varying + invariant
    assert _both(program) == "ValueError"
    _both(lambda J: program(J)[0])


def check_committed_in_shardings_under_transformations():
    # in_shardings that contradict a committed argument raise under grad, jvp and vmap too
    def program(J, how, types):
        S = J.sharding
        P = S.PartitionSpec
        mesh = J.make_mesh((8,), ("i",), axis_types=(getattr(S.AxisType, types),))
        x = J.device_put(np.ones((8, 8), np.float32), S.NamedSharding(mesh, P("i")))
        f = J.jit(lambda v: (v * v).sum(), in_shardings=S.NamedSharding(mesh, P()))
        with J.set_mesh(mesh):
            if how == "grad":
                return J.grad(f)(x)
            if how == "jvp":
                return J.jvp(f, (x,), (x,))
            if how == "vmap":
                return J.vmap(f)(x)
            return J.jit(J.grad(f))(x)  # inside jit x is a tracer: nothing is committed
    for how in ("grad", "jvp", "vmap", "jit"):
        for types in ("Auto", "Explicit"):
            got = _both(functools.partial(program, how=how, types=types))
            assert (got == "ValueError") == (how != "jit"), (how, types, got)


def check_grad_seed_on_the_mesh_in_context():
    # grad's 1 is replicated over the mesh in context, so the gradient is computed there
    def program(J, types, ctx):
        S = J.sharding
        P = S.PartitionSpec
        mesh = J.make_mesh((2, 4), ("a", "b"), axis_types=(getattr(S.AxisType, types),) * 2)
        x = J.device_put(np.ones((8, 8), np.float32), S.NamedSharding(mesh, P("b")))
        if ctx:
            with J.set_mesh(mesh):
                return J.grad(lambda a: a.T.sum())(x)
        return J.grad(lambda a: a.T.sum())(x)
    for types, ctx in (("Auto", True), ("Auto", False), ("Explicit", True)):
        _both(functools.partial(program, types=types, ctx=ctx))


def check_sharding_in_types_errors():
    # vmap over dimensions split differently, shard_map in_specs that contradict the type,
    # reshard naming an Auto axis, a PartitionSpec constraint with no mesh in context
    def program(J, case):
        S = J.sharding
        P = S.PartitionSpec
        mesh = J.make_mesh((2, 4), ("a", "b"), axis_types=(S.AxisType.Explicit,
                                                           S.AxisType.Auto))
        x = J.device_put(np.ones((8, 8), np.float32), S.NamedSharding(mesh, P("a")))
        y = J.device_put(np.ones((8, 8), np.float32), S.NamedSharding(mesh, P()))
        if case == "vmap":
            return J.vmap(lambda u, v: u + v)(x, y)
        if case == "shard_map":
            m2 = J.make_mesh((2, 4), ("a", "b"), axis_types=(S.AxisType.Explicit,) * 2)
            z = J.device_put(np.ones((8, 8), np.float32), S.NamedSharding(m2, P("a")))
            return J.shard_map(lambda u: u, mesh=m2, in_specs=P("b"), out_specs=P("b"))(z)
        if case == "reshard":
            with J.set_mesh(mesh):
                return S.reshard(x, P("b"))
        return J.jit(lambda u: J.lax.with_sharding_constraint(u, P("a")))(y)
    for case, err in (("vmap", "ValueError"), ("shard_map", "ValueError"),
                      ("reshard", "ValueError"), ("wsc", "RuntimeError")):
        got = _both(functools.partial(program, case=case))
        assert got == err, (case, got)


def check_callback_result_on_one_device_then_constrained_under_jvp():
    # a pure_callback's result lives on one device unless constrained (JAX: GSPMDSharding
    # {maximal device=0}): it must not be read as replicated by the next computation
    def program(J):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = J.make_mesh((2, 2, 2), ("a", "b", "c"), axis_types=(S.AxisType.Auto,) * 3)
        x = J.device_put(np.arange(64, dtype=np.float32).reshape(8, 8) / 10, NS(mesh, P()))
        sds = J.ShapeDtypeStruct(x.shape, x.dtype)
        cb = J.jit(lambda v: J.pure_callback(np.sin, sds, v), out_shardings=NS(mesh, P("a", "b")))

        def f(v):
            y = cb(J.lax.stop_gradient(v)) * v
            return J.lax.with_sharding_constraint(y, NS(mesh, P("c")))
        with J.set_mesh(mesh):
            return J.jvp(f, (x,), (x,))
    got = _both(program)
    x = np.arange(64, dtype=np.float32).reshape(8, 8) / 10
    np.testing.assert_allclose(got[0][0], np.sin(x) * x, atol=1e-5)
    assert got[0][1] == "P('c',)", got[0][1]


def check_mislabelled_buffer_raises_instead_of_crashing():
    # the guard before the runtime: an Array whose sharding does not describe its buffer (the
    # state class 1's results were in) raises AssertionError; it used to crash the process
    mesh = minijax.make_mesh((8,), ("i",), axis_types=(M_SH.AxisType.Auto,))
    good = minijax.device_put(np.ones((8, 4), np.float32),
                              M_SH.NamedSharding(mesh, M_SH.PartitionSpec("i")))
    bad = minijax.Array(good.aval, None, good.device_buffer(), True,
                        M_SH.NamedSharding(mesh, M_SH.PartitionSpec()))
    e = _error_of(minijax.jit(lambda a: a + 1.0), bad)
    assert isinstance(e, AssertionError) and "laid out as" in str(e), e
    np.testing.assert_array_equal(np.asarray(minijax.jit(lambda a: a + 1.0)(good)), 2.0)


def check_nested_jit_out_shardings_type_by_its_jaxpr_when_staged():
    # under an outer jit a nested jit's out_shardings do not change its outputs' types (JAX
    # types them by the jaxpr); computed now (eager, under jvp) the result carries them
    def program(J, outer):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = J.make_mesh((2, 2, 2), ("a", "b", "c"), axis_types=(S.AxisType.Explicit,) * 3)
        x = J.device_put(np.arange(32, dtype=np.float32).reshape(4, 8), NS(mesh, P("c", None)))
        f = lambda v: J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P("c", ("a", "b"))))(
            v).sum(axis=0)
        return J.jit(f)(x) if outer else J.jvp(f, (x,), (x,))
    assert _both(functools.partial(program, outer=True))[0][1] == "P()"
    assert _both(functools.partial(program, outer=False))[0][1] == "P(('a', 'b'),)"


def check_sequential_vmap_of_a_callback_stays_on_the_mesh():
    # vmap_method="sequential" is a scan: eagerly on a mesh it runs there (JAX jits every
    # primitive), so the stacked result is replicated on the mesh, not gathered on one
    # device; on Explicit axes a batch dimension split in the type is JAX's ValueError
    def program(J, kind, spec):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = J.make_mesh((4, 2), ("a", "b"), axis_types=(getattr(S.AxisType, kind),) * 2)
        x = J.device_put(np.arange(64, dtype=np.float32).reshape(8, 8) / 10, NS(mesh, spec(P)))
        cb = lambda v: J.pure_callback(np.sin, J.ShapeDtypeStruct(v.shape, v.dtype), v,
                                       vmap_method="sequential")
        with J.set_mesh(mesh):
            return J.vmap(cb)(x)
    x = np.arange(64, dtype=np.float32).reshape(8, 8) / 10
    got = _both(functools.partial(program, kind="Auto", spec=lambda P: P("a")))
    np.testing.assert_allclose(got[0][0], np.sin(x), atol=1e-5)
    assert got[0][1] == "P()", got
    assert _both(functools.partial(program, kind="Explicit", spec=lambda P: P(None, "b")))[0][
        1] == "P()"
    assert _both(functools.partial(program, kind="Explicit", spec=lambda P: P("a"))) == \
        "ValueError"


def check_mixed_mesh_layouts_as_jax():
    # Explicit and Auto axes: a shard_map's out_specs give its output's layout, Auto axes
    # before Explicit ones included; a value typed unsplit is not split over the Explicit axes
    # its type leaves out (JAX's `replicated={...}`)
    def program(J, which):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = J.make_mesh((2, 2, 2), ("a", "b", "c"), axis_types=(
            S.AxisType.Explicit, S.AxisType.Auto, S.AxisType.Explicit))
        x = J.device_put(np.arange(64, dtype=np.float32).reshape(8, 8) / 10,
                         NS(mesh, P(("b", "c"), "a")))
        if which == "shard_map":
            spec = P(None, ("b", "a"))
            f = lambda v: J.shard_map(lambda t: lax.pmin(t, ("a", "b")), mesh=mesh,
                                      in_specs=spec, out_specs=spec)(v * 2.0)
        else:
            f = lambda v: S.reshard(v.sum(axis=0), P(None))
        with J.set_mesh(mesh):
            return J.jit(f)(x)
    assert _both(functools.partial(program, which="shard_map"))[0][1] == "P(None, ('b', 'a'))"
    assert _both(functools.partial(program, which="reshard"))[0][1] == "P()"


def check_indivisible_out_shardings_raise_before_compiling():
    # JAX: IndivisibleError (a ValueError) when the outputs are laid out; minijax read back a
    # layout no PartitionSpec describes (NotImplementedError)
    def program(J):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = J.make_mesh((4, 2), ("a", "b"), axis_types=(S.AxisType.Explicit,) * 2)
        x = J.device_put(np.ones((4, 16), np.float32), NS(mesh, P("b", None)))
        with J.set_mesh(mesh):
            return J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P(("b", "a"), None)))(x)
    assert _both(program) == "IndivisibleError"


def check_is_equivalent_to_as_jax():
    # specs that spell one layout differently: trailing Nones, a spec one or two entries
    # longer than ndim (with Nones), axes of size 1 that split nothing, other meshes/devices
    def answers(J):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        mesh, other = J.make_mesh((2, 4), ("a", "b")), J.make_mesh((4, 2), ("a", "b"))
        devs = J.devices()
        rev = J.sharding.Mesh(np.array(devs[::-1]).reshape(2, 4), ("a", "b"))
        one = J.make_mesh((1,), ("x",), devices=devs[:1])
        single = J.sharding.SingleDeviceSharding(devs[0])
        cases = [(NS(mesh, P(*s1)), NS(mesh, P(*s2)), nd) for s1, s2, nd in [
            (("a",), ("a", None), 2), (("a",), ("a", None), 1), (("a", None, None), ("a",), 2),
            ((), (None,), 0), ((None,), (), 0), (("a", "b"), ("a",), 2),
            ((("a", "b"),), (("a", "b"), None), 1), (("b", "a"), ("a", "b"), 2),
            ((None, "a"), ("a",), 2), ((), (None, None), 1), ((("a",),), ("a",), 1)]]
        cases += [(NS(mesh, P("a")), NS(other, P("a")), 1), (NS(mesh, P()), NS(rev, P()), 1),
                  (NS(mesh, P()), single, 1), (NS(one, P()), single, 1),
                  (NS(one, P("x")), single, 1), (single, NS(one, P(None, "x")), 2),
                  (NS(mesh, P("a"), memory_kind="pinned_host"), NS(mesh, P("a")), 1)]
        return [s1.is_equivalent_to(s2, nd) for s1, s2, nd in cases]
    want = answers(jax)
    assert answers(minijax) == want, want
    assert True in want and False in want
    # a mesh axis past ndim: JAX fails inside (IndexError), minijax says what is wrong
    mm = minijax.make_mesh((2, 4), ("a", "b"))
    s = M_SH.NamedSharding(mm, M_SH.PartitionSpec(None, "a"))
    try:
        s.is_equivalent_to(M_SH.NamedSharding(mm, M_SH.PartitionSpec()), 1)
    except ValueError as e:
        assert "P(None, 'a')" in str(e) and "past" in str(e), e
    else:
        raise AssertionError("no error for a mesh axis past ndim")


def _add(a, b):
    return a + b


def check_arguments_on_different_meshes_name_their_device_ids_as_jax():
    # two meshes of other devices, or of the same devices in another order: JAX's ValueError
    # names each argument (or given sharding) with its device ids, for jit, eager ops and
    # in_shardings alike
    def errors(J):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        d = J.devices()
        m1 = J.sharding.Mesh(np.array(d[:4]), ("a",))
        out = []
        for other in (d[4:], d[:4][::-1]):
            m2 = J.sharding.Mesh(np.array(other), ("a",))
            x = J.device_put(np.arange(8.0), NS(m1, P("a")))
            y = J.device_put(np.arange(8.0), NS(m2, P("a")))
            two = (NS(m1, P("a")), NS(m2, P("a")))
            for f, args in ((J.jit(_add), (x, y)), (J.numpy.add, (x, y)),
                            (J.jit(_add, in_shardings=two), (np.ones(8), np.ones(8)))):
                e = _error_of(f, *args)
                out.append((type(e), str(e)))
        return out
    want = errors(jax)
    assert errors(minijax) == want, want
    assert all("device ids [0, 1, 2, 3]" in e for _, e in want)


def check_device_put_to_any_device_and_committed_rules_as_jax():
    # device_put to a device other than the first commits the array there; eager ops and jit
    # follow it (an uncommitted operand joins it), committed arrays on two devices raise,
    # in_shardings of another single device moves the argument, of a mesh raises
    def outcomes(J):
        jnp, d = J.numpy, J.devices()
        NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
        SDS = J.sharding.SingleDeviceSharding
        mesh = J.make_mesh((8,), ("a",))
        x, y = J.device_put(np.arange(4.0), d[1]), J.device_put(np.arange(4.0), d[2])
        u, on0 = jnp.arange(4.0), J.device_put(np.arange(4.0), d[0])
        z = J.device_put(np.arange(8.0), d[1])
        rep = J.device_put(np.arange(8.0), NS(mesh, P()))
        cases = [
            lambda: x, lambda: x + 1, lambda: x + u, lambda: x + y, lambda: x + on0,
            lambda: J.jit(_add)(x, u), lambda: J.jit(_add)(x, y), lambda: x.sum(),
            lambda: x[0], lambda: jnp.where(x > 1, x, 0.0), lambda: J.device_put(x),
            lambda: J.device_put(x, d[3]), lambda: J.device_put(u, SDS(d[3])),
            lambda: J.jit(_double, in_shardings=SDS(d[0]))(x),
            lambda: J.jit(_double, in_shardings=SDS(d[1]))(u),
            lambda: J.jit(_double, in_shardings=NS(mesh, P("a")))(z),
            lambda: J.jit(_double, in_shardings=NS(mesh, P("a")))(rep),
            lambda: J.jit(lambda a, b: a[:4] * b)(rep, x)]
        out = []
        for f in cases:
            try:
                r = f()
            except ValueError as e:
                out.append(str(e).replace("<locals>.outcomes.<locals>.", ""))
                continue
            out.append((sorted(dev.id for dev in r.devices()), r.committed, repr(r.sharding),
                        np.asarray(r).tolist()))
        return out
    want = outcomes(jax)
    got = outcomes(minijax)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, g, w)
    assert sum(isinstance(w, str) for w in want) >= 4


def check_default_device_as_jax():
    # jax_default_device (and the default_device context manager): uncommitted arrays are
    # made there, eager ops and jit on them run there; a committed operand wins; arrays made
    # under a previous default stay where they are, while computations follow the new one
    def outcomes(J):
        jnp, d = J.numpy, J.devices()
        out = []

        def record(label, r):
            out.append((label, sorted(dev.id for dev in r.devices()), r.committed,
                        repr(r.sharding), np.asarray(r).tolist()))
        try:
            J.config.update("jax_default_device", d[3])
            x = jnp.ones(3)
            record("ones", x)
            record("jit", J.jit(_double)(x))
            record("eager", x + 1)
            record("device_put", J.device_put(np.arange(3.0)))
            record("committed to the default", J.device_put(np.arange(3.0), d[3]))
            record("shard", x.addressable_shards[0].data)
            c = J.device_put(np.arange(3.0), d[5])
            record("committed wins (eager)", c + x)
            record("committed wins (jit)", J.jit(_add)(c, x))
            J.config.update("jax_default_device", None)
            record("made before", x)
            record("eager after", x * 3)
            record("jit after", J.jit(_double)(x))
            with J.default_device(d[6]):
                record("in the block", jnp.zeros(2))
                record("jit in the block", J.jit(lambda: jnp.ones(2))())
            record("after the block", jnp.zeros(2))
            J.config.update("jax_default_device", "cpu")
            record("platform name", jnp.zeros(2))
            try:
                J.config.update("jax_default_device", 3)
            except ValueError as e:
                out.append(str(e))
        finally:
            J.config.update("jax_default_device", None)
        return out
    want = outcomes(jax)
    got = outcomes(minijax)
    assert len(got) == len(want) == 16
    for g, w in zip(got, want):
        assert g == w, (g, w)


def _double(a):
    return a * 2


def _tree_fn(t, z):
    return {"o": t["a"] * 2, "p": (t["b"][0] + z, t["b"][1])}


def check_shardings_as_pytree_prefixes_and_their_errors_as_jax():
    # in_shardings / out_shardings as prefixes of dicts and nested tuples with None leaves;
    # a spec longer than its leaf's rank or a dimension its shards do not divide: JAX's error
    # (type and text, the leaf named by its key path) before anything compiles
    def outcomes(J, explicit):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        kind = J.sharding.AxisType.Explicit if explicit else J.sharding.AxisType.Auto
        m = J.make_mesh((4, 2), ("x", "y"), axis_types=(kind, kind))

        def s(*p):
            return NS(m, P(*p))
        tree = {"a": np.ones((8, 4), np.float32),
                "b": (np.ones(8, np.float32), np.ones((4, 2), np.float32))}
        cases = [
            dict(in_shardings=({"a": s("x"), "b": s()}, None)),
            dict(in_shardings=({"a": s("x", "y"), "b": (s("y"), None)}, s())),
            dict(in_shardings=[{"a": None, "b": (s("x"), s(None, "y"))}, None]),
            dict(out_shardings={"o": s("x"), "p": (s(), None)}),
            dict(out_shardings={"o": s(None, "y"), "p": s("y")}),
            dict(in_shardings=({"a": s(), "b": (s(), s("x"))}, None),
                 out_shardings={"o": s(), "p": (s(), s("x"))}),
            # errors whose text JAX and minijax share
            dict(in_shardings=({"a": s(), "b": (s("x", None), None)}, None)),
            dict(out_shardings={"o": s(None, None, "x"), "p": s()}),
            dict(in_shardings=({"a": s(None, ("x", "y")), "b": s()}, None)),
            dict(out_shardings={"o": s(), "p": (s(), s(None, ("x", "y")))}),
            dict(in_shardings=(s(), s("x"))),
            dict(in_shardings=(s(),)),
            # not a prefix: the same error type (JAX's text lists the mismatch at length)
            dict(in_shardings=({"a": s(), "c": s()}, None)),
            dict(in_shardings=({"a": s("x", "y", None)}, None))]
        out = []
        for i, kw in enumerate(cases):
            try:
                r = J.jit(_tree_fn, **kw)(tree, np.float32(1))
                out.append([repr(leaf.sharding.spec) for leaf in J.tree_util.tree_leaves(r)])
            except ValueError as e:
                out.append((type(e).__name__, str(e) if i < 12 else ""))
        return out
    for explicit in (True, False):
        want = outcomes(jax, explicit)
        for i, (g, w) in enumerate(zip(outcomes(minijax, explicit), want)):
            assert g == w, (explicit, i, g, w)
        assert ("IndivisibleError", want[8][1]) == want[8], want[8]


def check_compiled_step_fed_its_results_as_jax():
    """A compiled training-like step over many arguments whose equal shardings are distinct
    objects, called again on its own results: values, specs and types as JAX's at every
    call; the results share the executor's sharding objects (the identity fast path), and a
    buffer that is not what its Array says is still caught on that path."""
    specs = [("x", "y"), (None, "y"), ("x",), ()] * 3
    vals = [np.arange(32, dtype=np.float32).reshape(8, 4) + i for i in range(len(specs))]
    for types in (None, "auto"):
        jm, mm = meshes(types)

        def run(J, mesh):
            shs = [J.sharding.NamedSharding(mesh, J.P(*sp)) for sp in specs]  # distinct
            tree = {"p": [J.device_put(v, sh) for v, sh in zip(vals[:6], shs[:6])],
                    "o": {"m": [J.device_put(v, sh) for v, sh in zip(vals[6:], shs[6:])]}}
            shtree = {"p": shs[:6], "o": {"m": shs[6:]}}
            step = J.jit(lambda t: J.tree_util.tree_map(lambda a: a * 2 + 1, t),
                         in_shardings=(shtree,), out_shardings=shtree)
            compiled = step.lower(tree).compile()
            seen, first = [], J.tree_util.tree_leaves(tree)
            for _ in range(3):
                tree = compiled(tree)
                seen.append([(np.asarray(a).tolist(), tuple(a.sharding.spec), str(J.typeof(a)))
                             for a in J.tree_util.tree_leaves(tree)])
            return seen, compiled, tree, first
        want = run(jax, jm)[0]
        got, compiled, tree, first = run(minijax, mm)
        assert got == want, types
        ex = compiled._executor
        leaves = minijax.tree_util.tree_leaves(tree)
        # results, and the placed arrays once passed (equal shardings), hold its objects
        assert all(a._sharding is s for a, s in zip(leaves, ex.in_shardings))
        assert all(a._sharding is s for a, s in zip(first, ex.in_shardings))
        assert len({id(s) for s in ex.in_shardings}) == 4  # one object per distinct sharding
        # an Array claiming the first input's sharding over a buffer laid out otherwise
        wrong = minijax.device_put(vals[0], M_SH.NamedSharding(mm, M_SH.PartitionSpec()))
        bad = minijax.Array(leaves[0].aval, None, wrong._buf, True, ex.in_shardings[0])
        flat = [bad, *leaves[1:]]
        try:
            compiled(minijax.tree_util.tree_unflatten(compiled._in_tree.children()[0]
                                                      .children()[0], flat))
        except AssertionError as e:
            assert "has shape (8, 4) and sharding" in str(e), e
        else:
            raise AssertionError("a mislabelled buffer reached the runtime")


def check_arguments_a_jit_does_not_read_do_not_choose_its_devices():
    # as JAX (keep_unused=False) an argument nothing computed reads is not an input of the
    # executable: a gradient that does not depend on its argument on a mesh, or a constant,
    # is computed on the default device (seed 2281 of tests/sharded_programs.py); with the
    # mesh in context, on its devices (seed 2233)
    def program(J):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = J.make_mesh((4, 2), ("a", "b"), axis_types=(S.AxisType.Auto,) * 2)
        x = J.device_put(np.ones((8,), np.float32), NS(mesh, P()))
        grad = J.grad(lambda a: (a * 2.0 + 1.0).sum())
        outs = (J.jit(grad, in_shardings=(None,))(x),
                J.jit(lambda a: J.numpy.full(a.shape, 2.0))(x), J.jit(lambda a: a * 2.0)(x))
        with J.set_mesh(mesh):
            return (*outs, J.jit(grad, in_shardings=(None,))(x))
    got = _both(program)
    assert [g[1:3] for g in got] == [("SingleDeviceSharding", ()), ("SingleDeviceSharding", ()),
                                     ("P()", (4, 2)), ("P()", (4, 2))], got


def check_device_put_of_a_tree_of_shardings_or_devices():
    # issue 45: a dict or list of shardings (or devices), a prefix of the value's tree
    jm, mm = meshes()
    for J, m in ((jax, jm), (minijax, mm)):
        S, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
        out = J.device_put({"a": np.ones(8), "b": [np.ones(4), np.ones(4)]},
                           {"a": S(m, P("x")), "b": S(m, P())})
        assert [str(out["a"].sharding.spec), str(out["b"][1].sharding.spec)] == \
            ["P('x',)", "P()"], out
        a, b = J.device_put([np.ones(2), np.ones(2)], [J.devices()[3], J.devices()[5]])
        assert ([d.id for d in a.devices()], [d.id for d in b.devices()]) == ([3], [5])


def check_reshape_adding_or_removing_size_one_dimensions():
    # issue 45: (8@x,) -> (1, 8@x) raised "This reshape is not supported"; JAX types it
    cases = [((8,), ("x",), (1, 8)), ((8,), ("x",), (8, 1)), ((8,), ("x",), (1, 8, 1)),
             ((1, 8), (None, "x"), (8,)), ((8, 1), ("x", None), (8,)),
             ((8, 4), ("x", "y"), (1, 8, 1, 4)), ((4, 1, 2), ("x", None, "y"), (4, 2)),
             ((4, 1, 1), ("x", None, None), (1, 4)), ((16,), ("x",), (4, 4))]
    jm, mm = meshes()
    for shape, spec, new in cases:
        specs = []
        for J, m in ((jax, jm), (minijax, mm)):
            x = J.device_put(np.zeros(shape, np.float32),
                             J.sharding.NamedSharding(m, J.sharding.PartitionSpec(*spec)))
            with J.set_mesh(m):
                specs.append(str(J.jit(lambda v, new=new: v.reshape(new))(x).sharding.spec))
        assert specs[0] == specs[1], (shape, spec, new, specs)


def check_jnp_reshape_out_sharding():
    jm, mm = meshes()
    got = []
    for J, m in ((jax, jm), (minijax, mm)):
        P = J.sharding.PartitionSpec
        x = J.device_put(np.arange(16.0, dtype=np.float32), J.sharding.NamedSharding(m, P("x")))
        with J.set_mesh(m):
            a = J.jit(lambda v, J=J, P=P: J.numpy.reshape(v, (4, 4),
                                                          out_sharding=P(None, "x")))(x)
            b = x.reshape(8, 2, out_sharding=P("x", None))
        got.append((str(a.sharding.spec), np.asarray(a).tolist(), str(b.sharding.spec)))
    assert got[0] == got[1], got


def check_jit_partition_spec_shardings_under_set_mesh():
    # issue 45: jit(out_shardings=P(...)) was refused under set_mesh
    jm, mm = meshes()
    got = []
    for J, m in ((jax, jm), (minijax, mm)):
        P = J.sharding.PartitionSpec
        with J.set_mesh(m):
            f = J.jit(lambda v: v * 2, in_shardings=P("x"), out_shardings=P(None))
            g = J.jit(lambda v, w: (v + w, v), out_shardings=(P("x"), P()))
            y, (a, b) = f(np.arange(8.0, dtype=np.float32)), g(np.ones(8, np.float32), 1.0)
        got.append([str(y.sharding.spec), np.asarray(y).tolist(), str(a.sharding.spec),
                    str(b.sharding.spec)])
    assert got[0] == got[1], got


def check_in_shardings_on_a_reordered_mesh_move_the_argument_as_jax():
    # JAX compares an argument's layout with in_shardings' as HLO shardings, which number a
    # mesh's devices by position: the same layout over the same mesh shape with the devices
    # in another order is accepted and the argument moved; another layout still raises
    got = []
    for J in (jax, minijax):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        explicit = (J.sharding.AxisType.Explicit,) * 2
        m1 = J.make_mesh((4, 2), ("x", "y"), axis_types=explicit)
        m2 = J.sharding.Mesh(np.array(J.devices()[::-1]).reshape(4, 2), ("x", "y"),
                             axis_types=explicit)
        x = J.device_put(np.arange(8.0, dtype=np.float32), NS(m1, P("x")))
        out = J.jit(lambda a: a * 2, in_shardings=NS(m2, P("x")))(x)
        row = [str(out.sharding), out.committed,
               [(s.device.id, np.asarray(s.data).tolist()) for s in out.addressable_shards]]
        try:
            J.jit(lambda a: a * 2, in_shardings=NS(m2, P("y")))(x)
        except ValueError as e:
            row.append(str(e).splitlines()[0])
        got.append(row)
    assert got[0] == got[1], got


def _spmd_cases(J):
    """vmap(spmd_axis_name=) programs, each returning what to compare (or raising)."""
    P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
    auto = J.make_mesh((4, 2), ("x", "y"), axis_types=(J.sharding.AxisType.Auto,) * 2)
    explicit = J.make_mesh((4, 2), ("x", "y"))
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4)

    def constrained(spec):
        return lambda a: J.lax.with_sharding_constraint(a * 2, NS(auto, spec))

    def shmap(spec):  # (a body varying over the axes of `spec` only)
        return lambda a: J.shard_map(lambda b: b * 2 + J.lax.axis_index(spec[0]), mesh=auto,
                                     in_specs=spec, out_specs=spec)(a)

    def on_explicit(spmd, unmapped=False):
        with J.set_mesh(explicit):
            a = J.device_put(x, P("x"))
            f = J.vmap(lambda u, v: u * 2 + v, spmd_axis_name=spmd,
                       in_axes=(0, None if unmapped else 0))
            return str(f(a, a).sharding.spec)

    def jitted(f, *args):
        out = J.jit(f)(*args)
        text = J.jit(f).lower(*args).as_text()
        return (str(out.sharding.spec), np.asarray(out).tolist(),
                re.findall(r"sharding_constraint %\w+ <@mesh, \[[^\]]*\]>", text))

    inner = J.jit(lambda a: a + 1, out_shardings=NS(auto, P("y")))
    return {
        "constraint": lambda: jitted(J.vmap(constrained(P("y")), spmd_axis_name="x"), x),
        "two_axes": lambda: jitted(J.vmap(constrained(P(None)), in_axes=1,
                                          spmd_axis_name=("x", "y")), x.T),
        "eager": lambda: str(J.vmap(constrained(P("y")), spmd_axis_name="x")(x).sharding),
        "name_in_spec": lambda: J.jit(J.vmap(constrained(P("x")), spmd_axis_name="x"))(x),
        "shard_map": lambda: jitted(J.vmap(shmap(P("y")), spmd_axis_name="x"), x),
        "shard_map_name_in_specs": lambda: J.jit(J.vmap(shmap(P("x")),
                                                        spmd_axis_name="x"))(x),
        "nested_jit": lambda: jitted(J.vmap(inner, spmd_axis_name="x"), x),
        "explicit_same_axis": lambda: on_explicit("x"),
        "explicit_other_axis": lambda: on_explicit("y"),
        "explicit_unmapped_split": lambda: on_explicit(None, unmapped=True),
    }


def check_vmap_spmd_axis_name_as_jax():
    # the batch dimension split over spmd_axis_name in constraints, nested jits' shardings
    # and shard_map's specs (the body batching its shard of the batch); on an Explicit mesh
    # the arguments' type says it (the same axes, or JAX's ValueError); an unmapped
    # argument split over the vmapped axes: JAX's ValueError
    cases = [_spmd_cases(J) for J in (jax, minijax)]
    for name in cases[0]:
        got = []
        for case in cases:
            try:
                got.append(case[name]())
            except ValueError as e:
                got.append(("ValueError", str(e).splitlines()[0]))
        assert got[0] == got[1], (name, got)


def _partition_spec_calls(J):
    P = J.sharding.PartitionSpec
    x = np.arange(8.0, dtype=np.float32)
    f = J.jit(lambda a: a * 2, out_shardings=P("x"))
    g = J.jit(lambda a: a * 2, in_shardings=P("x"))
    row = []
    for shape in ((4, 2), (2, 4)):
        with J.set_mesh(J.make_mesh(shape, ("x", "y"))):
            row += [str(f(x).sharding), str(g(x).sharding)]
    h = J.jit(lambda a: (a, a), out_shardings=(P("x"), None))
    for call, args in ((f, (x,)), (g, (x,)), (h, (x,)), (J.sharding.reshard, (x, P("x")))):
        try:
            call(*args)
        except (RuntimeError, ValueError) as e:
            row.append((type(e).__name__, str(e)))
    return row


def check_jit_partition_specs_read_the_mesh_at_call_time_as_jax():
    # a PartitionSpec in jit's in/out_shardings means the mesh in context when the jitted
    # function is called (one jit, two meshes); none set: JAX's RuntimeError (reshard's
    # ValueError for its out_shardings)
    got = [_partition_spec_calls(J) for J in (jax, minijax)]
    assert got[0] == got[1], got


def check_make_array_from_callback_calls_back_once_per_device_as_jax():
    # once per device, a block held by several devices once for each; replicated: once
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    got = []
    for J in (jax, minijax):
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        mesh = J.make_mesh((4, 2), ("x", "y"))
        row = []
        for spec in (P("x"), P("x", "y"), P(None, "y"), P()):
            calls = []

            def block(idx, calls=calls):
                calls.append(str(idx))
                return x[idx]
            arr = J.make_array_from_callback((8, 4), NS(mesh, spec), block)
            row.append((str(spec), sorted(calls), np.asarray(arr).tolist()))
        got.append(row)
    assert got[0] == got[1], got


def _indivisible_out_sharding_errors(J):
    P = J.sharding.PartitionSpec
    rows = []
    with J.set_mesh(J.make_mesh((4, 2), ("x", "y"))):
        for program in (
                lambda: J.numpy.matmul(np.ones((6, 4), np.float32), np.ones((4, 2), np.float32),
                                       out_sharding=P("x")),
                lambda: J.jit(lambda a: J.lax.broadcast_in_dim(
                    a, (6, 4), (1,), out_sharding=P("x")))(np.ones(4, np.float32))):
            try:
                program()
                rows.append("no error")
            except ValueError as e:
                # (the spec as written: minijax's broadcast_in_dim pads it with None)
                rows.append(str(e).split(" implies ")[1].split(" and sharding")[0])
    return rows


def check_out_sharding_its_shards_do_not_divide_is_jaxs_value_error():
    # a result typed by `out_sharding` whose dimension its shards do not divide: JAX's
    # ValueError when the value is typed (was accepted by dot_general)
    got = [_indivisible_out_sharding_errors(J) for J in (jax, minijax)]
    assert got[0] == got[1], got


if __name__ == "__main__":
    run_checks(globals())
