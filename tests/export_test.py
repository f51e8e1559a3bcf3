"""minijax.export against jax.export: artifacts serialized by either load and run in the other
(concrete shapes, a pytree input, a vjp program, `grad` through a serialized vjp), the
Exported's attributes as JAX names them, and shape polymorphism (`symbolic_shape`) for
elementwise, reduction, reshape and matmul programs, with JAX's errors where a shape cannot be
symbolic. JAX is the reference throughout (chapters/31-export.md)."""

from __future__ import annotations

import functools
import os
import re

import jax
import numpy as np
import pytest
from jax import export as jexport

import minijax
from minijax import export as mexport

pytest.importorskip("flatbuffers", reason="jax.export.serialize needs the flatbuffers package")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 3)).astype(np.float32)
W = RNG.normal(size=(3, 2)).astype(np.float32)
PARAMS = {"w": W, "b": RNG.normal(size=(2,)).astype(np.float32)}


def elementwise(J):
    return J.jit(lambda x, y: J.numpy.sin(x) * y + 1.0)


def pytree(J):
    jnp = J.numpy

    def f(p, x):
        return {"out": jnp.tanh(x @ p["w"] + p["b"]), "aux": [jnp.sum(x), None]}
    return J.jit(f)


def vjp_program(J):
    jnp = J.numpy

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    def f(w, x, ct):
        y, pullback = J.vjp(loss, w, x)
        return y, pullback(ct)
    return J.jit(f)


PROGRAMS = {
    "elementwise": (elementwise, lambda: (X, X * 2)),
    "pytree": (pytree, lambda: (PARAMS, X)),
    "vjp": (vjp_program, lambda: (W, X, np.float32(1.5))),
}


def specs(J, args):
    return J.tree_util.tree_map(lambda a: J.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                                args)


def assert_trees_close(got, want):
    got_l, got_t = jax.tree_util.tree_flatten(got)
    want_l, want_t = jax.tree_util.tree_flatten(want)
    assert str(got_t) == str(want_t)
    for g, w in zip(got_l, want_l):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", PROGRAMS)
def test_minijax_artifact_runs_under_jax(name):
    make, args = PROGRAMS[name]
    exp = mexport.export(make(minijax))(*specs(minijax, args()))
    loaded = jexport.deserialize(exp.serialize())
    assert loaded.fun_name == exp.fun_name
    assert [str(a) for a in loaded.in_avals] == [
        str(a) for a in jexport.export(make(jax))(*specs(jax, args())).in_avals]
    assert str(loaded.in_tree) == str(exp.in_tree) and str(loaded.out_tree) == str(exp.out_tree)
    assert_trees_close(loaded.call(*args()), make(jax)(*args()))


@pytest.mark.parametrize("name", PROGRAMS)
def test_jax_artifact_runs_under_minijax(name):
    make, args = PROGRAMS[name]
    jexp = jexport.export(make(jax))(*specs(jax, args()))
    loaded = mexport.deserialize(jexp.serialize())
    for field in ["fun_name", "platforms", "calling_convention_version", "nr_devices",
                  "module_kept_var_idx", "uses_global_constants"]:
        assert getattr(loaded, field) == getattr(jexp, field), field
    assert [a.shape for a in loaded.in_avals] == [a.shape for a in jexp.in_avals]
    assert [a.dtype for a in loaded.out_avals] == [a.dtype for a in jexp.out_avals]
    assert str(loaded.in_tree) == str(jexp.in_tree)
    want = make(jax)(*args())
    assert_trees_close(loaded.call(*args()), want)
    assert_trees_close(minijax.jit(loaded.call)(*args()), want)  # inlined in a jit module


def test_exported_attributes_match_jax():
    mexp = mexport.export(elementwise(minijax))(*specs(minijax, (X, X)))
    jexp = jexport.export(elementwise(jax))(*specs(jax, (X, X)))
    for field in ["platforms", "calling_convention_version", "nr_devices", "disabled_safety_checks",
                  "module_kept_var_idx", "uses_global_constants", "in_shardings_hlo",
                  "out_shardings_hlo", "ordered_effects", "unordered_effects"]:
        want = getattr(jexp, field)
        assert getattr(mexp, field) == (tuple(want) if isinstance(want, (list, tuple)) else
                                        want), field
    assert mexp.platforms == (jexport.default_export_platform(),)
    assert (mexport.minimum_supported_calling_convention_version,
            mexport.maximum_supported_calling_convention_version) == (
        jexport.minimum_supported_calling_convention_version,
        jexport.maximum_supported_calling_convention_version)
    assert "jax.uses_shape_polymorphism = false" in mexp.mlir_module()
    assert mexp.mlir_module().count("func.func public @main") == 1


@pytest.mark.parametrize("version", [9, 10, 11])
def test_calling_convention_version_config(version):
    def exported(J, mod):
        old = J.config.jax_export_calling_convention_version
        J.config.update("jax_export_calling_convention_version", version)
        try:
            return mod.export(elementwise(J))(*specs(J, (X, X)))
        except ValueError as e:
            return str(e)
        finally:
            J.config.update("jax_export_calling_convention_version", old)
    got, want = exported(minijax, mexport), exported(jax, jexport)
    if isinstance(want, str):
        assert got == want  # outside [9..10]: the same error
        return
    assert got.calling_convention_version == want.calling_convention_version == version
    assert jexport.deserialize(got.serialize()).calling_convention_version == version
    assert_trees_close(jexport.deserialize(got.serialize()).call(X, X), elementwise(jax)(X, X))


def test_disabled_checks_and_platforms_round_trip():
    checks = (mexport.DisabledSafetyCheck.platform(),
              mexport.DisabledSafetyCheck.custom_call("my_target"))
    mexp = mexport.export(elementwise(minijax), platforms=("cpu", "cuda"),
                          disabled_checks=checks)(*specs(minijax, (X, X)))
    loaded = jexport.deserialize(mexp.serialize())
    assert loaded.platforms == ("cpu", "cuda")
    assert [str(c) for c in loaded.disabled_safety_checks] == ["platform", "custom_call:my_target"]
    assert loaded.disabled_safety_checks[1].is_custom_call() == "my_target"
    assert_trees_close(loaded.call(X, X), elementwise(jax)(X, X))  # the platform index arg
    jexp = jexport.export(elementwise(jax), platforms=("cpu", "cuda"),
                          disabled_checks=[jexport.DisabledSafetyCheck.platform()])(
        *specs(jax, (X, X)))
    back = mexport.deserialize(jexp.serialize())
    assert back.platforms == ("cpu", "cuda")
    assert back.disabled_safety_checks == (mexport.DisabledSafetyCheck.platform(),)
    assert_trees_close(back.call(X, X), elementwise(jax)(X, X))


def test_grad_through_serialized_vjp_both_ways():
    def loss_of(call):
        return lambda p: call(p, X)["out"].sum()
    want = jax.grad(loss_of(pytree(jax)))(PARAMS)
    mexp = mexport.export(pytree(minijax))(*specs(minijax, (PARAMS, X)))
    assert_trees_close(jax.grad(loss_of(jexport.deserialize(mexp.serialize(1)).call))(PARAMS),
                       want)
    jexp = jexport.export(pytree(jax))(*specs(jax, (PARAMS, X)))
    loaded = mexport.deserialize(jexp.serialize(vjp_order=1))
    assert loaded.has_vjp()
    assert_trees_close(minijax.grad(loss_of(loaded.call))(PARAMS), want)
    assert not mexport.deserialize(jexp.serialize()).has_vjp()
    with pytest.raises(ValueError, match="No VJP"):
        mexport.deserialize(jexp.serialize()).vjp()


def test_call_errors():
    loaded = mexport.deserialize(jexport.export(elementwise(jax))(*specs(jax, (X, X))).serialize())
    with pytest.raises(ValueError, match="Shape mismatch"):
        loaded.call(X[:2], X[:2])
    with pytest.raises(ValueError, match="Dtype mismatch"):
        loaded.call(X.astype(np.int32), X)
    with pytest.raises(ValueError, match="pytree structure"):
        loaded.call((X, X))
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        mexport.export(lambda x: x)


# ---------------------------------------------------------------------------------------------
# Shape polymorphism
# ---------------------------------------------------------------------------------------------

POLY = {
    "elementwise": (lambda J: lambda x: J.numpy.sin(x) * 2.0 + x, ["b, 4"]),
    "reduction": (lambda J: lambda x: J.numpy.sum(J.numpy.sin(x), axis=1), ["b, 4"]),
    "reshape": (lambda J: lambda x: x.reshape(-1), ["b, 4"]),
    "matmul": (lambda J: lambda x, w: x @ w, ["b, 3", "3, 2"]),
    "bias": (lambda J: lambda x: x * J.numpy.ones(x.shape) + J.numpy.arange(4.0), ["b, 4"]),
    "mean": (lambda J: lambda x: J.numpy.mean(x, axis=0), ["b, 4"]),
    "softmax": (lambda J: lambda x: J.nn.softmax(J.numpy.where(x > 0, x, 0.0)), ["b, 4"]),
    "dim_as_value": (lambda J: lambda x: x / x.shape[0] + x.shape[0] * 2.0, ["b, 4"]),
    "grad": (lambda J: J.grad(lambda x: J.numpy.sum(J.numpy.sin(x) ** 2)), ["b, 4"]),
    "vmap": (lambda J: J.vmap(lambda r: r @ r), ["b, 4"]),
    "iota_and_slices": (lambda J: lambda x: x[:, 1:3] + J.numpy.arange(x.shape[0])[:, None]
                        + x[:, 0][:, None], ["b, 4"]),
    # a negative index and unit-step slices of the symbolic dimension (b - 1 rows)
    "tail_and_last": (lambda J: lambda x: x[-1] + x[1:].sum(0) * x[:-1].mean(0), ["b, 4"]),
    # the index iota of argmax/argmin over a symbolic shape: a dynamic_iota (valid StableHLO)
    "argmax": (lambda J: lambda x: J.numpy.argmax(x, axis=0) + J.numpy.argmin(x, axis=1).sum(),
               ["b, 4"]),
    # a scan over the symbolic axis: a while loop of `b` trips, its ys buffers `b` long
    "scan": (lambda J: lambda x: J.lax.scan(lambda c, r: (c + r, c * r), x[0] * 0.0, x)[1],
             ["b, 4"]),
    "scan_reverse": (lambda J: lambda x: J.lax.scan(lambda c, r: (c * 0.5 + r, c), x[0], x,
                                                   reverse=True)[1], ["b, 4"]),
    # cumulative reductions: a dynamic_reduce_window along `b`
    "cumsum": (lambda J: lambda x: J.numpy.cumsum(x, axis=0) + J.lax.cummax(x, axis=0,
                                                                            reverse=True),
               ["b, 4"]),
    "roll": (lambda J: lambda x: J.numpy.roll(x, 2, axis=0) - J.numpy.roll(x, -1, axis=0),
             ["b, 4"]),
    "int_array_index": (lambda J: lambda x: x[J.numpy.array([0, 2, -1])], ["b, 4"]),
    "computed_index": (lambda J: lambda x: x[J.numpy.arange(x.shape[0]) % 2], ["b, 4"]),
    "strided": (lambda J: lambda x: x[::2] * 2.0, ["b, 4"]),
    "strided_offset": (lambda J: lambda x: x[1::3], ["b, 4"]),
    "strided_reversed": (lambda J: lambda x: x[::-2] + x[-1::-2], ["b, 4"]),
    "reversed": (lambda J: lambda x: x[::-1, ::-1], ["b, 4"]),
    "halves": (lambda J: lambda x: x[: x.shape[0] // 2] + x[x.shape[0] - x.shape[0] // 2:],
               ["b, 4"]),
}


# programs whose polymorphic module has JAX's operations, in JAX's order; "reshape" too but
# for a no-op `stablehlo.convert` of the dimension variable that JAX emits
SAME_OPS = {"elementwise", "reduction", "matmul", "grad", "vmap", "reshape"}


def module_ops(text):
    """The functions and operations of a module's text, in order (no SSA names, types or
    locations)."""
    return [re.findall(r"(stablehlo\.\w+(?: @\w+)?|call @\w+|func\.func \w+ @\w+)", line)[0]
            for line in text.splitlines()
            if re.search(r"stablehlo\.|call @|func\.func", line) and not line.startswith("#")]


def poly_specs(J, mod, shapes):
    scope = mod.SymbolicScope()
    return [J.ShapeDtypeStruct(mod.symbolic_shape(s, scope=scope), np.float32) for s in shapes]


@pytest.mark.parametrize("name", POLY)
def test_symbolic_export_matches_jax(name):
    make, shapes = POLY[name]
    mexp = mexport.export(minijax.jit(make(minijax)))(*poly_specs(minijax, mexport, shapes))
    jexp = jexport.export(jax.jit(make(jax)))(*poly_specs(jax, jexport, shapes))
    assert [str(a.shape) for a in mexp.out_avals] == [str(a.shape) for a in jexp.out_avals]
    assert mexp.uses_global_constants and jexp.uses_global_constants
    # the module reads like JAX's: `?` dims, a public main reading `b` off the argument's
    # shape and asserting it, and the body taking `b` as a global-constant argument
    for text in (mexp.mlir_module(), jexp.mlir_module()):
        assert "jax.uses_shape_polymorphism = true" in text
        assert "stablehlo.get_dimension_size %arg0, dim = 0" in text
        assert "stablehlo.custom_call @shape_assertion" in text
        assert '{jax.global_constant = "b"}' in text
        assert "tensor<?x" in text
    if name in SAME_OPS:
        jax_ops = [o for o in module_ops(jexp.mlir_module())
                   if not (name == "reshape" and o == "stablehlo.convert")]
        assert module_ops(mexp.mlir_module()) == jax_ops
    for b in (3, 5):
        args = [RNG.normal(size=tuple(b if d == "b" else int(d) for d in s.split(", ")))
                .astype(np.float32) for s in shapes]
        want = make(jax)(*args)
        np.testing.assert_allclose(mexp.call(*args), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(jexport.deserialize(mexp.serialize()).call(*args), want,
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mexport.deserialize(jexp.serialize()).call(*args), want,
                                   rtol=1e-5, atol=1e-6)


def test_symbolic_dims_arithmetic_and_errors_match_jax():
    (mb,), (jb,) = mexport.symbolic_shape("b"), jexport.symbolic_shape("b")
    for f in [lambda b: str(b * 4), lambda b: str(4 * b + 1), lambda b: b == 4,
              lambda b: b >= 1, lambda b: str((b * 4) // 4)]:
        assert f(mb) == f(jb)
    assert str(mexport.symbolic_shape("b, 2*b, b+1")) == str(jexport.symbolic_shape("b, 2*b, b+1"))
    for bad in [lambda b: b > 2, lambda b: int(b)]:
        with pytest.raises(Exception) as got:
            bad(mb)
        with pytest.raises(Exception) as want:
            bad(jb)
        assert type(got.value).__name__ == type(want.value).__name__ == \
            "InconclusiveDimensionOperation"
    with pytest.raises(ValueError, match="syntax error"):
        mexport.symbolic_shape("b, 4 +")


@pytest.mark.parametrize("prog, shapes, error", [
    (lambda J: lambda x: x.reshape(3, -1), ["b, 4"], "InconclusiveDimensionOperation"),
    (lambda J: lambda x: x if x.shape[0] > 2 else -x, ["b"], "InconclusiveDimensionOperation"),
    (lambda J: lambda x, y: x + y, ["b, 4", "c, 4"], "TypeError"),
])
def test_symbolic_shape_errors_like_jax(prog, shapes, error):
    def raised(J, mod):
        try:
            mod.export(J.jit(prog(J)))(*poly_specs(J, mod, shapes))
        except Exception as e:
            return type(e).__name__
        return None
    assert raised(jax, jexport) == raised(minijax, mexport) == error


def test_call_inside_an_export_and_polymorphic_call_errors():
    inner = mexport.deserialize(jexport.export(elementwise(jax))(*specs(jax, (X, X))).serialize())
    outer = mexport.export(minijax.jit(lambda x: inner.call(x, x) * 2.0))(*specs(minijax, (X,)))
    np.testing.assert_allclose(jexport.deserialize(outer.serialize()).call(X),
                               elementwise(jax)(X, X) * 2.0, rtol=1e-6)
    poly = mexport.export(minijax.jit(lambda x: x * 2.0))(*poly_specs(minijax, mexport, ["b, 4"]))
    with pytest.raises(ValueError, match="Rank mismatch"):
        poly.call(X[0])
    with pytest.raises(ValueError, match="Shape mismatch"):
        poly.call(X)  # (4, 3): the constant 4 is not 3
    with pytest.raises(NotImplementedError, match="symbolic shapes"):
        mexport.export(minijax.jit(poly.call))(*poly_specs(minijax, mexport, ["b, 4"]))


Params = __import__("collections").namedtuple("Params", ["w", "b"])
jexport.register_namedtuple_serialization(Params, serialized_name="export_test.Params")
mexport.register_namedtuple_serialization(Params, serialized_name="export_test.Params")


def test_namedtuple_and_ordereddict_pytrees_both_ways():
    import collections

    def prog(J):
        return J.jit(lambda p, d: (Params(p.w * 2.0, p.b), collections.OrderedDict(
            z=d["z"] + 1.0, a=d["a"])))
    args = (Params(W, PARAMS["b"]), collections.OrderedDict(z=X, a=X[0]))
    want = prog(jax)(*args)
    m = mexport.export(prog(minijax))(*specs(minijax, args))
    assert_trees_close(jexport.deserialize(m.serialize()).call(*args), want)
    j = jexport.export(prog(jax))(*specs(jax, args))
    got = mexport.deserialize(j.serialize()).call(*args)
    assert type(got[0]) is Params and list(got[1]) == ["z", "a"]
    assert_trees_close(got, want)
    Other = collections.namedtuple("Other", ["x"])
    for J, mod in [(jax, jexport), (minijax, mexport)]:
        e = mod.export(J.jit(lambda o: o.x))(Other(J.ShapeDtypeStruct((2,), np.float32)))
        with pytest.raises(ValueError, match="unregistered type"):
            e.serialize()
    with pytest.raises(ValueError, match="Duplicate"):
        mexport.register_namedtuple_serialization(Params, serialized_name="another")


def test_corrupted_vector_length_refused_at_deserialize_as_jax():
    # a vector's length past the end of the buffer (here the module's bytes): ValueError
    # when deserializing, as JAX's, not a bad module at the first call
    import struct
    for J, mod in ((jax, jexport), (minijax, mexport)):
        blob = bytearray(mod.export(J.jit(lambda x: x * 2))(
            J.ShapeDtypeStruct((3,), np.float32)).serialize())
        at = bytes(blob).find(b"ML\xefR") - 4  # the length before the MLIR bytecode
        for n in (len(blob), 0xFFFFFF):
            struct.pack_into("<I", blob, at, n)
            with pytest.raises(ValueError, match="buffer is smaller than requested size"):
                mod.deserialize(blob)


def test_export_reachable_without_importing_it_as_jax():
    # `jax.export` needs no `import jax.export`; nor does `minijax.export` (a fresh process)
    import subprocess
    import sys
    code = ("import jax, minijax; print(hasattr(jax, 'export'), "
            "hasattr(minijax, 'export') and callable(minijax.export.symbolic_shape))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.split() == ["True", "True"]


# ---------------------------------------------------------------------------------------------
# Dimension expressions: floordiv/mod/max/min, constraints, solving input dimensions
# ---------------------------------------------------------------------------------------------

def outcome(fn):
    """What `fn()` gives: its str, or the name of the exception it raises."""
    try:
        return str(fn())
    except Exception as e:  # the exception's kind is the outcome compared
        return type(e).__name__


@pytest.mark.parametrize("spec", [
    "2*b", "a - 1", "a, a-1", "b, 2*b", "max(a, b)", "min(b, 3) + 1", "mod(b, 3) + 1",
    "floordiv(b, 2)", "(b, floordiv(2*b + 1, 2))", "b^2, b*b, 3*b - 2*c", "1 - a",
    "b // 2", "b % 3", "b, 4 +", "max(b)", "b; 4"])
def test_symbolic_shape_spec_parses_as_jax(spec):
    assert outcome(lambda: mexport.symbolic_shape(spec)) == \
        outcome(lambda: jexport.symbolic_shape(spec))


DIM_ARITH = {
    "floordiv": lambda b, c: b // 2, "mod": lambda b, c: b % 2,
    "exact": lambda b, c: (2 * b) // 2, "remainder": lambda b, c: (2 * b + 1) // 2,
    "divmod_sum": lambda b, c: b // 2 * 2 + b % 2, "neg_floordiv": lambda b, c: -b // 2,
    "by_dim": lambda b, c: (b * c + c) // c, "by_dim_inexact": lambda b, c: (b + 1) // c,
    "rfloordiv": lambda b, c: 7 // b, "divmod": lambda b, c: divmod(3 * b + 7, 3),
    "half_le_b": lambda b, c: b // 2 <= b, "strided_le_b": lambda b, c: (b + 1) // 2 <= b,
    "half_ge_1": lambda b, c: b // 2 >= 1, "mod_lt_2": lambda b, c: b % 2 < 2,
    "ceil_ge_1": lambda b, c: (b + 1) // 2 >= 1, "sub_one": lambda b, c: b - 1 >= 0,
    "eq_syntactic": lambda b, c: (b // 2) * 2 == b, "product": lambda b, c: b * c >= b,
}


@pytest.mark.parametrize("name", DIM_ARITH)
def test_dimension_arithmetic_matches_jax(name):
    mb, mc = mexport.symbolic_shape("b, c")
    jb, jc = jexport.symbolic_shape("b, c")
    assert outcome(lambda: DIM_ARITH[name](mb, mc)) == outcome(lambda: DIM_ARITH[name](jb, jc))


CONSTRAINED = [
    (("b >= 2",), "b", [lambda b: b >= 2, lambda b: b > 1, lambda b: b - 1 >= 1,
                        lambda b: b >= 3, lambda b: b // 2 >= 1]),
    (("b <= 10", "b >= 4"), "b", [lambda b: b < 11, lambda b: b >= 4, lambda b: b > 4,
                                   lambda b: 20 - b >= 10]),
    (("a >= b", "b >= 2"), "a, b", [lambda a, b: a >= b, lambda a, b: a - b >= 0,
                                     lambda a, b: a > b, lambda a, b: a >= 2,
                                     lambda a, b: a + b >= 4]),
    (("a == 2*b",), "a, b", [lambda a, b: a, lambda a, b: a - b, lambda a, b: a >= b,
                             lambda a, b: a // 2]),
    (("mod(b, 4) == 0",), "b", [lambda b: b % 4, lambda b: b // 4 * 4]),
]


@pytest.mark.parametrize("case", range(len(CONSTRAINED)))
def test_constraints_decide_as_jax(case):
    constraints, spec, checks = CONSTRAINED[case]
    mdims = mexport.symbolic_shape(spec, constraints=constraints)
    jdims = jexport.symbolic_shape(spec, scope=jexport.SymbolicScope(constraints))
    for check in checks:
        assert outcome(functools.partial(check, *mdims)) == \
            outcome(functools.partial(check, *jdims))


@pytest.mark.parametrize("make", [
    lambda mod: mod.SymbolicScope("b >= 2"),  # a string, not a sequence
    lambda mod: mod.SymbolicScope(["b > 2"]),  # no >=, <=, ==
    lambda mod: mod.SymbolicScope(["2 >= 3"]),  # unsatisfiable
    lambda mod: mod.SymbolicScope(["a + b == 3"]),  # the left side is not one term
    lambda mod: mod.SymbolicScope(["a == 3", "a == 4"]),  # two rules for `a`
    lambda mod: mod.symbolic_shape("b", constraints=["b >= 2"], scope=mod.SymbolicScope()),
    lambda mod: mod.symbolic_shape(3),
])
def test_scope_errors_match_jax(make):
    assert outcome(lambda: make(mexport)) == outcome(lambda: make(jexport))


def test_scopes_do_not_mix_and_print_their_constraints():
    (a,), (b,) = mexport.symbolic_shape("a"), mexport.symbolic_shape("b")
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        a + b
    scope = mexport.SymbolicScope(["b >= 2"])
    assert str(scope).endswith(" with constraints:\n  b >= 2")
    (b,) = mexport.symbolic_shape("b", scope=scope)
    with pytest.raises(Exception, match="Using symbolic scope .* with constraints:\n  b >= 2"):
        assert b >= 3


# input shapes whose dimensions are expressions: the variables solved from the sizes
DERIVED = [
    (["2*b, 3"], (), [(6, 3), (5, 3)]),
    (["a - 1, 3"], (), [(4, 3), (1, 3)]),
    (["b, 3", "2*b, 3"], (), [(2, 3, 4, 3), (2, 3, 5, 3)]),
    (["b + 1, 3"], ("b >= 2",), [(4, 3), (2, 3)]),
    (["a, b"], ("a >= b",), [(3, 2), (2, 3)]),
]


@pytest.mark.parametrize("case", range(len(DERIVED)))
def test_export_with_derived_input_dimensions_as_jax(case):
    specs_, constraints, shapes = DERIVED[case]

    def prog(J):
        return J.jit(lambda *xs: sum(J.numpy.sum(x, axis=0) for x in xs) * 2.0)

    def exported(J, mod):
        scope = mod.SymbolicScope(constraints)
        return mod.export(prog(J))(*[J.ShapeDtypeStruct(mod.symbolic_shape(s, scope=scope),
                                                        np.float32) for s in specs_])
    mexp, jexp = exported(minijax, mexport), exported(jax, jexport)
    assert [str(a.shape) for a in mexp.in_avals] == [str(a.shape) for a in jexp.in_avals]
    # an artifact read back has lost its constraints (JAX does not serialize them): the
    # module's shape assertions refuse what they break, at shape refinement
    jloaded = jexport.deserialize(jexp.serialize())
    calls = {"minijax": (mexp.call, jexp.call),
             "jax_loads_minijax": (jexport.deserialize(mexp.serialize()).call, jloaded.call),
             "minijax_loads_jax": (mexport.deserialize(jexp.serialize()).call, jloaded.call)}
    for shape in shapes:
        args = [np.ones(shape[2 * i:2 * i + 2], np.float32) for i in range(len(specs_))]
        for name, (got, want) in calls.items():
            try:
                expected = want(*args)
            except ValueError as e:
                # the check that failed (JAX's refinement errors say no more than that)
                message = re.escape(str(e).split(" Using the")[0].split(" Define JAX_")[0])
                with pytest.raises(ValueError, match=message):
                    got(*args)
                continue
            np.testing.assert_allclose(got(*args), expected, rtol=1e-6, err_msg=name)


# ---------------------------------------------------------------------------------------------
# A jit with shardings over several devices (tests/conftest.py asks XLA for 8 CPU devices)
# ---------------------------------------------------------------------------------------------

def sharded_program(J, axis_types):
    NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
    mesh = J.make_mesh((4, 2), ("x", "y"), axis_types=axis_types(J))
    fun = J.jit(lambda a, b: ((a @ b).sum(1), a * 2.0),
                in_shardings=(NS(mesh, P("x", "y")), NS(mesh, P("y"))),
                out_shardings=(NS(mesh, P("x")), None))
    return mesh, fun


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 devices (XLA_FLAGS in conftest)")
@pytest.mark.parametrize("axis_types", [
    lambda J: (J.sharding.AxisType.Explicit,) * 2, lambda J: (J.sharding.AxisType.Auto,) * 2],
    ids=["explicit", "auto"])
def test_sharded_export_keeps_the_jits_shardings_as_jax(axis_types):
    specs_ = [((8, 4), np.float32), ((4, 2), np.float32)]
    (mmesh, mfun), (jmesh, jfun) = (sharded_program(J, axis_types) for J in (minijax, jax))
    mexp = mexport.export(mfun)(*[minijax.ShapeDtypeStruct(*s) for s in specs_])
    jexp = jexport.export(jfun)(*[jax.ShapeDtypeStruct(*s) for s in specs_])
    assert mexp.nr_devices == jexp.nr_devices == 8
    assert mexp.in_shardings_hlo == tuple(jexp.in_shardings_hlo)
    for got, want in [(mexp.in_shardings_jax(mmesh), jexp.in_shardings_jax(jmesh)),
                      (mexp.out_shardings_jax(mmesh), jexp.out_shardings_jax(jmesh))]:
        assert str(got) == str(want)
    # the module: partitioned 8 ways, the mesh and each argument's and result's sharding
    head = [re.sub(r"loc\([^)]*\)|\{jax.result_info = \"[^\"]*\",? ?", "", t.split("%")[0])
            for t in (mexp.mlir_module(), jexp.mlir_module())]
    for text in head:
        assert "mhlo.num_partitions = 8" in text and 'sdy.mesh @mesh = <["x"=4, "y"=2]>' in text
    assert re.findall(r"#sdy\.sharding<[^>]*>", head[0]) == \
        re.findall(r"#sdy\.sharding<[^>]*>", head[1])
    # the artifact read back by JAX: its shardings, and a call on the devices they name
    mback, jback = jexport.deserialize(mexp.serialize()), jexport.deserialize(jexp.serialize())
    assert str(mback._in_named_shardings) == str(jback._in_named_shardings)
    assert str(mback._out_named_shardings) == str(jback._out_named_shardings)
    args = [RNG.normal(size=s).astype(np.float32) for s, _ in specs_]
    placed = [jax.device_put(x, s) for x, s in zip(args, jback.in_shardings_jax(jmesh))]
    for got, want in zip(mback.call(*placed), jback.call(*placed)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert str(got.sharding) == str(want.sharding)
    # JAX's artifact read here: the same shardings on minijax's mesh
    loaded = mexport.deserialize(jexp.serialize())
    assert loaded.nr_devices == 8
    assert str(loaded.in_shardings_jax(mmesh)) == str(mexp.in_shardings_jax(mmesh))
    assert str(loaded.out_shardings_jax(mmesh)) == str(mexp.out_shardings_jax(mmesh))
    # another mesh shape: JAX's ValueError
    for exp, J in ((mexp, minijax), (jexp, jax)):
        with pytest.raises(ValueError, match="does not match the mesh used for export"):
            exp.in_shardings_jax(J.make_mesh((2, 4), ("x", "y"), axis_types=axis_types(J)))
    # each side's call of JAX's artifact, on arguments placed on its mesh: eagerly and under
    # jit, the same values and result shardings; unplaced arguments are JAX's ValueError
    jloaded, mplaced = jexport.deserialize(jexp.serialize()), [
        minijax.device_put(x, s) for x, s in zip(args, loaded.in_shardings_jax(mmesh))]
    jplaced = [jax.device_put(x, s) for x, s in zip(args, jloaded.in_shardings_jax(jmesh))]
    for got, want in zip([*loaded.call(*mplaced), *minijax.jit(loaded.call)(*mplaced)],
                         [*jloaded.call(*jplaced), *jax.jit(jloaded.call)(*jplaced)]):
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert str(got.sharding) == str(want.sharding)
    with pytest.raises(ValueError):
        jloaded.call(*args)
    with pytest.raises(ValueError, match="exported for 8 devices and is called in a context "
                                         "with 1 devices"):
        loaded.call(*args)
