"""The checks of tests/sharding_eager_and_staged_test.py, run in one child process with 8 CPU
devices: where a layout, or a value's type, depends on whether a sharded operation is computed
now (eagerly, or under jvp/vmap of concrete values) or staged into a jaxpr (under jit), on
meshes with Explicit, Auto or both kinds of axes. Each `check_*` runs one program under JAX
and minijax and compares the values, specs, mesh shapes and types (or the error types); JAX's
outcome is the expected one, and a few are pinned to show what the check is about.
"""

from eight_devices import request_eight_devices, run_checks

request_eight_devices()  # before JAX is imported

import functools  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import minijax  # noqa: E402


def _layout(x):
    s = x.sharding
    parts = list(s.spec)
    while parts and parts[-1] is None:
        parts.pop()
    return (np.round(np.asarray(x), 5).tolist(), str(type(s.spec)(*parts)),
            tuple(s.mesh.axis_sizes), str((jax if isinstance(x, jax.Array) else minijax)
                                          .typeof(x)))


def _both(program):
    """program(J) under both modules: (spec, type) per result leaf, or the error's type."""
    out = []
    for J in (jax, minijax):
        try:
            out.append([_layout(x) for x in J.tree_util.tree_leaves(program(J))])
        except Exception as e:  # the error's type is the outcome
            out.append(type(e).__name__)
    assert out[0] == out[1], out
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace
    return out[0] if isinstance(out[0], str) else [leaf[1:] for leaf in out[0]]


def _data(*shape):
    return (np.sin(np.arange(np.prod(shape)) * 0.37)).astype(np.float32).reshape(shape)


def _mesh(J, shape, *types):
    names = ("a", "b", "c")[:len(shape)]
    return J.make_mesh(shape, names, axis_types=tuple(getattr(J.sharding.AxisType, t)
                                                      for t in types))


def check_eager_constraint_on_a_mixed_mesh_lays_out_exactly_as_asked():
    # JAX runs an eager constraint as `jit(out_shardings=...)`: the Explicit axes of the type
    # go when the spec leaves them out; staged, the constraint keeps them (and adds its own)
    def program(J, mode):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (4, 2), "Explicit", "Auto")
        x = J.device_put(_data(16, 8), NS(mesh, P("a", "b")))
        f = lambda v: J.lax.with_sharding_constraint(v * 2.0, NS(mesh, P(None, "b")))
        return {"eager": f, "jit": J.jit(f),
                "jvp": lambda v: J.jvp(f, (v,), (v,))}[mode](x)
    assert _both(functools.partial(program, mode="eager")) == [
        ("P(None, 'b')", (4, 2), "float32[16,8]")]
    assert _both(functools.partial(program, mode="jit")) == [
        ("P('a', 'b')", (4, 2), "float32[16@a,8]")]
    assert _both(functools.partial(program, mode="jvp"))[0][0] == "P(None, 'b')"


def check_partly_manual_shard_map_types_its_body_with_the_automatic_explicit_axes():
    # staged, the body's blocks keep the Explicit axes that stay automatic (c here), and so
    # do its outputs; run now (eagerly) the body sees per-device values without them
    def program(J, staged, seen):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (2, 2, 2), "Auto", "Auto", "Explicit")
        x = J.device_put(_data(16, 4, 16), NS(mesh, P("b", ("c", "a"))))

        def body(a):
            seen.append(str(J.typeof(a)))
            return lax.pmin(a, ("a",))

        def f(v):
            v = J.shard_map(body, mesh=mesh, in_specs=P("a", None, None),
                            out_specs=P("a", None, None), axis_names={"a"})(v)
            return lax.with_sharding_constraint(v, NS(mesh, P("b", "a", None)))
        with J.set_mesh(mesh):
            return J.jit(f)(x) if staged else f(x)
    for staged in (True, False):
        seen = {}
        out = _both(lambda J, staged=staged, seen=seen: program(
            J, staged, seen.setdefault(J.__name__, [])))
        assert seen["jax"] == seen["minijax"], seen
        assert ("4@c" in seen["jax"][0]) == staged, seen
        assert out[0][0] == ("P('b', ('c', 'a'))" if staged else "P('b', 'a')"), out
    # a block too small for the automatic Explicit axes of its type: JAX's ValueError
    def too_small(J):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (2, 4), "Explicit", "Explicit")
        x = J.device_put(_data(4), NS(mesh, P("b")))
        f = J.shard_map(lambda a: a * (1.0 + lax.axis_index("a")), mesh=mesh, in_specs=P("a"),
                        out_specs=P("a"), axis_names={"a"})
        with J.set_mesh(mesh):
            return J.jit(f)(x)
    assert _both(too_small) == "ValueError"


def check_typed_results_of_a_jit_on_a_mixed_mesh():
    # a result split in every dimension is laid out as its type says (the constraint's Auto
    # axis is dropped); one with an unsplit dimension is the partitioner's, and its type
    # follows the layout (here a nested jit's out_shardings replicate it)
    def program(J, which):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (2, 2, 2), "Auto", "Explicit", "Auto")
        with J.set_mesh(mesh):
            if which == "split":
                x = J.device_put(_data(8), NS(mesh, P(("b", "c"))))
                return J.jit(lambda v: lax.with_sharding_constraint(v, P("a")))(x)
            x = J.device_put(_data(8, 8), NS(mesh, P("b", ("c", "a"))))
            inner = J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P(None)))
            return J.jit(lambda v: inner(J.numpy.sin(v)))(x)
    assert _both(functools.partial(program, which="split")) == [
        ("P('b',)", (2, 2, 2), "float32[8@b]")]
    assert _both(functools.partial(program, which="unsplit")) == [
        ("P()", (2, 2, 2), "float32[8,8]")]


def check_vmap_leaves_a_constraints_batch_dimension_to_the_partitioner():
    # JAX's batcher makes it P.UNCONSTRAINED: a ValueError on a mesh with no Auto axis, and
    # on an Auto mesh the partitioner may split it
    def program(J, auto):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (2, 2, 2), *(["Auto"] * 3 if auto else ["Explicit"] * 3))
        if not auto:
            x = J.device_put(_data(8), NS(mesh, P(None)))
            return J.vmap(J.jit(lambda v: lax.with_sharding_constraint(v + v, NS(mesh, P()))))(x)
        x = J.device_put(_data(8, 8), NS(mesh, P(("b", "a"), "c")))

        def f(v):
            v = J.shard_map(lambda a: lax.psum(a, ("c",)), mesh=mesh, in_specs=P(),
                            out_specs=P("c"), axis_names={"c"})(v)
            return lax.with_sharding_constraint(v, NS(mesh, P("c"))).sum() + 1.5
        with J.set_mesh(mesh):
            return J.jit(J.vmap(f), in_shardings=(NS(mesh, P(("b", "a"), "c")),))(x)
    assert _both(functools.partial(program, auto=False)) == "ValueError"
    assert _both(functools.partial(program, auto=True))[0][0] == "P(('b', 'a'),)"

    # computed now, such a constraint runs as a program on the mesh (JAX's apply_primitive):
    # the type is kept and its Explicit axes added, as staged
    def eager(J):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (2, 2, 2), "Explicit", "Explicit", "Auto")
        x = J.device_put(_data(8, 8, 8), NS(mesh, P("c", ("a", "b"))))
        f = lambda v: J.numpy.sin(lax.with_sharding_constraint(
            lax.with_sharding_constraint(v, NS(mesh, P("c"))), NS(mesh, P(None, ("c",)))))
        return J.vmap(f)(x)
    assert _both(eager)[0][0] == "P(None, ('a', 'b'), 'c')"


def check_uneven_blocks_in_a_staged_constraint_and_nested_out_shardings_checked():
    # a staged constraint may split 4 elements 8 ways (the partitioner pads); computed now
    # it is jit(out_shardings=...)'s IndivisibleError; a nested jit's out_shardings that do
    # not divide its outputs raise when it is traced, under vmap too
    def program(J, mode):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (4, 2), "Auto", "Auto")
        x = J.device_put(_data(4), NS(mesh, P("a")))
        f = lambda v: lax.with_sharding_constraint(v, NS(mesh, P(("b", "a")))) + v
        if mode == "nested":
            mesh = _mesh(J, (4, 2), "Auto", "Explicit")
            x = J.device_put(_data(8, 4, 8), NS(mesh, P(None, "b")))
            inner = J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P(("b", "a"), None)))
            return J.jit(J.vmap(inner))(x)
        return J.jvp(J.jit(f), (x,), (x,)) if mode == "staged" else f(x)
    assert _both(functools.partial(program, mode="staged")) == [("P()", (4, 2), "float32[4]")] * 2
    assert _both(functools.partial(program, mode="eager")) == "IndivisibleError"
    assert _both(functools.partial(program, mode="nested")) == "IndivisibleError"


def check_nested_jit_out_shardings_under_vmap_lay_out_exactly():
    # JAX lowers them as the nested function's result sharding: exactly that layout (Auto
    # axes before Explicit ones too, the batch dimension unsplit); eagerly the type follows
    def program(J, outer_jit):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (4, 2), "Explicit", "Auto")
        if outer_jit:
            x = J.device_put(_data(8, 8, 8, 16), NS(mesh, P("b", "a", None, None)))

            def f(v):
                v = J.shard_map(lambda a: lax.psum(a, ("b", "a")), mesh=mesh,
                                in_specs=P(None, "a", "b"), out_specs=P(None, "a", "b"))(v)
                return J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P(None, "a")))(v)
            with J.set_mesh(mesh):
                return J.jit(J.vmap(f), in_shardings=(NS(mesh, P("b", "a", None, None)),))(x)
        x = J.device_put(_data(8, 4, 8), NS(mesh, P("b", "a", None)))
        f = lambda v: J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P(("b", "a"), None)))(v.T)
        with J.set_mesh(mesh):
            return J.vmap(f)(x)
    assert _both(functools.partial(program, outer_jit=True))[0][0] == "P(None, None, 'a')"
    assert _both(functools.partial(program, outer_jit=False)) == [
        ("P(None, ('b', 'a'))", (4, 2), "float32[8,8@a,4]")]


def check_vmap_of_a_nested_jit_keeps_its_inputs_types():
    # the batched jaxpr of a nested jit takes typed inputs (a batch dimension unsplit added),
    # so a constraint on its output sees the layout of its type
    def program(J):
        S, lax = J.sharding, J.lax
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (8,), "Explicit")
        x = J.device_put(_data(8, 8, 16), NS(mesh, P(None, "a")))

        def f(v):
            v = J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, P(("a",))))(v)
            return lax.with_sharding_constraint(v, NS(mesh, P("a", None)))
        with J.set_mesh(mesh):
            return J.jit(J.vmap(f), in_shardings=(None,))(x)
    assert _both(program) == [("P(None, 'a')", (8,), "float32[8,8@a,16]")]


def check_values_made_of_untyped_operands_are_typed_over_the_mesh_in_context():
    # staged under set_mesh of a mesh with Explicit axes, an elementwise op, broadcast or
    # concatenate of untyped values (a pure_callback's result, literals) is typed replicated
    # over that mesh, as JAX's rules fall back to it: the jit's result is laid out as that
    # type, not as a nested jit's out_shardings further on would have it (seed 1135 of
    # tests/sharded_programs.py: a sequential-vmap callback's scan feeding such a jit)
    def program(J, case):
        S = J.sharding
        P, NS = S.PartitionSpec, S.NamedSharding
        mesh = _mesh(J, (2, 2, 2), "Explicit", "Explicit", "Explicit")
        x = J.device_put(_data(8, 16), NS(mesh, P(None)))
        spec = P(("a", "c")) if case == "vmap" else P(None, ("a", "c"))  # (per example)
        nested = J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, spec))

        def f(v):
            cb = J.pure_callback(np.sin, J.ShapeDtypeStruct(v.shape, v.dtype), v,
                                 vmap_method="sequential")
            if case == "zeros":
                cb = J.numpy.concatenate([J.numpy.zeros((4, 16)), cb[:4]])
            return nested(cb)
        g = J.jit(f)
        if case == "vmap":
            g = J.vmap(g)
        if case == "outside first":  # traced without the mesh in context, then within it
            g(x)
        with J.set_mesh(mesh):
            return g(x)
    for case in ("callback", "zeros", "vmap", "outside first"):
        got = _both(functools.partial(program, case=case))
        assert got == [
            ("P()", (2, 2, 2), "float32[8,16]")], (case, got)
    # computed now they part (docs/conformance.md): JAX places such a value on the mesh in
    # context, minijax computes it on one device
    placed = []
    for J in (jax, minijax):
        with J.set_mesh(_mesh(J, (8,), "Explicit")):
            placed.append(type((J.numpy.arange(4) * 2).sharding).__name__)
    assert placed == ["NamedSharding", "SingleDeviceSharding"], placed


if __name__ == "__main__":
    run_checks(globals())
