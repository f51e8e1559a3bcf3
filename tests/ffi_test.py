"""The FFI (minijax/ffi.py): the RMS-norm handlers of chapters/ffi/rms_norm.cc, compiled once per
session with the system C++ compiler against jaxlib's XLA FFI headers, registered with the CPU
backend and called from minijax under jit, vmap (each vmap_method) and grad (a custom_vjp over
the forward and backward handlers). Every reference comes from real JAX calling the same
library, or from the same normalization written in jnp; lowered modules and jaxprs are compared
with JAX's text."""

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minijax
import minijax.numpy as mjnp
from minijax import ffi
from minijax.interpreters import partial_eval as pe

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the handlers' shared library) is computed once, not once per worker.
# Slow: a C++ library compiled, then every call under both modules.
pytestmark = [pytest.mark.xdist_group("ffi_test"), pytest.mark.slow]

SOURCE = Path(__file__).resolve().parents[1] / "chapters" / "ffi" / "rms_norm.cc"
EPS = np.float32(1e-5)
MODULES = [pytest.param(jax, id="jax"), pytest.param(minijax, id="minijax")]


@pytest.fixture(scope="session")
def library(tmp_path_factory):
    """The handlers' shared library, built and registered once (under both modules' names for
    registering: they reach the same XLA registry)."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler (c++ or g++, or $CXX) to build the FFI handlers")
    out = tmp_path_factory.mktemp("ffi") / "librms_norm.so"
    subprocess.run([cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w",
                    f"-I{ffi.include_dir()}", str(SOURCE), "-o", str(out)], check=True)
    lib = ctypes.cdll.LoadLibrary(str(out))
    for name, symbol in [("rms_norm", lib.RmsNorm), ("rms_norm_fwd", lib.RmsNormFwd),
                         ("rms_norm_bwd", lib.RmsNormBwd)]:
        ffi.register_ffi_target(name, ffi.pycapsule(symbol), platform="cpu")
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(symbol), platform="cpu")
    return lib


def program(J, vmap_method="broadcast_all"):
    """rms_norm with a custom_vjp whose rules are the forward and backward handlers, written
    once for both modules."""
    def sds(shape):
        return J.ShapeDtypeStruct(shape, np.float32)

    def plain(x):
        return J.ffi.ffi_call("rms_norm", sds(x.shape), vmap_method=vmap_method)(x, eps=EPS)

    @J.custom_vjp
    def rms_norm(x):
        return plain(x)

    def fwd(x):
        y, scale = J.ffi.ffi_call("rms_norm_fwd", (sds(x.shape), sds(x.shape[:-1])),
                                  vmap_method=vmap_method)(x, eps=EPS)
        return y, (scale, x)

    def bwd(res, ct):
        scale, x = res
        return (J.ffi.ffi_call("rms_norm_bwd", sds(x.shape),
                               vmap_method=vmap_method)(scale, x, ct),)

    rms_norm.defvjp(fwd, bwd)
    return plain, rms_norm


def pure(x):
    """The same normalization in minijax.numpy."""
    return x / mjnp.sqrt(mjnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def data(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def custom_call_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "custom_call" in line]


def test_include_dir_holds_the_ffi_headers():
    assert ffi.include_dir() == jax.ffi.include_dir()
    assert (Path(ffi.include_dir()) / "xla" / "ffi" / "api" / "ffi.h").is_file()


def test_pycapsule_wraps_the_symbols_address(library):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
    address = ctypes.cast(library.RmsNorm, ctypes.c_void_p).value
    assert get(ffi.pycapsule(library.RmsNorm), None) == address
    assert get(jax.ffi.pycapsule(library.RmsNorm), None) == address


def test_a_target_minijax_registers_is_xlas(library):
    """Registered through minijax alone, the target is in XLA's CPU registry: JAX calls it."""
    ffi.register_ffi_target("minijax_only_rms_norm", ffi.pycapsule(library.RmsNorm))
    x = data(4, 6)
    got = jax.jit(lambda x: jax.ffi.ffi_call(
        "minijax_only_rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, eps=EPS))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(program(minijax)[0](x)))


def test_lowering_is_jaxs_typed_custom_call():
    x = data(3, 4)
    lines = {}
    for J in (jax, minijax):
        plain, rms = program(J)
        lines[J] = (custom_call_lines(J.jit(plain).lower(x).as_text())
                    + custom_call_lines(J.jit(J.vmap(plain)).lower(x).as_text()))
    assert lines[minijax] == lines[jax]
    assert "mhlo.backend_config = {eps = 9.99999974E-6 : f32}" in lines[minijax][0]


def test_attributes_layouts_aliases_lower_as_in_jax():
    kw = dict(a=1, b=2.0, c=np.int32(3), d=np.arange(3, dtype=np.int32), s="str",
              t=np.dtype(np.float32), u=True, v={"p": np.float32(1)}, w=(1, 2))
    x = data(4, 3)
    lines = {}
    for J in (jax, minijax):
        f = J.ffi.ffi_call(
            "not_registered", [J.ShapeDtypeStruct((2,), np.float32),
                               J.ShapeDtypeStruct((4, 3), np.float32)],
            input_layouts=[(0, 1)], output_layouts=[None, (0, 1)],
            input_output_aliases={0: 1}, has_side_effect=True)
        lines[J] = custom_call_lines(J.jit(lambda x, f=f: f(x, **kw)).lower(x).as_text())
    assert lines[minijax] == lines[jax] and len(lines[jax]) == 1


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmapped_jaxprs_are_jaxs(method, in_axes):
    x = data(3, 5, 4)
    texts = [str(J.make_jaxpr(J.vmap(program(J, method)[0], in_axes=in_axes))(x))
             for J in (jax, minijax)]
    assert texts[1] == texts[0]


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_vmapped_jaxprs_with_an_unbatched_argument_are_jaxs(method):
    """Traced only (the backward handler needs every argument batched alike to run)."""
    scale, x, ct = data(2, 3), data(2, 3, 4, seed=1), data(3, 4, seed=2)

    def bwd(J):
        return lambda s, x: J.ffi.ffi_call("rms_norm_bwd", J.ShapeDtypeStruct(x.shape, x.dtype),
                                           vmap_method=method)(s, x, ct)

    texts = [str(J.make_jaxpr(J.vmap(bwd(J), in_axes=(0, 1)))(scale, x.transpose(1, 0, 2)))
             for J in (jax, minijax)]
    assert texts[1] == texts[0]


def test_eager_and_jit_equal_jax_and_the_pure_version(library):
    x = data(5, 8)
    plain, rms = program(minijax)
    want = np.asarray(program(jax)[0](x))
    for f in (plain, rms, minijax.jit(plain), minijax.jit(rms)):
        np.testing.assert_array_equal(np.asarray(f(x)), want)
    before = len(ffi._eager_programs)
    np.testing.assert_array_equal(np.asarray(plain(x)), want)  # eagerly again: one program
    assert len(ffi._eager_programs) == before
    np.testing.assert_allclose(np.asarray(plain(x)), np.asarray(pure(x)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_each_method(library, method):
    x = data(3, 5, 4)
    for in_axes in (0, 1):
        want = np.asarray(jax.vmap(program(jax, method)[0], in_axes=in_axes)(x))
        got = minijax.jit(minijax.vmap(program(minijax, method)[0], in_axes=in_axes))(x)
        np.testing.assert_array_equal(np.asarray(got), want)
        np.testing.assert_allclose(np.asarray(got), np.asarray(
            minijax.vmap(pure, in_axes=in_axes)(x)), rtol=1e-6, atol=1e-6)


def test_broadcast_all_gives_unbatched_arguments_the_batch(library):
    """The backward handler under vmap with its cotangent unbatched: broadcast_all hands the
    handler a whole batch of each argument, as JAX does."""
    x, ct = data(3, 5, 4), data(5, 4, seed=1)
    outs = []
    for J in (jax, minijax):
        _, rms = program(J, "broadcast_all")
        def backward(x, J=J, rms=rms):
            return J.vjp(rms, x)[1](ct)[0]
        outs.append(np.asarray(J.jit(J.vmap(backward))(x)))
    np.testing.assert_array_equal(outs[1], outs[0])


def test_grad_through_the_custom_vjp(library):
    x, w = data(6, 8), data(6, 8, seed=2)
    _, rms = program(minijax)

    def loss(rms, J):
        return lambda x: J.numpy.sum(J.numpy.tanh(rms(x)) * w)

    got = minijax.grad(loss(rms, minijax))(x)
    want_pure = minijax.grad(loss(pure, minijax))(x)
    want_jax = jax.grad(loss(program(jax)[1], jax))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want_pure), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want_jax), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(minijax.jit(minijax.grad(loss(rms, minijax)))(x)),
                               np.asarray(want_jax), rtol=1e-6, atol=1e-7)
    per_row = minijax.vmap(minijax.grad(lambda r: mjnp.sum(rms(r) * w[0])))(x)
    np.testing.assert_allclose(np.asarray(per_row), np.asarray(jax.vmap(jax.grad(
        lambda r: jnp.sum(program(jax)[1](r) * w[0])))(x)), rtol=1e-6, atol=1e-7)


def test_handler_errors_surface_as_jaxs(library):
    plain = program(minijax)[0]
    with pytest.raises(Exception, match="rms_norm: the input must have an axis") as mini:
        minijax.jit(plain)(np.float32(2.0))
    with pytest.raises(Exception, match="rms_norm: the input must have an axis") as ref:
        jax.jit(program(jax)[0])(np.float32(2.0))
    assert type(mini.value) is type(ref.value)


@pytest.mark.parametrize("J", MODULES)
def test_errors(J):
    x = data(3, 4)
    plain = program(J)[0]
    with pytest.raises(ValueError, match="The FFI call to `rms_norm` cannot be differentiated"):
        J.grad(lambda x: plain(x).sum())(x)
    none = program(J, None)[0]
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        J.make_jaxpr(J.vmap(none))(data(2, 3, 4))
    with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
        J.ffi.ffi_call("rms_norm", J.ShapeDtypeStruct((3,), np.float32), vmap_method="loop")
    with pytest.raises(ValueError, match="must have 'shape' and 'dtype' attributes"):
        J.ffi.ffi_call("rms_norm", [(3,)])
    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '0:0'"):
        J.ffi.ffi_call("rms_norm", J.ShapeDtypeStruct((5,), np.float32),
                       input_output_aliases={0: 0})(x)
    with pytest.raises(ValueError, match=re.escape("number of input arguments (1)")):
        J.ffi.ffi_call("rms_norm", J.ShapeDtypeStruct((5,), np.float32),
                       input_layouts=[None, None])(x)


def test_side_effect_keeps_an_unused_call():
    """Dead-code elimination drops an unused call unless it has a side effect (its jaxpr then
    carries the FFI effect), as in JAX."""
    from jax._src.interpreters import partial_eval as jax_pe  # JAX's DCE, the reference
    x = data(3, 4)

    def f(J, effect):
        def g(x):
            J.ffi.ffi_call("rms_norm", J.ShapeDtypeStruct(x.shape, np.float32),
                           has_side_effect=effect)(x, eps=EPS)
            return x + 1.0
        return g

    for effect in (False, True):
        mini = pe.dce_jaxpr(minijax.make_jaxpr(f(minijax, effect))(x).jaxpr)[0]
        ref = jax_pe.dce_jaxpr(jax.make_jaxpr(f(jax, effect))(x).jaxpr, [True])[0]
        names = [[e.primitive.name for e in j.eqns] for j in (mini, ref)]
        assert names[0] == names[1] == ["ffi_call", "add"][1 - effect:]
        assert sorted(map(str, mini.effects)) == sorted(map(str, ref.effects))
