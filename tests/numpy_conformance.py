"""A conformance-case generator for `minijax.numpy` against `jax.numpy`, in the spirit of JAX's
tests/lax_numpy_test.py (its `JAX_ONE_TO_ONE_OP_RECORDS` tables).

`SPECS` holds one `Spec` per `jnp` function, by name: its arity, the shapes and dtypes to try, the
keyword variants (axis, keepdims, ...), the input domain (positive for `log`, ...), a tolerance
and whether it is differentiable. `cases()` expands the table into `Case`s, one per (function,
dtype, shape, kwargs). `check_case(case)` runs `jax.numpy.<fn>` and `minijax.numpy.<fn>` on the
same seeded numpy inputs and compares value (NaN-equal), dtype, shape and weak type; where JAX
raises, minijax must raise too. For each differentiable function one float32 case also compares
`minijax.grad` of `sum(f)` with `jax.grad`.

JAX references are computed one function at a time under a single `jax.jit` over all of that
function's cases (one XLA compilation per function instead of one per case) and cached here.

`KNOWN_GAPS` lists the cases where minijax is known to differ, with a reason; the test file marks
them `xfail(strict=True)` so a fixed gap is noticed. `gaps_markdown()` renders the table that is
committed as docs/numpy_conformance.md. This module is imported by
tests/lax_numpy_conformance_test.py and compare/numpy.py; it defines no tests itself.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pickle
import re
import zlib
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import minijax
import minijax.numpy as mnp

DOCS_PATH = Path(__file__).parent.parent / "docs" / "numpy_conformance.md"

DTYPES = {
    "bool": np.dtype(np.bool_),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(jnp.bfloat16),
}
# (rtol, atol) per output dtype; a spec's `tol` multiplies them.
TOLERANCE = {"float32": (2e-5, 2e-6), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}

MATH = ("float32", "float16", "bfloat16", "int32")  # transcendental: ints promote to float
NUMERIC = ("float32", "bfloat16", "int32", "uint8")
ALL = ("float32", "int32", "uint8", "bool")
SHAPE_DT = ("float32", "int32", "bool")          # for shape manipulation

S0, S3, S23, S213 = (), (3,), (2, 3), (2, 1, 3)
UNARY_SHAPES = ((S0,), (S3,), (S23,), (S213,))
BINARY_SHAPES = ((S0, S0), (S3, S3), (S23, S23), (S213, (4, 3)), (S23, S0))
ND_SHAPES = ((S3,), (S23,), (S213,))
REDUCE_VARIANTS = ({}, {"axis": 0}, {"axis": -1, "keepdims": True})


@dataclasses.dataclass(frozen=True)
class Spec:
    """How to exercise one `jnp` function.

    shapes: per case, one shape per array argument (for arity 0, the `shape` the function is
    called with); domain: one input domain per array argument (see `make_input`); call:
    `call(f, *arrays, **kwargs)` where `f` is the module's function (default: `f(*arrays,
    **kwargs)`); tol: multiplies `TOLERANCE`; grad: compare gradients of `sum(f)` for one float32
    case; jit: False where JAX needs concrete values (the reference then runs eagerly).
    """

    name: str
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[tuple[int, ...], ...], ...] = UNARY_SHAPES
    variants: tuple[dict, ...] = ({},)
    domain: tuple[str, ...] = ("any",)
    call: Callable | None = None
    tol: float = 1.0
    grad: bool = False
    jit: bool = True
    creation: bool = False

    @property
    def arity(self) -> int:
        return 0 if self.creation else len(self.shapes[0])


@dataclasses.dataclass(frozen=True)
class Case:
    spec: Spec
    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    kwargs: dict

    @property
    def fn(self) -> str:
        return self.spec.name

    @property
    def id(self) -> str:
        """pytest id: fn-dtype-shape[-kwargs], e.g. `sum-float32-2x3-axis=0`."""
        shp = "_".join("x".join(map(str, s)) or "scalar" for s in self.shapes)
        kw = ",".join(f"{k}={_short(v)}" for k, v in self.kwargs.items())
        return "-".join(p for p in (self.fn, self.dtype, shp, kw) if p)


def _short(v) -> str:
    return str(v).replace(" ", "").replace("'", "")


# ---------------------------------------------------------------------------------------------
# The spec table
# ---------------------------------------------------------------------------------------------

def _unary(names, dtypes, domain="any", grad=False, tol=1.0, shapes=UNARY_SHAPES, **kw):
    return [Spec(n, dtypes, shapes, domain=(domain,), grad=grad, tol=tol, **kw)
            for n in names.split()]


def _binary(names, dtypes, domain=("any", "any"), grad=False, tol=1.0, **kw):
    return [Spec(n, dtypes, BINARY_SHAPES, domain=domain, grad=grad, tol=tol, **kw)
            for n in names.split()]


def _reduce(names, dtypes, grad=False, tol=1.0, variants=REDUCE_VARIANTS, domain="any"):
    return [Spec(n, dtypes, UNARY_SHAPES, variants, domain=(domain,), grad=grad, tol=tol)
            for n in names.split()]


def _shape(name, call=None, variants=({},), shapes=ND_SHAPES, dtypes=SHAPE_DT, grad=True,
           **kw):
    return [Spec(name, dtypes, shapes, variants, call=call, grad=grad, **kw)]


def _creation(name, call, dtypes=("float32", "int32", "bool"), shapes=((3,), (2, 3))):
    return [Spec(name, dtypes, tuple((s,) for s in shapes), call=call, creation=True)]


def _two(call):
    """A binary call on two same-shape arrays."""
    return dict(shapes=((S3, S3), (S23, S23), (S213, S213)), call=call)


SPECS_LIST: list[Spec] = [
    # -- elementwise math ---------------------------------------------------------------------
    *_unary("sin cos tan arctan sinh cosh tanh arcsinh exp exp2 expm1 cbrt deg2rad rad2deg "
            "degrees radians sinc atan asinh", MATH, grad=True, tol=5),
    *_unary("asin acos atanh", MATH, "unit", grad=True, tol=5),
    *_unary("arcsin arccos arctanh", MATH, "unit", grad=True, tol=5),
    *_unary("arccosh", MATH, "ge1", grad=True, tol=5),
    *_unary("log log2 log10 log1p sqrt", MATH, "pos", grad=True, tol=5),
    *_unary("reciprocal", ("float32", "bfloat16", "int32"), "nonzero", grad=True),
    *_unary("abs absolute negative positive square sign", NUMERIC, grad=True),
    *_unary("floor ceil rint trunc", NUMERIC, "wide", grad=True),
    *_unary("round around", NUMERIC, "wide", grad=True, variants=({}, {"decimals": 1})),
    *_unary("conj conjugate real imag", NUMERIC, grad=True),
    *_unary("fabs", ("float32", "bfloat16", "int32"), grad=True),
    *_unary("nan_to_num", ("float32", "int32"), "special", grad=True),
    *_unary("isfinite isnan isinf signbit isneginf isposinf isreal", ("float32", "bfloat16",
                                                                      "int32"), "special"),
    *_unary("logical_not", ("bool", "int32", "float32")),
    *_unary("invert bitwise_not bitwise_invert", ("bool", "int32", "uint8")),
    *_binary("add subtract multiply maximum minimum", ALL + ("bfloat16",), grad=True),
    *_binary("divide true_divide", NUMERIC, ("any", "nonzero"), grad=True),
    *_binary("floor_divide mod remainder fmod", NUMERIC, ("any", "nonzero")),
    *_binary("power", ("float32", "int32"), ("pos", "small"), grad=True, tol=5),
    *_binary("float_power", ("float32",), ("pos", "any"), tol=5),
    *_binary("fmax fmin", ("float32", "int32"), ("special", "special")),
    *_binary("pow", ("float32", "int32"), ("pos", "small"), grad=True, tol=5),
    *_binary("arctan2 atan2 hypot logaddexp logaddexp2", ("float32", "bfloat16", "int32"),
             grad=True, tol=5),
    *_binary("copysign heaviside", ("float32", "int32")),
    *_binary("nextafter", ("float32",)),
    *_binary("ldexp", ("float32",), ("any", "small")),
    *_binary("equal not_equal greater greater_equal less less_equal", ALL),
    *_binary("logical_and logical_or logical_xor", ("bool", "int32", "float32")),
    *_binary("bitwise_and bitwise_or bitwise_xor", ("bool", "int32", "uint8")),
    *_binary("left_shift right_shift", ("int32", "uint8"), ("any", "shift")),
    *_binary("gcd lcm", ("int32",)),
    *_binary("isclose", ("float32", "int32")),
    *_binary("divmod", ("float32", "int32"), ("any", "nonzero")),
    *_unary("modf frexp", ("float32",), "wide"),
    *_unary("clip", ("float32", "int32"), grad=True,
            variants=({"min": -0.5, "max": 0.5}, {"min": 0}, {"max": 1})),
    *[Spec("where", ("float32", "int32", "bool"), ((S23, S23, S23), (S213, (4, 3), S0)),
           call=lambda f, c, x, y: f(c > 0, x, y))],
    # -- reductions ---------------------------------------------------------------------------
    *_reduce("sum prod mean max min amax amin", ("float32", "int32", "bool"), grad=True, tol=5),
    *_reduce("all any count_nonzero", ("bool", "int32", "float32")),
    *_reduce("argmax argmin", ("float32", "int32")),
    *_reduce("std var", ("float32", "int32"), grad=True, tol=10,
             variants=REDUCE_VARIANTS + ({"axis": 0, "ddof": 1},)),
    *_reduce("median ptp average", ("float32", "int32"), grad=True, tol=5),
    *_reduce("nanmedian", ("float32",), tol=5, domain="special"),
    *_reduce("cumulative_sum cumulative_prod", ("float32", "int32", "bool"), grad=True,
             variants=({"axis": 0}, {"axis": -1}, {"axis": 0, "include_initial": True})),
    *_reduce("nansum nanmean nanmax nanmin nanprod nanstd nanvar nanargmax nanargmin",
             ("float32",), tol=10, domain="special"),
    *_reduce("cumsum cumprod nancumsum nancumprod", ("float32", "int32", "bool"), grad=True,
             variants=({}, {"axis": 0}, {"axis": -1})),
    *_reduce("quantile percentile nanquantile nanpercentile", ("float32",), tol=5,
             variants=({"q": 0.3}, {"q": 0.5, "axis": 0})),
    *_reduce("diff", ("float32", "int32", "bool"), grad=True,
             variants=({}, {"n": 2}, {"axis": 0})),
    *_reduce("sort argsort", ("float32", "int32", "bool"),
             variants=({}, {"axis": 0}, {"axis": -1})),
    *_unary("trace diagonal", ("float32", "int32"), grad=True, shapes=ND_SHAPES,
            variants=({}, {"offset": 1})),
    # -- shape manipulation -------------------------------------------------------------------
    *_shape("ravel"),
    *_shape("shape", grad=False, shapes=UNARY_SHAPES),
    *_shape("ndim", grad=False, shapes=UNARY_SHAPES),
    *_shape("size", grad=False, shapes=UNARY_SHAPES),
    *_shape("astype", call=lambda f, x: f(x, np.float16)),
    *_shape("empty_like", grad=False, call=lambda f, x: f(x).shape),
    *_shape("permute_dims", call=lambda f, x: f(x, tuple(range(x.ndim))[::-1])),
    *_shape("unstack"),
    *_shape("concat", **_two(lambda f, x, y: f([x, y]))),
    *_shape("select", **_two(lambda f, x, y: f([x > 0, y > 0], [x, y], 0))),
    *_shape("histogram", grad=False, dtypes=("float32",), variants=({"bins": 3},)),
    *_shape("copy"),
    *_shape("transpose", variants=({}, {"axes": (1, 0)})),
    *_shape("matrix_transpose"),
    *_shape("reshape", call=lambda f, x: f(x, (-1,))),
    *_shape("flip", variants=({}, {"axis": 0})),
    *_shape("fliplr"),
    *_shape("flipud"),
    *_shape("roll", variants=({"shift": 1}, {"shift": 2, "axis": 0})),
    *_shape("rot90", variants=({}, {"k": 2})),
    *_shape("squeeze", variants=({}, {"axis": 1})),
    *_shape("expand_dims", variants=({"axis": 0}, {"axis": -1})),
    *_shape("swapaxes", call=lambda f, x: f(x, 0, -1)),
    *_shape("moveaxis", call=lambda f, x: f(x, 0, -1)),
    *_shape("atleast_1d", shapes=UNARY_SHAPES),
    *_shape("atleast_2d", shapes=UNARY_SHAPES),
    *_shape("atleast_3d", shapes=UNARY_SHAPES),
    *_shape("tile", call=lambda f, x: f(x, (2, 1))),
    *_shape("repeat", variants=({"repeats": 2}, {"repeats": 2, "axis": 0})),
    *_shape("broadcast_to", call=lambda f, x: f(x, (4,) + x.shape)),
    *_shape("tril", variants=({}, {"k": 1})),
    *_shape("triu", variants=({}, {"k": -1})),
    *_shape("diag", shapes=((S3,), (S23,))),
    *_shape("pad", variants=({"pad_width": 1}, {"pad_width": 1, "mode": "edge"})),
    *_shape("resize", call=lambda f, x: f(x, (4, 2))),
    *_shape("delete", variants=({"obj": 1, "axis": 0},)),
    *_shape("insert", variants=({"obj": 1, "values": 0, "axis": 0},)),
    *_shape("append", **_two(lambda f, x, y: f(x, y, axis=0))),
    *_shape("concatenate", **_two(lambda f, x, y: f([x, y]))),
    *_shape("stack", **_two(lambda f, x, y: f([x, y], axis=-1))),
    *_shape("hstack", **_two(lambda f, x, y: f([x, y]))),
    *_shape("vstack", **_two(lambda f, x, y: f([x, y]))),
    *_shape("dstack", **_two(lambda f, x, y: f([x, y]))),
    *_shape("column_stack", **_two(lambda f, x, y: f([x, y]))),
    *_shape("split", call=lambda f, x: f(x, [1], axis=-1)),
    *_shape("array_split", call=lambda f, x: f(x, 2)),
    *_shape("hsplit", call=lambda f, x: f(x, [1])),
    *_shape("vsplit", call=lambda f, x: f(x, [1])),
    *_shape("take", variants=({"indices": np.array([0, 2, 1])},
                              {"indices": np.array([0, 0]), "axis": 0})),
    *_shape("take_along_axis", call=lambda f, x: f(x, np.zeros((1,) * x.ndim, np.int32), -1)),
    *_shape("meshgrid", **_two(lambda f, x, y: f(x.ravel(), y.ravel()))),
    *_shape("outer", **_two(lambda f, x, y: f(x, y))),
    *_shape("inner", **_two(lambda f, x, y: f(x, y))),
    *_shape("kron", **_two(lambda f, x, y: f(x, y))),
    *_shape("array_equal", grad=False, **_two(lambda f, x, y: f(x, y))),
    *_shape("allclose", grad=False, **_two(lambda f, x, y: f(x, y))),
    *_shape("cross", dtypes=("float32", "int32"), **_two(lambda f, x, y: f(x, y))),
    # -- linear algebra -----------------------------------------------------------------------
    *[Spec(n, ("float32", "int32", "bfloat16"),
           ((S3, S3), (S23, (3, 4)), ((2, 2, 3), (2, 3, 4)), (S23, S3)), grad=True, tol=5)
      for n in ("dot", "matmul")],
    *[Spec("vdot", ("float32", "int32"), ((S3, S3), (S23, S23)), grad=True, tol=5)],
    *[Spec("vecdot", ("float32", "int32"), ((S3, S3), (S23, S23), (S213, (4, 3))), grad=True,
           tol=5)],
    *[Spec("tensordot", ("float32", "int32"), ((S23, (3, 4)), ((2, 3, 4), (3, 4, 2))),
           variants=({"axes": 1},), grad=True, tol=5)],
    *[Spec("einsum", ("float32", "int32"), ((S23, (3, 4)),),
           call=lambda f, x, y, subscripts: f(subscripts, x, y),
           variants=({"subscripts": "ij,jk->ik"}, {"subscripts": "ij,jk->ki"},
                     {"subscripts": "ij,jk->"}), grad=True, tol=5)],
    *[Spec("convolve", ("float32", "int32"), ((S3, S3), ((5,), S3)), grad=True,
           variants=({}, {"mode": "same"}), tol=5)],
    *[Spec("correlate", ("float32", "int32"), ((S3, S3), ((5,), S3)), grad=True,
           variants=({}, {"mode": "same"}), tol=5)],
    *[Spec("polyval", ("float32", "int32"), ((S3, S3), (S3, S23)), grad=True, tol=5)],
    *[Spec("interp", ("float32",), ((S3, (4,), (4,)),), domain=("any", "sorted", "any"),
           tol=5)],
    *[Spec("searchsorted", ("float32", "int32"), (((5,), S3), ((5,), S23)),
           domain=("sorted", "any"))],
    *[Spec("digitize", ("float32",), ((S3, (5,)), (S23, (5,))), domain=("any", "sorted"))],
    *[Spec("isin", ("float32", "int32"), ((S3, (4,)), (S23, (4,))))],
    *_unary("cov corrcoef", ("float32",), shapes=((S23,), ((3, 4),)), tol=10, grad=True),
    *_unary("trapezoid", ("float32",), shapes=ND_SHAPES, tol=5, grad=True),
    *_unary("ediff1d", ("float32", "int32"), shapes=ND_SHAPES),
    *_unary("argwhere flatnonzero nonzero unique", ("float32", "int32", "bool"),
            shapes=ND_SHAPES, jit=False),
    *_unary("bincount", ("int32",), shapes=((S3,), ((6,),)), domain="count",
            variants=({"length": 8},)),
    *_unary("lexsort", ("int32",), shapes=(((2, 4),), ((3, 5),))),
    *_unary("unravel_index", ("int32",), shapes=((S3,),), domain="count",
            variants=({"shape": (2, 3)},), jit=False),
    # -- creation -----------------------------------------------------------------------------
    *_creation("zeros", lambda f, s, dtype: f(s, dtype=dtype)),
    *_creation("ones", lambda f, s, dtype: f(s, dtype=dtype)),
    *_creation("full", lambda f, s, dtype: f(s, 1, dtype=dtype)),
    *_creation("zeros_like", lambda f, s, dtype: f(np.ones(s, np.float32), dtype=dtype)),
    *_creation("ones_like", lambda f, s, dtype: f(np.ones(s, np.float32), dtype=dtype)),
    *_creation("full_like", lambda f, s, dtype: f(np.ones(s, np.float32), 1, dtype=dtype)),
    *_creation("empty", lambda f, s, dtype: f(s, dtype=dtype).shape),
    *_creation("eye", lambda f, s, dtype: f(*s, dtype=dtype)),
    *_creation("identity", lambda f, s, dtype: f(s[-1], dtype=dtype)),
    *_creation("tri", lambda f, s, dtype: f(*s, dtype=dtype)),
    *_creation("arange", lambda f, s, dtype: f(s[-1], dtype=dtype),
               dtypes=("float32", "int32")),
    *_creation("linspace", lambda f, s, dtype: f(0, 5, 2 * s[-1], dtype=dtype),
               dtypes=("float32", "int32")),
    *_creation("logspace", lambda f, s, dtype: f(0, 2, 2 * s[-1], dtype=dtype),
               dtypes=("float32",)),
    *_creation("geomspace", lambda f, s, dtype: f(1, 100, 2 * s[-1], dtype=dtype),
               dtypes=("float32",)),
    *_creation("indices", lambda f, s, dtype: f(s, dtype=dtype), dtypes=("int32",)),
    *_creation("tril_indices", lambda f, s, dtype: f(s[-1]), dtypes=("int32",)),
    *_creation("triu_indices", lambda f, s, dtype: f(s[-1], 1), dtypes=("int32",)),
    *_creation("diag_indices", lambda f, s, dtype: f(s[-1]), dtypes=("int32",)),
    *_creation("array", lambda f, s, dtype: f(np.arange(np.prod(s)).reshape(s), dtype=dtype)),
    *_creation("asarray", lambda f, s, dtype: f(np.arange(np.prod(s)).reshape(s), dtype=dtype)),
]
SPECS: dict[str, Spec] = {s.name: s for s in SPECS_LIST}
assert len(SPECS) == len(SPECS_LIST), "duplicate spec name"


@functools.cache
def cases() -> tuple[Case, ...]:
    """Every (function, dtype, shape, kwargs) case, in table order."""
    return tuple(Case(spec, dt, shapes, kw) for spec in SPECS_LIST for dt in spec.dtypes
                 for shapes in spec.shapes for kw in spec.variants)


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

def make_input(rng: np.random.Generator, shape, dtype: str, domain: str) -> np.ndarray:
    """A seeded numpy array of `shape`/`dtype` in a domain where the function is defined:
    any, pos (> 0), nonzero, unit (|x| < 1), ge1 (>= 1), wide (|x| up to 3, for rounding),
    small (0..3, exponents), shift (0..7), special (with nan/inf), sorted, count (0..5)."""
    dt = DTYPES[dtype]
    if dt == np.bool_:
        x = rng.random(shape) < 0.5
        return np.ones(shape, bool) if domain in ("pos", "nonzero", "ge1") else x
    if dt.kind in "iu":
        lo, hi = {"pos": (1, 6), "ge1": (1, 6), "small": (0, 4), "shift": (0, 8),
                  "count": (0, 6), "unit": (0, 1)}.get(domain, (-5, 6))
        if dt.kind == "u":
            lo = max(lo, 0)
        x = rng.integers(lo, hi, shape)
        if domain == "nonzero":
            x = np.where(x == 0, 1, x)
        if domain == "sorted":
            x = np.sort(x, axis=None).reshape(shape)
        return x.astype(dt)
    if domain == "pos":
        x = rng.uniform(0.5, 2.5, shape)
    elif domain == "nonzero":
        x = rng.choice([-1, 1], shape) * rng.uniform(0.5, 2.0, shape)
    elif domain == "unit":
        x = rng.uniform(-0.9, 0.9, shape)
    elif domain == "ge1":
        x = rng.uniform(1.1, 3.0, shape)
    elif domain == "wide":
        x = np.round(rng.uniform(-3, 3, shape), 1) + 0.01
    elif domain in ("small", "shift", "count"):
        x = rng.integers(0, 4, shape).astype(np.float64)
    elif domain == "special":
        x = rng.standard_normal(shape)
        if x.size >= 3:
            x.flat[:3] = [np.nan, np.inf, -np.inf][: x.size]
    elif domain == "sorted":
        x = np.sort(rng.standard_normal(shape), axis=None).reshape(shape)
    else:
        x = rng.standard_normal(shape)
    return np.asarray(x).astype(dt)


def case_inputs(case: Case) -> tuple[np.ndarray, ...]:
    """The case's numpy arguments (seeded by the case id, so every process builds the same)."""
    if case.spec.arity == 0:
        return ()
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    dom = case.spec.domain
    return tuple(make_input(rng, s, case.dtype, dom[i] if i < len(dom) else dom[-1])
                 for i, s in enumerate(case.shapes))


def _call(spec: Spec, f, case: Case, args):
    if spec.arity == 0:
        return spec.call(f, case.shapes[0], DTYPES[case.dtype])
    if spec.call is None:
        return f(*args, **case.kwargs)
    return spec.call(f, *args, **case.kwargs)


def _leaves(out) -> list:
    if isinstance(out, (list, tuple)):
        return [leaf for o in out for leaf in _leaves(o)]
    return [out]


# ---------------------------------------------------------------------------------------------
# JAX references, one compilation per function, cached on disk
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Ref:
    """JAX's answer for a case: `out` (a list of numpy leaves, or a non-array like a shape) with
    the leaves' weak types, or `error` (the name and message of what JAX raised)."""

    out: Any = None
    error: str | None = None
    weak: list | None = None


CACHE_DIR = Path(__file__).parent.parent / "build" / "numpy_conformance"
# Everything above the known-gaps section (specs, inputs, how references are computed) keys the
# cache, so editing KNOWN_GAPS keeps it and editing the table or this code refreshes it.
_SOURCE_KEY = hashlib.sha256(
    Path(__file__).read_text().split("\n# Known gaps\n")[0].encode()).hexdigest()[:16]
_REFS: dict[str, tuple[dict[str, Ref], Ref | None]] = {}


def grad_case(name: str) -> Case | None:
    """The one case whose gradient is compared: float32, default kwargs, preferring 2x3."""
    spec = SPECS[name]
    if not spec.grad or "float32" not in spec.dtypes or spec.arity == 0:
        return None
    mine = [c for c in cases() if c.fn == name and c.dtype == "float32"
            and c.kwargs == spec.variants[0]]
    mine.sort(key=lambda c: c.shapes[0] != S23)
    return mine[0]


def grad_names() -> list[str]:
    return [s.name for s in SPECS_LIST if grad_case(s.name) is not None]


def _sum_of_outputs(np_mod, out):
    total = 0.0
    for leaf in _leaves(out):
        if np_mod.issubdtype(leaf.dtype, np_mod.inexact):
            total = total + np_mod.sum(leaf)
    return total


def _grad_fn(grad, np_mod, spec: Spec, f, c: Case, n: int):
    loss = lambda *a: _sum_of_outputs(np_mod, _call(spec, f, c, a))
    return grad(loss, argnums=tuple(range(n)))


def _error(e: BaseException) -> str:
    """`Type: first line of the message`, shortened to fit a table cell."""
    msg = re.sub(r" \(operands? [^)]*\)", "", str(e).splitlines()[0] if str(e) else "")
    if len(msg) > 60:
        msg = msg[:60].rsplit(" ", 1)[0] + " ..."
    return f"{type(e).__name__}: {msg}"


def _ref_of(out) -> Ref:
    leaves = _leaves(out)
    if all(isinstance(x, jax.Array) for x in leaves):
        return Ref(out=[np.asarray(x) for x in leaves], weak=[x.weak_type for x in leaves])
    return Ref(out=out)


def _cache_key(name: str, mine: list[Case], inputs: list) -> str:
    spec = SPECS[name]
    h = hashlib.sha256(f"{jax.__version__} {_SOURCE_KEY} {[c.id for c in mine]}".encode())
    if spec.call is not None:
        h.update(spec.call.__code__.co_code + repr(spec.call.__code__.co_consts).encode())
    for args in inputs:
        for a in args:
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def jax_references(name: str) -> tuple[dict[str, Ref], Ref | None]:
    """({case id: Ref} for every case of `name`, Ref of the gradient case or None).

    Computed once per process under one `jax.jit` (or eagerly where `spec.jit` is False) and
    cached in build/numpy_conformance/, keyed by JAX's version, the case ids and the inputs.
    """
    if name in _REFS:
        return _REFS[name]
    spec = SPECS[name]
    mine = [c for c in cases() if c.fn == name]
    inputs = [case_inputs(c) for c in mine]
    path = CACHE_DIR / f"{name}-{_cache_key(name, mine, inputs)}.pkl"
    if path.exists():
        try:
            _REFS[name] = pickle.loads(path.read_bytes())
            return _REFS[name]
        except Exception:  # a torn cache file is recomputed
            pass
    _REFS[name] = _compute_references(spec, mine, inputs)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(_REFS[name]))
    os.replace(tmp, path)
    for stale in CACHE_DIR.glob(f"{name}-*.pkl"):
        if stale != path:
            stale.unlink(missing_ok=True)
    return _REFS[name]


def _compute_references(spec: Spec, mine: list[Case], inputs: list):
    f = getattr(jnp, spec.name)
    gc = grad_case(spec.name)
    refs: dict[str, Ref] = {}
    grad_ref = None
    if not spec.jit:
        for c, args in zip(mine, inputs):
            try:
                refs[c.id] = _ref_of(_call(spec, f, c, args))
            except Exception as e:  # any JAX error is a result to compare
                refs[c.id] = Ref(error=_error(e))
        if gc is not None:
            args = inputs[mine.index(gc)]
            try:
                grad_ref = _ref_of(list(_grad_fn(jax.grad, jnp, spec, f, gc, len(args))(*args)))
            except Exception as e:
                grad_ref = Ref(error=_error(e))
        return refs, grad_ref

    ok_ids: list[str] = []

    def batch(all_args):
        outs = []
        for c, args in zip(mine, all_args):
            try:
                out = _call(spec, f, c, args)
            except Exception as e:
                refs[c.id] = Ref(error=_error(e))
                continue
            leaves = _leaves(out)
            if not all(isinstance(x, jax.Array) for x in leaves):   # e.g. a shape tuple
                refs[c.id] = Ref(out=out)
                continue
            ok_ids.append(c.id)
            outs.append(leaves)
        if gc is not None:
            args = all_args[mine.index(gc)]
            try:
                g = _grad_fn(jax.grad, jnp, spec, f, gc, len(args))(*args)
                ok_ids.append("grad")
                outs.append(list(g))
            except Exception as e:
                nonlocal grad_ref
                grad_ref = Ref(error=_error(e))
        return outs

    results = jax.jit(batch)(inputs)
    for cid, leaves in zip(ok_ids, results):
        if cid == "grad":
            grad_ref = _ref_of(leaves)
        else:
            refs[cid] = _ref_of(leaves)
    return refs, grad_ref


# ---------------------------------------------------------------------------------------------
# Checking one case
# ---------------------------------------------------------------------------------------------

def _tol(dtype: np.dtype, spec: Spec) -> tuple[float, float]:
    rtol, atol = TOLERANCE.get(np.dtype(dtype).name, (0.0, 0.0))
    return rtol * spec.tol, atol * spec.tol


def _compare_leaves(spec: Spec, got: list, want: list, weak: list | None) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} outputs, JAX has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, (minijax.Array, np.ndarray)):   # numpy: as JAX's eager no-ops
            return f"output {i} is {type(g).__name__}, not an array"
        if tuple(g.shape) != tuple(w.shape):
            return f"shape {tuple(g.shape)} != JAX {tuple(w.shape)}"
        if np.dtype(g.dtype) != w.dtype:
            return f"dtype {np.dtype(g.dtype).name} != JAX {w.dtype.name}"
        g_weak = bool(getattr(g, "weak_type", False))
        if weak is not None and g_weak != bool(weak[i]):
            return f"weak_type {g_weak} != JAX {weak[i]}"
        gv = np.asarray(g)
        if w.dtype.kind in "biu":
            if not np.array_equal(gv, w):
                return "value differs"
        else:
            rtol, atol = _tol(w.dtype, spec)
            a, b = gv.astype(np.float64), w.astype(np.float64)
            if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                err = np.nanmax(np.abs(a - b)) if a.size else 0.0
                return f"value differs (max abs err {err:.3g})"
    return None


def _same_python(got, want) -> bool:
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and tuple(got) == tuple(want)
    return type(got) is type(want) and got == want


def check_case(case: Case) -> str | None:
    """None if minijax agrees with JAX on `case`, else a one-line reason."""
    spec = case.spec
    f = getattr(mnp, case.fn, None)
    if f is None:
        return "not implemented"
    ref = jax_references(case.fn)[0][case.id]
    args = case_inputs(case)
    try:
        out = _call(spec, f, case, args)
    except Exception as e:
        if ref.error is not None:
            return None
        return f"minijax raises {_error(e)}"
    if ref.error is not None:
        return f"JAX raises {ref.error.split(':')[0]}, minijax does not"
    want = ref.out
    if not isinstance(want, list):        # a non-array result (e.g. `jnp.shape(x)`)
        return None if _same_python(out, want) else f"{out!r} != JAX {want!r}"
    return _compare_leaves(spec, _leaves(out), want, ref.weak)


def check_grad(name: str) -> str | None:
    """None if minijax.grad of sum(f) agrees with jax.grad on `grad_case(name)`."""
    c = grad_case(name)
    spec, f = SPECS[name], getattr(mnp, name, None)
    if f is None:
        return "not implemented"
    ref = jax_references(name)[1]
    args = case_inputs(c)
    try:
        got = _grad_fn(minijax.grad, mnp, spec, f, c, len(args))(*args)
    except Exception as e:
        if ref.error is not None:
            return None
        return f"minijax grad raises {_error(e)}"
    if ref.error is not None:
        return f"JAX grad raises {ref.error.split(':')[0]}, minijax does not"
    return _compare_leaves(dataclasses.replace(spec, tol=max(spec.tol, 10)), list(got),
                           ref.out, None)


# ---------------------------------------------------------------------------------------------
# Known gaps
# ---------------------------------------------------------------------------------------------

# (function, selector) -> reason. selector: '*' (every case of the function), a dtype name, a
# case id without its leading function name (e.g. 'float32-2x3-axis=0'), or 'grad' (the gradient
# case). Regenerate candidates with `python tests/numpy_conformance.py`.
KNOWN_GAPS: dict[tuple[str, str], str] = {
}


def gap_for(case_or_grad: Case | str) -> str | None:
    """The KNOWN_GAPS reason covering a case (or, given a function name, its gradient case)."""
    if isinstance(case_or_grad, str):
        return KNOWN_GAPS.get((case_or_grad, "grad")) or KNOWN_GAPS.get((case_or_grad, "*"))
    c = case_or_grad
    rest = c.id[len(c.fn) + 1:]
    for sel in ("*", c.dtype, rest):
        if (c.fn, sel) in KNOWN_GAPS:
            return KNOWN_GAPS[(c.fn, sel)]
    return None


def run_all() -> dict[str, str | None]:
    """{case id or 'fn-grad': failure reason or None} over every case and gradient case."""
    results = {}
    for c in cases():
        results[c.id] = check_case(c)
    for name in grad_names():
        results[f"{name}-grad"] = check_grad(name)
    return results


def propose_gaps(results: dict[str, str | None]) -> dict[tuple[str, str], str]:
    """The smallest KNOWN_GAPS that covers exactly the failing cases of `results`."""
    by_fn: dict[str, list[Case]] = {}
    for c in cases():
        by_fn.setdefault(c.fn, []).append(c)
    gaps = {}
    for fn, cs in by_fn.items():
        fails = {c.id: results[c.id] for c in cs if results[c.id]}
        g = results.get(f"{fn}-grad")
        if fails and len(fails) == len(cs) and (g or f"{fn}-grad" not in results):
            gaps[(fn, "*")] = _common_reason(list(fails.values()) + ([g] if g else []))
            continue
        if g:
            gaps[(fn, "grad")] = g
        for dt in SPECS[fn].dtypes:
            dcs = [c for c in cs if c.dtype == dt]
            dfails = [fails[c.id] for c in dcs if c.id in fails]
            if dfails and len(dfails) == len(dcs):
                gaps[(fn, dt)] = _common_reason(dfails)
            else:
                for c in dcs:
                    if c.id in fails:
                        gaps[(fn, c.id[len(fn) + 1:])] = fails[c.id]
    return gaps


def _common_reason(reasons: list[str]) -> str:
    uniq = sorted(set(reasons), key=reasons.index)
    return uniq[0] if len(uniq) == 1 else f"{uniq[0]} (+{len(uniq) - 1} similar)"


def gaps_markdown() -> str:
    """docs/numpy_conformance.md: what the table covers and every known gap with its reason."""
    n_cases = len(cases())
    lines = [
        "# minijax.numpy conformance with jax.numpy",
        "",
        "Generated from `tests/numpy_conformance.py` (`python tests/numpy_conformance.py "
        "--write-docs`);",
        "checked by `tests/lax_numpy_conformance_test.py` and reported by the `numpy` topic of",
        "`python -m compare`.",
        "",
        f"The spec table covers {len(SPECS)} `jnp` functions in {n_cases} (function, dtype, "
        f"shape, kwargs) cases, plus {len(grad_names())} gradient cases. Each case runs "
        "`jax.numpy.<fn>` and `minijax.numpy.<fn>` on the same inputs and compares value, "
        "dtype, shape and weak type (or that both raise).",
        "",
        f"## Known gaps ({len(KNOWN_GAPS)})",
        "",
        "Selector `*` is every case of the function; otherwise a dtype, `grad`, or one case id.",
        "",
        "| function | selector | reason |",
        "|---|---|---|",
    ]
    for (fn, sel), reason in sorted(KNOWN_GAPS.items()):
        lines.append(f"| `{fn}` | `{sel}` | {reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write_docs() -> Path:
    DOCS_PATH.parent.mkdir(parents=True, exist_ok=True)
    DOCS_PATH.write_text(gaps_markdown())
    return DOCS_PATH


if __name__ == "__main__":
    import sys
    import time

    t0 = time.perf_counter()
    res = run_all()
    bad = {k: v for k, v in res.items() if v}
    print(f"# {len(res)} checks, {len(bad)} failing, {time.perf_counter() - t0:.1f}s",
          file=sys.stderr)
    print("KNOWN_GAPS: dict[tuple[str, str], str] = {")
    for key, reason in propose_gaps(res).items():
        line = f"    {key!r}: {reason!r},"
        print(line if len(line) <= 100 else f"    {key!r}:\n        {reason[:86]!r},")
    print("}")
    if "--write-docs" in sys.argv:
        write_docs()
