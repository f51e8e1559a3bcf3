"""The rest of `jax.numpy`'s public surface against JAX: window functions, polynomials, set
operations of two arrays, histograms, index tricks, `vectorize`/`ufunc`, array manipulation,
bit packing, dtype names and NumPy's re-exported helpers. One program, two modules (values,
shapes, dtypes, weak types), plus a transform (grad, jit or vmap) for the differentiable ones.
jnp.fft is in tests/fft_test.py."""

import io

import jax
import ml_dtypes
import numpy as np
import pytest
from lax_numpy_test_util import A3, DUP, DUPI, A, I, P, V, assert_same, check

import minijax

RNG = np.random.default_rng(3)
X = np.array([3, 1, 2, 3, 5, 7], np.int32)
Y = np.array([2, 3, 4, 4, 9], np.int32)
PTS = RNG.standard_normal((20, 2)).astype(np.float32)
PHASE = np.cumsum(RNG.uniform(-3, 3, 12)).astype(np.float32)
BYTES = np.array([[7, 255, 0], [1, 128, 64]], np.uint8)
SQ = RNG.standard_normal((4, 4)).astype(np.float32)
XFIT = np.linspace(-1, 1, 9).astype(np.float32)
YFIT = (1 - 2 * XFIT + 0.5 * XFIT ** 3 + 0.01 * np.sin(7 * XFIT)).astype(np.float32)



def _static(jnp, n: int) -> dict:
    """A value-dependent output's length: minijax runs on the concrete input (no `size`); the
    JAX reference, run under jit, needs it static, so it gets `size=n` (n counted by NumPy)."""
    return {} if jnp is minijax.numpy else {"size": n}


CASES = {
    # window functions
    "hanning": lambda jnp: (jnp.hanning(8), jnp.hanning(1), jnp.hanning(0)),
    "hamming": lambda jnp: jnp.hamming(7),
    "blackman": lambda jnp: jnp.blackman(9),
    "bartlett": lambda jnp: (jnp.bartlett(6), jnp.bartlett(5)),
    "kaiser": lambda jnp: (jnp.kaiser(8, 3.0), jnp.kaiser(5, 14.0)),
    "i0": lambda jnp: jnp.i0(np.array([0., 0.5, -1., 3., -8., 20.], np.float32)),
    # polynomials
    "polyadd": lambda jnp: jnp.polyadd(np.array([1, 2]), np.array([1, 3, 4])),
    "polysub": lambda jnp: jnp.polysub(np.array([1., 2, 3]), np.array([4., 5])),
    "polymul": lambda jnp: jnp.polymul(np.array([1., 2]), np.array([1., 3, 4])),
    "polydiv": lambda jnp: jnp.polydiv(np.array([1., 2, 3, 4]), np.array([2., 1])),
    "polyder": lambda jnp: (jnp.polyder(np.array([1, 2, 3, 4])),
                            jnp.polyder(np.array([1., 2, 3, 4]), m=2)),
    "polyint": lambda jnp: (jnp.polyint(np.array([1, 2, 3])),
                            jnp.polyint(np.array([1., 2, 3]), m=2, k=np.array([1., 2.]))),
    "poly": lambda jnp: jnp.poly(np.array([1., 2., -3.])),
    "polyval": lambda jnp: jnp.polyval(np.array([1., -2., 3.]), V),
    "polyfit": lambda jnp: (jnp.polyfit(XFIT, YFIT, 3),
                            jnp.polyfit(XFIT, np.stack([YFIT, 2 * YFIT], 1), 2)),
    "polyfit_weighted": lambda jnp: jnp.polyfit(XFIT, YFIT, 2, w=np.abs(XFIT) + 1),
    "vander": lambda jnp: (jnp.vander(V), jnp.vander(V, 3, increasing=True)),
    # set operations
    "union1d": lambda jnp: (jnp.union1d(X, Y, **_static(jnp, 7)), jnp.union1d(X, Y, size=10)),
    "setdiff1d": lambda jnp: (jnp.setdiff1d(X, Y, **_static(jnp, 3)), jnp.setdiff1d(X, Y, size=5),
                              jnp.setdiff1d(X, Y, size=5, fill_value=-1)),
    "setxor1d": lambda jnp: (jnp.setxor1d(X, Y, **_static(jnp, 5)), jnp.setxor1d(X, Y, size=7)),
    "lexsort_of_a_1d_array": lambda jnp: jnp.lexsort(np.array([3, 1, 2])),
    "intersect1d": lambda jnp: (jnp.intersect1d(X, Y, **_static(jnp, 2)),
                                jnp.intersect1d(X, Y, size=4),
                                jnp.intersect1d(X, Y, return_indices=True, **_static(jnp, 2))),
    "unique_all": lambda jnp: tuple(jnp.unique_all(DUP, **_static(jnp, 4))),
    "unique_counts": lambda jnp: tuple(jnp.unique_counts(DUPI, **_static(jnp, 4))),
    "unique_inverse": lambda jnp: tuple(jnp.unique_inverse(DUPI, **_static(jnp, 4))),
    "unique_values": lambda jnp: (jnp.unique_values(DUP, **_static(jnp, 4)),
                                  jnp.unique_values(DUP, size=6, fill_value=-1.)),
    # histograms
    "histogram_bin_edges": lambda jnp: (jnp.histogram_bin_edges(V, 4),
                                        jnp.histogram_bin_edges(V, 3, range=(-1, 2))),
    "histogram2d": lambda jnp: jnp.histogram2d(PTS[:, 0], PTS[:, 1], bins=(3, 4)),
    "histogram2d_density": lambda jnp: jnp.histogram2d(PTS[:, 0], PTS[:, 1], bins=3,
                                                       density=True),
    "histogramdd": lambda jnp: jnp.histogramdd(PTS, bins=[2, np.array([-2., 0., 0.5, 3.])],
                                               weights=np.abs(PTS[:, 0])),
    # index tricks
    "mgrid": lambda jnp: (jnp.mgrid[0:3, 1:5:2], jnp.mgrid[-1:1:5j], jnp.mgrid[0:4]),
    "ogrid": lambda jnp: tuple(jnp.ogrid[0:3, 0:1:3j]),
    "r_": lambda jnp: (jnp.r_[np.array([1, 2]), 0, 4, 1:4], jnp.r_["-1,2,0", V, V],
                       jnp.r_[-1:1:4j, np.array([5.])], jnp.r_["r", [1, 2, 3]]),
    "c_": lambda jnp: (jnp.c_[np.array([1, 2, 3]), np.array([4, 5, 6])], jnp.c_[A, A]),
    "ix_": lambda jnp: jnp.asarray(A)[jnp.ix_(np.array([0, 2]), np.array([1, 3]))],
    "s_index_exp": lambda jnp: (jnp.asarray(A)[jnp.s_[1:, ::2]],
                                jnp.asarray(A)[jnp.index_exp[0]]),
    # manipulation
    "choose_wrap_clip": lambda jnp: (
        jnp.choose(np.array([3, -1, 1, 0]), [V[:4], -V[:4]], mode="wrap"),
        jnp.choose(np.array([3, -1, 1, 0]), [V[:4], -V[:4]], mode="clip")),
    "ravel_multi_index_clip_wrap": lambda jnp: (
        jnp.ravel_multi_index((np.array([5, -1]), np.array([1, 9])), (3, 4), mode="clip"),
        jnp.ravel_multi_index((np.array([5, -1]), np.array([1, 9])), (3, 4), mode="wrap")),
    "block": lambda jnp: (jnp.block([[A, A], [A, A]]), jnp.block([V, V]),
                          jnp.block([[np.ones((2, 2)), np.zeros((2, 1))]])),
    "compress": lambda jnp: (jnp.compress(np.array([True, False, True]), A, axis=0,
                                          **_static(jnp, 2)),
                             jnp.compress(np.array([1, 0, 1, 1]), A, axis=1, **_static(jnp, 3)),
                             jnp.compress(V > 0, V, size=4, fill_value=-9)),
    "extract": lambda jnp: (jnp.extract(A > 0, A, **_static(jnp, int((A > 0).sum()))),
                            jnp.extract(A > 0, A, size=8)),
    "place": lambda jnp: jnp.place(A, A > 0, np.array([10., 20.]), inplace=False),
    "put": lambda jnp: (jnp.put(A, np.array([0, 5, 11]), np.array([7., 8.]), inplace=False),
                        jnp.put(A, np.array([-1, 20]), 1., mode="clip", inplace=False),
                        jnp.put(A, np.array([13]), 5., mode="wrap", inplace=False)),
    "put_along_axis": lambda jnp: jnp.put_along_axis(
        A, np.argmax(A, axis=1)[:, None], -1., axis=1, inplace=False),
    "fill_diagonal": lambda jnp: (jnp.fill_diagonal(SQ, 2., inplace=False),
                                  jnp.fill_diagonal(np.zeros((3, 3, 3)), np.arange(1., 4.),
                                                    inplace=False),
                                  jnp.fill_diagonal(A, 0., inplace=False)),
    "diagflat": lambda jnp: (jnp.diagflat(np.array([[1, 2], [3, 4]])), jnp.diagflat(V, -1)),
    "dsplit": lambda jnp: jnp.dsplit(A3, 2),
    "rollaxis": lambda jnp: (jnp.rollaxis(A3, 2), jnp.rollaxis(A3, 0, 3), jnp.rollaxis(A3, 1, -1)),
    "diag_indices_from": lambda jnp: jnp.diag_indices_from(SQ),
    "tril_triu_indices_from": lambda jnp: (jnp.tril_indices_from(A, 1),
                                           jnp.triu_indices_from(A, -1)),
    "mask_indices": lambda jnp: jnp.mask_indices(3, jnp.triu, 1, **_static(jnp, 3)),
    "array_equiv": lambda jnp: (jnp.array_equiv(A, A), jnp.array_equiv(A[0], A),
                                jnp.array_equiv(np.ones(3), np.ones((2, 3))),
                                jnp.array_equiv(A, V)),
    "unwrap": lambda jnp: (jnp.unwrap(PHASE), jnp.unwrap(PHASE, period=4.),
                           jnp.unwrap(np.array([0, 5, 9, 1, 7]), period=6)),
    "gradient": lambda jnp: (jnp.gradient(V), jnp.gradient(A, 2.), jnp.gradient(A, axis=1),
                             jnp.gradient(V, np.array([0., 1., 1.5, 3., 3.2]))),
    "apply_along_axis": lambda jnp: (
        jnp.apply_along_axis(lambda v: v * v.sum(), 1, A),
        jnp.apply_along_axis(lambda v: v.max(), 0, A3),
        jnp.apply_along_axis(lambda v: jnp.stack([v.min(), v.max()]), 2, A3)),
    "apply_over_axes": lambda jnp: jnp.apply_over_axes(jnp.sum, A3, [0, 2]),
    "piecewise": lambda jnp: (
        jnp.piecewise(V, [V < 0, V >= 0], [lambda x: -x, lambda x: x * 2]),
        jnp.piecewise(V, [V < -0.5, V > 0.5], [-1., lambda x: x ** 2, 0.]),
        jnp.piecewise(A, [A > 1], [lambda x: x + 10])),
    "vectorize": lambda jnp: (
        jnp.vectorize(lambda a, b: a * b + 1)(A, V[:4]),
        jnp.vectorize(lambda a, b: jnp.dot(a, b), signature="(n),(n)->()")(A, A),
        jnp.vectorize(lambda m, v: m @ v, signature="(m,n),(n)->(m)")(A3, A[0]),
        jnp.vectorize(lambda x, p: x ** p, excluded={1})(A, 2)),
    "matvec_vecmat": lambda jnp: (jnp.matvec(A3, V[:4]), jnp.vecmat(V[:3], A3)),
    "packbits": lambda jnp: (jnp.packbits(I > 0), jnp.packbits(I, axis=1),
                             jnp.packbits(np.array([1, 0, 1]), bitorder="little")),
    "unpackbits": lambda jnp: (jnp.unpackbits(BYTES), jnp.unpackbits(BYTES, axis=1),
                               jnp.unpackbits(BYTES, axis=0, count=5, bitorder="little")),
    "partition": lambda jnp: (jnp.partition(A, 1), jnp.partition(A, 2, axis=0),
                              jnp.partition(np.array([3, 0, 5, 1], np.uint8), 2)),
    "argpartition": lambda jnp: (jnp.argpartition(A, 1), jnp.argpartition(A, -1, axis=0),
                                 jnp.argpartition(np.array([2, 2, 1, 2]), 1)),
    "sort_complex": lambda jnp: (jnp.sort_complex(np.array([3., 1., 2.], np.float32)),
                                 jnp.sort_complex(np.array([1 + 2j, 1 - 1j, -1j], np.complex64))),
    # elementwise
    "angle": lambda jnp: (jnp.angle(np.array([1 + 1j, -1j, -2.], np.complex64)),
                          jnp.angle(V), jnp.angle(np.array([1, -2])), jnp.angle(1j, deg=True)),
    "iscomplex": lambda jnp: (jnp.iscomplex(np.array([1 + 1j, 2., 3j], np.complex64)),
                              jnp.iscomplex(V)),
    "spacing": lambda jnp: (jnp.spacing(np.array([0., 1., -3., 1e-30, 1e30], np.float32)),
                            jnp.spacing(np.array([1., -2.], np.float16))),
    "bitwise_count": lambda jnp: (jnp.bitwise_count(np.array([64, 31, -16, -7, -128], np.int8)),
                                  jnp.bitwise_count(np.array([2 ** 31 - 1, 5], np.int32)),
                                  jnp.bitwise_count(np.array([True, False]))),
    "fromfunction": lambda jnp: (jnp.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
                                 jnp.fromfunction(lambda i: i * i, (5,), dtype=np.int32)),
    "frombuffer_fromstring": lambda jnp: (
        jnp.frombuffer(np.arange(4, dtype=np.int32).tobytes(), dtype=np.int32),
        jnp.fromstring("1 2 3.5", sep=" ", dtype=np.float32)),
    "from_dlpack": lambda jnp: jnp.from_dlpack(np.arange(6.0, dtype=np.float32).reshape(2, 3)),
    # dtype names as constructors
    "scalar_types": lambda jnp: (jnp.bool(1), jnp.single(1.5), jnp.csingle(1 + 2j),
                                 jnp.int4(3), jnp.uint4(9), jnp.float8_e5m2(1.3),
                                 jnp.float8_e4m3fn(-0.7), jnp.bfloat16(2.5)),
}

# Checks that need concrete values in JAX too (mode="raise", trim_zeros): JAX runs eagerly
EAGER_CASES = {
    "choose": lambda jnp: jnp.choose(np.array([0, 2, 1, 0]), [V[:4], 2 * V[:4], -V[:4]]),
    "ravel_multi_index": lambda jnp: (
        jnp.ravel_multi_index((np.array([0, 2, 1]), np.array([3, 0, 1])), (3, 4)),
        jnp.ravel_multi_index((np.array([0, 2, 1]), np.array([3, 0, 1])), (3, 4), order="F")),
    "trim_zeros": lambda jnp: (jnp.trim_zeros(np.array([0, 0, 1, 2, 0])),
                               jnp.trim_zeros(np.array([0, 3, 0]), "b")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    check(lambda J: CASES[name](J.numpy), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", sorted(EAGER_CASES))
def test_matches_jax_eagerly(name):
    check(lambda J: EAGER_CASES[name](J.numpy), jit=False)


def test_roots_match_jax_up_to_order():
    jax_roots = jax.jit(lambda p: jax.numpy.roots(p, strip_zeros=False))
    for p in (np.array([1., -6., 11., -6.], np.float32),
              np.array([1., 2., 3., 4., 5.], np.float32)):
        got, want = np.asarray(minijax.numpy.roots(p)), np.asarray(jax_roots(p))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(want), atol=2e-4)
    p = np.array([0., 1., -3., 2.], np.float32)  # a leading zero, stripped (concrete p)
    np.testing.assert_allclose(np.sort_complex(np.asarray(minijax.numpy.roots(p))), [1, 2],
                               atol=1e-5)
    jitted = minijax.jit(lambda p: minijax.numpy.roots(p, strip_zeros=False))
    np.testing.assert_allclose(np.sort_complex(np.asarray(jitted(p[1:]))), [1, 2], atol=1e-5)


def test_constants_dtypes_and_numpy_helpers():
    mnp, jnp = minijax.numpy, jax.numpy
    assert mnp.euler_gamma == jnp.euler_gamma and mnp.ComplexWarning is jnp.ComplexWarning
    for n in ("generic", "character", "flexible", "object_", "signedinteger",
              "unsignedinteger", "complexfloating"):
        assert getattr(mnp, n) is getattr(jnp, n)
    for n in ("complex128", "complex_", "cdouble", "csingle", "double", "single", "float_",
              "int_", "uint", "int1", "int2", "int4", "uint1", "uint2", "uint4",
              "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
              "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
              "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "bool"):
        assert np.dtype(getattr(mnp, n)) == np.dtype(getattr(jnp, n)), n
        assert getattr(mnp, n) == getattr(jnp, n).dtype.type, n
    assert np.dtype(mnp.int4) == ml_dtypes.int4
    for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric", ("bool", "integral"), np.float32):
        for dt in (np.bool_, np.int8, np.uint32, np.float32, np.complex64, mnp.bfloat16):
            assert mnp.isdtype(dt, kind) == jnp.isdtype(dt, kind), (dt, kind)
    with pytest.raises(ValueError, match="unknown kind"):
        mnp.isdtype(np.float32, "reals")
    assert mnp.can_cast(np.int8, np.int32) and mnp.iterable([1]) and not mnp.iterable(1)
    assert mnp.array_str(mnp.arange(3)) == jnp.array_str(jnp.arange(3))
    assert mnp.array_repr(np.arange(3)) == jnp.array_repr(np.arange(3))
    with mnp.printoptions(precision=2):
        assert mnp.get_printoptions()["precision"] == 2
    buf = io.BytesIO()
    mnp.save(buf, mnp.arange(4.0))
    buf.seek(0)
    assert_same(mnp.load(buf), jnp.asarray(np.arange(4.0, dtype=np.float32)))
    # minijax contracts left to right: the same path as opt_einsum's for these
    for subs, ops in [("ij->ji", (A,)), ("ij,jk->ik", (A, A.T)), ("ij,jk,kl->il", (A, A.T, A))]:
        assert mnp.einsum_path(subs, *ops)[0] == jnp.einsum_path(subs, *ops)[0], subs
    for fn in (mnp.fromfile, mnp.fromiter):
        with pytest.raises(NotImplementedError, match="non-pure"):
            fn("x")


def test_ufunc_and_frompyfunc():
    """Each method against JAX's (JAX's run under jit)."""
    mnp, jnp = minijax.numpy, jax.numpy
    ours, theirs = (J.frompyfunc(lambda a, b: a * b + a, 2, 1, identity=0) for J in (mnp, jnp))
    assert ours.nin == theirs.nin == 2 and ours.nout == theirs.nout == 1

    def methods(u):
        return (u(A, V[:4]), u.outer(V[:3], V[:2]), u.reduce(A), u.accumulate(A),
                u.reduce(A, axis=None), u.reduce(A, axis=1, keepdims=True),
                u.at(V, np.array([0, 2, 0]), 2., inplace=False),
                u.reduceat(V, np.array([0, 3, 1])))
    assert_same(methods(ours), jax.jit(lambda: methods(theirs))(), rtol=1e-4)
    hyp = mnp.ufunc(lambda a, b: mnp.sqrt(a * a + b * b), 2, 1, name="hyp")
    assert_same(minijax.jit(hyp)(A, P), jax.jit(jnp.hypot)(A, P), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        ours.at(V, np.array([0]), 1.)


def test_transforms_through_new_functions():
    """grad and vmap (minijax eagerly, JAX under jit), then minijax.jit, against JAX."""
    def program(J):
        jnp = J.numpy

        def loss(v):
            return (jnp.kaiser(6, v[0] * 4).sum() + jnp.i0(v).sum()
                    + jnp.polyval(jnp.polyint(v), 0.5) + jnp.gradient(v * v).sum()
                    + jnp.piecewise(v, [v > 0], [lambda x: x ** 3, lambda x: -x]).sum()
                    + jnp.vectorize(jnp.dot, signature="(n),(n)->()")(v, v)
                    + jnp.unwrap(v * 3).sum() + jnp.polyfit(XFIT, YFIT * v[1], 2).sum())
        return (J.grad(loss)(V), J.vmap(lambda r: jnp.apply_along_axis(jnp.cumsum, 0, r))(A3))
    check(program, rtol=2e-4, atol=2e-4)

    def jitted(J):
        jnp = J.numpy
        return (J.jit(lambda a: jnp.histogram2d(a[:, 0], a[:, 1], bins=3)[0])(PTS),
                J.jit(lambda a, b: jnp.union1d(a, b, size=9))(X, Y),
                J.jit(lambda a: jnp.partition(a, 2))(A), J.jit(lambda: jnp.hanning(5))())
    assert_same(jitted(minijax), jitted(jax))


def test_bad_input_errors_name_the_function():
    mnp = minijax.numpy
    with pytest.raises(minijax.errors.ConcretizationTypeError, match="hanning"):
        minijax.jit(lambda m: mnp.hanning(m))(4)
    with pytest.raises(ValueError, match="choose"):
        mnp.choose(np.array([0, 3]), [V[:2], V[:2]])
    with pytest.raises(NotImplementedError, match="inplace=False"):
        mnp.fill_diagonal(SQ, 1.)
    with pytest.raises(ValueError, match="signature"):
        mnp.vectorize(lambda a: a, signature="(n->()")
    with pytest.raises(ValueError, match="core dimension"):
        mnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(V, V[:3])
    with pytest.raises(ValueError, match="core dimensions"):
        mnp.vectorize(lambda a, b: a * b, signature="(n),(n)->()")(V, V)
    with pytest.raises(minijax.errors.ConcretizationTypeError):
        minijax.jit(lambda a, b: mnp.setdiff1d(a, b))(X, Y)
    with pytest.raises(NotImplementedError, match="eigen"):
        mnp.poly(SQ)
    with pytest.raises(ValueError, match="polyfit"):
        mnp.polyfit(XFIT, YFIT[:3], 1)
    # the narrow dtypes are names and eager arrays; minijax does not lower them
    assert mnp.asarray(V).astype(mnp.float8_e5m2).dtype == ml_dtypes.float8_e5m2
    with pytest.raises(TypeError, match="float8_e5m2"):
        minijax.jit(lambda v: v.astype(mnp.float8_e5m2))(V)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        minijax.jit(lambda v: v.astype(mnp.float8_e4m3fn))(V)


SPD = (SQ @ SQ.T + 4 * np.eye(4)).astype(np.float32)
TALL = RNG.standard_normal((6, 3)).astype(np.float32)
B6 = RNG.standard_normal((6, 2)).astype(np.float32)
LINALG = {
    "lstsq": lambda la: (tuple(la.lstsq(TALL, B6)), tuple(la.lstsq(TALL, B6[:, 0]))),
    "cond": lambda la: (la.cond(SPD), la.cond(SQ, -2), la.cond(SPD, "fro"), la.cond(SPD, 1)),
    "matrix_power": lambda la: (la.matrix_power(SQ, 3), la.matrix_power(SPD, -2),
                                la.matrix_power(SQ, 0), la.matrix_power(I[:, :3], 2)),
    "matrix_norm": lambda la: (la.matrix_norm(A3), la.matrix_norm(SQ, ord=2, keepdims=True)),
    "multi_dot": lambda la: (la.multi_dot([V[:3], A, A.T, V[:3]]), la.multi_dot([A, A.T])),
    "tensorinv_tensorsolve": lambda la: (
        la.tensorinv(np.reshape(SPD, (2, 2, 4)), 2),
        la.tensorsolve(np.reshape(SPD @ SPD, (4, 2, 2)), V[:4])),
    "array_api_aliases": lambda la: (
        la.cross(A3[..., :3], A3[..., 1:]), la.outer(V, V[:2]), la.diagonal(A3, offset=1),
        la.trace(A3), la.matmul(A, A.T), la.tensordot(A, A, axes=2), la.vecdot(A, A),
        la.matrix_transpose(A3)),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_matches_jax(name):
    check(lambda J: LINALG[name](J.numpy.linalg), rtol=2e-4, atol=2e-4)


def test_lstsq_grad_and_numpy_resid_match_jax():
    def program(J):
        return J.grad(lambda a: J.numpy.linalg.lstsq(a, B6)[0].sum())(TALL)
    check(program, rtol=1e-3, atol=1e-3)
    # numpy_resid's output shape depends on the rank: JAX runs it eagerly
    check(lambda J: tuple(J.numpy.linalg.lstsq(TALL, B6, numpy_resid=True)), rtol=2e-4,
          atol=2e-4, jit=False)


def test_set_operations_with_an_empty_result_match_jax_eagerly():
    # issue 45: the default fill read the first entry of an empty result (JAX's jit cannot
    # run these with size=0, so both run eagerly)
    def run(jnp):
        a, b = np.array([1, 2]), np.array([2, 1])
        return [jnp.setxor1d(a, b), jnp.setdiff1d(a, b), jnp.intersect1d(a[:1], b[:1] + 5)]
    for got, want in zip(run(minijax.numpy), run(jax.numpy)):
        assert (got.shape, got.dtype) == (want.shape, want.dtype) == ((0,), want.dtype)
