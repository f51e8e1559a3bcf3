"""`compute_on` (minijax/compute_on.py, the equation context of minijax/core.py, the lowering
of minijax/interpreters/mlir.py wrap_compute_type_in_place), checked against real JAX: values
under jit, grad and vmap, the `_xla_compute_type` attribute on the lowered ops and on the
compiled program's instructions, the cache key, and the errors. Named like JAX's
tests/compute_on_test.py."""

import functools

import jax
import jax.experimental.compute_on
import numpy as np
import pytest

import minijax
import minijax.experimental.compute_on
from compare.compute_on import (
    compiled_marks,
    compute_on2_program,
    lowered_marks,
    nested_and_cache,
    scan_program,
)

MODULES = [("jax", jax), ("minijax", minijax)]


def block_program(J, c_type="device_host"):
    """Host compute as a block inside jit: the sine and the scaling are marked, the rest not."""
    jnp, compute_on = J.numpy, J.experimental.compute_on.compute_on

    def f(x):
        with compute_on(c_type):
            y = jnp.sin(x) * 2.0
        return (y + 1.0).sum()
    return f


def decorated_program(J):
    """`@compute_on('device_host')` on a jitted function called from jit."""
    jnp, compute_on = J.numpy, J.experimental.compute_on.compute_on

    @compute_on("device_host")
    @J.jit
    def g(x):
        return jnp.sin(x) * 2.0

    def f(x):
        return jnp.sum(jnp.tanh(g(x)) + x)
    return f


X = np.linspace(-1.0, 2.0, 6, dtype=np.float32)
X2, W = X.reshape(2, 3), np.linspace(0.5, -0.5, 9, dtype=np.float32).reshape(3, 3)


@pytest.mark.parametrize("program", [block_program, decorated_program])
def test_values_and_lowered_marks_match_jax(program):
    got = {}
    for name, J in MODULES:
        f = program(J)
        text = J.jit(f).lower(X).as_text()
        got[name] = (np.asarray(J.jit(f)(X)), lowered_marks(text),
                     compiled_marks(J.jit(f).lower(X).compile().as_text()))
    (vj, lj, cj), (vm, lm, cm) = got["jax"], got["minijax"]
    np.testing.assert_allclose(vm, vj, rtol=1e-6)
    assert vm.dtype == vj.dtype and vm.shape == vj.shape
    assert lm == lj and ["host"] in lm.values() and ["-"] in lm.values()
    assert cm == cj


def test_device_compute_type_lowers_to_dense():
    for _, J in MODULES:
        marks = lowered_marks(J.jit(block_program(J, "device")).lower(X).as_text())
        assert marks["sine"] == marks["multiply"] == ["dense"] and marks["add"] == ["-"]


@pytest.mark.parametrize("program", [block_program, decorated_program])
def test_grad_and_vmap_through_compute_on_match_jax(program):
    outs = {}
    for name, J in MODULES:
        f = program(J)
        grad = J.jit(J.grad(f))
        outs[name] = (np.asarray(grad(X)), np.asarray(J.jit(J.vmap(f))(np.stack([X, -X]))),
                      compiled_marks(grad.lower(X).compile().as_text()))
    for a, b in zip(outs["minijax"][:2], outs["jax"][:2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the derivative of the marked ops (cos, the scalings) is marked too, in both modules
    assert outs["minijax"][2] == outs["jax"][2]
    assert "host" in set().union(*outs["minijax"][2].values())
    fd = (program(minijax)(X + 1e-3 * np.eye(6, dtype=np.float32)[2])
          - program(minijax)(X - 1e-3 * np.eye(6, dtype=np.float32)[2])) / 2e-3
    np.testing.assert_allclose(outs["minijax"][0][2], fd, rtol=2e-2)


def test_eager_and_jaxpr_carry_the_compute_type():
    jnp = minijax.numpy
    f = block_program(minijax)
    np.testing.assert_allclose(np.asarray(f(X)), np.asarray(block_program(jax)(X)), rtol=1e-6)
    eqns = minijax.make_jaxpr(f)(X).jaxpr.eqns
    jeqns = jax.make_jaxpr(block_program(jax))(X).jaxpr.eqns
    assert [(e.primitive.name, e.ctx and e.ctx.compute_type) for e in eqns] == \
        [(e.primitive.name, e.ctx.compute_type) for e in jeqns]
    with minijax.experimental.compute_on.compute_on("device_host"):
        assert float(jnp.sum(jnp.sin(jnp.asarray(X)))) == pytest.approx(float(np.sin(X).sum()),
                                                                          rel=1e-6)
    assert minijax.config.compute_on_context_manager is None


def test_innermost_block_wins_and_jit_retraces_per_compute_type():
    got = {name: nested_and_cache(J, X) for name, J in MODULES}
    for marks, traces in got.values():
        assert marks["sine"] == ["host"] and marks["exponential"] == ["dense"]
        assert traces == 2  # traced inside f outside its block, then once under compute_on
    assert got["minijax"] == got["jax"]


@pytest.mark.parametrize("arg,exc", [(3, TypeError), ("gpu", ValueError), ("host", ValueError)])
def test_bad_compute_type_raises_like_jax(arg, exc):
    msgs = []
    for _, J in MODULES:
        with pytest.raises(exc) as e:
            with J.experimental.compute_on.compute_on(arg):
                pass
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and minijax.config.compute_on_context_manager is None


def test_error_inside_block_leaves_no_compute_type_behind():
    compute_on = minijax.experimental.compute_on.compute_on
    with pytest.raises(TypeError, match="add"):
        with compute_on("device_host"):
            minijax.jit(lambda x: minijax.lax.add(x, np.ones(3, np.int32)))(X)
    assert minijax.config.compute_on_context_manager is None
    assert minijax.core.current_jaxpr_eqn_context() is None


def test_scan_in_a_host_block_is_marked_whole_like_jax():
    w = np.eye(6, dtype=np.float32) * 0.5
    xs = np.stack([X, -X, 2 * X])
    got = {}
    for name, J in MODULES:
        loss = J.jit(scan_program(J))
        got[name] = (np.asarray(loss(w, xs)), np.asarray(J.jit(J.grad(scan_program(J)))(w, xs)),
                     lowered_marks(loss.lower(w, xs).as_text()))
    for a, b in zip(got["minijax"][:2], got["jax"][:2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for _, _, marks in got.values():
        for op in ("while", "dynamic_slice", "dot_general", "tanh", "compare"):
            assert marks[op] == ["host"], (op, marks)



def test_compute_on2_matches_jax():
    got = {}
    for name, J in MODULES:
        f = functools.partial(compute_on2_program(J), W)
        text = J.jit(f).lower(X2).as_text()
        got[name] = (np.asarray(J.jit(f)(X2)), np.asarray(J.jit(J.grad(f))(X2)),
                     np.asarray(J.vmap(f)(np.stack([X2, -X2]))), np.asarray(f(X2)),
                     {op: m for op, m in lowered_marks(text).items() if op != "custom_call"})
    for a, b in zip(got["minijax"][:4], got["jax"][:4]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert got["minijax"][4] == got["jax"][4] and got["jax"][4]["sine"] == ["host"]
    for _, J in MODULES:
        with pytest.raises(ValueError, match="Invalid compute type"):
            J.experimental.compute_on.compute_on2(lambda x: x, compute_type="gpu",
                                                  out_memory_spaces=J.memory.Space.Device)


@pytest.mark.parametrize("program", [block_program, decorated_program])
def test_classic_linearize_path_keeps_the_marks(program):
    """minijax's jvp + partial evaluation path marks the gradient's ops as JAX does (JAX
    0.10.2 linearizes directly whatever its flag says)."""
    got = {}
    for name, J in MODULES:
        g = J.jit(J.grad(program(J)))
        with minijax.config.override("jax_use_direct_linearize", J is not minijax):
            got[name] = (np.asarray(g(X)), compiled_marks(g.lower(X).compile().as_text()))
    np.testing.assert_allclose(got["minijax"][0], got["jax"][0], rtol=1e-5, atol=1e-6)
    assert got["minijax"][1] == got["jax"][1]


def test_gpu_stream_lowers_to_a_stream_annotation_like_jax():
    attrs = {}
    for name, J in MODULES:
        text = J.jit(block_program(J, "gpu_stream:2")).lower(X).as_text()
        attrs[name] = sorted({line.split("mhlo.frontend_attributes = ")[1].split("}")[0]
                              for line in text.splitlines() if "frontend_attributes" in line})
        assert float(J.jit(block_program(J, "gpu_stream:2"))(X)) == pytest.approx(
            float(np.sum(np.sin(X) * 2.0 + 1.0)), rel=1e-6)
    assert attrs["minijax"] == attrs["jax"] == [
        '{_xla_stream_annotation = "2", inlineable = "false"']


# ------------------------------------------------------------------ refused compiles (a TPU)

REFUSAL = ("INTERNAL: RET_CHECK failure (hlo_instruction.cc:3699) ShapeUtil::"
           "CompatibleIgnoringFpPrecision(shape(), new_producer->shape())\nsecond line")


class _RefusingGrad:
    """A module stand-in: JAX's numpy, jit and vmap, and a gradient that raises the
    JaxRuntimeError XLA's TPU compiler raised for JAX's scan-in-a-host-block gradient."""
    numpy = jax.numpy
    jit = staticmethod(jax.jit)
    vmap = staticmethod(jax.vmap)

    @staticmethod
    def grad(f):
        def refused(*args):
            raise jax.errors.JaxRuntimeError(REFUSAL)
        return refused


def _small_loss(J):
    return lambda w, x: J.numpy.sum(J.numpy.tanh(x @ w) ** 2)


W4, X34 = np.eye(4, dtype=np.float32), np.arange(12, dtype=np.float32).reshape(3, 4) / 12


def test_compiled_or_refused_records_the_refusal_and_the_other_programs():
    from compare.compute_on import compiled_or_refused
    got = compiled_or_refused(_RefusingGrad, _small_loss, W4, X34)
    assert got["grad"] == REFUSAL.splitlines()[0]
    assert isinstance(got["value"], np.ndarray) and got["vmap"].shape == (2,)
    assert "tanh" in got["lowered"]  # lowering compiles nothing: there even when refused


def test_scan_outcomes_refused_alike_pass_refused_in_one_module_fails():
    from compare._report import TopicResult
    from compare.compute_on import check_scan_outcomes, compiled_or_refused
    refused = compiled_or_refused(_RefusingGrad, _small_loss, W4, X34)
    ran = compiled_or_refused(jax, _small_loss, W4, X34)

    res = TopicResult("t")
    out = check_scan_outcomes(res, {"jax": refused, "minijax": dict(refused)})
    assert set(out) == {"grad"} and not res.failed_checks() and len(res.checks) == 3
    assert any("refuses it in both modules" in c.name and "INTERNAL: RET_CHECK" in c.name
               for c in res.checks)
    assert res.extra["scan_in_host_block"]["value"]["jax"] == "compiled and ran"

    res = TopicResult("t")  # minijax compiles what JAX's compiler refused: not JAX's behaviour
    check_scan_outcomes(res, {"jax": refused, "minijax": ran})
    assert [c.name.split(":")[1] for c in res.failed_checks()] == [" grad"]

    res = TopicResult("t")  # a refusal that is not the compiler's INTERNAL error
    other = dict(refused, grad="RESOURCE_EXHAUSTED: out of memory")
    check_scan_outcomes(res, {"jax": refused, "minijax": other})
    assert len(res.failed_checks()) == 1

    res = TopicResult("t")  # nothing refused: the values are compared, as on the CPU
    assert check_scan_outcomes(res, {"jax": ran, "minijax": dict(ran)}) == {}
    assert [c.name for c in res.checks] == [f"scan in a host block: {k} equals JAX's"
                                            for k in ("value", "grad", "vmap")]
    assert not res.failed_checks()
