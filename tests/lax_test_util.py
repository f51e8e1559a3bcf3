"""The table of lax operations that lax_test, lax_autodiff_test and lax_vmap_test share.

Each `Case` is one program written against a module alias (`fun(J, *args)` run with `J=jax` and
`J=minijax`), the shapes/dtypes/domains of its array arguments, and which primitive it exercises.
Mirrors jax/_src/internal_test_util/lax_test_util.py (JAX's shared op records). Not a test file.
"""

from __future__ import annotations

import numpy as np

from minijax import ad_util, dtypes

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
I32, I8, BOOL = np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.bool_)


def rand(rng: np.random.RandomState, shape, dtype, domain: str = "any") -> np.ndarray:
    """A random numpy array. Domains: any, pos (0.5..2), gt-1 (-0.5..2), nonzero (|x| >= 0.5),
    small (|x| < 0.4), gt1 (1.2..3), idx3 (ints 0..2), big (ints -100..99)."""
    shape, dtype = tuple(shape), np.dtype(dtype)
    if dtype == BOOL:
        return np.asarray(rng.rand(*shape) < 0.5)
    if dtype.kind in "iu":
        lo, hi = {"pos": (1, 6), "idx3": (0, 3), "big": (-100, 100)}.get(domain, (-5, 6))
        x = rng.randint(lo, hi, size=shape)
        if domain == "nonzero":
            x = np.where(x == 0, 3, x)
        return np.asarray(x, dtype)
    if domain == "pos":
        x = rng.uniform(0.5, 2.0, shape)
    elif domain == "small":
        x = rng.uniform(-0.4, 0.4, shape)
    elif domain == "gt1":
        x = rng.uniform(1.2, 3.0, shape)
    elif domain == "gt-1":
        x = rng.uniform(-0.5, 2.0, shape)
    elif domain == "nonzero":
        x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        x = rng.randn(*shape)
    return np.asarray(x, dtype)


class Case:
    """One lax program. `specs`: per argument (shape, dtype, domain). `diff`: the argnums to
    differentiate (default: the float ones; empty for non-differentiable primitives)."""

    def __init__(self, name: str, prim: str, fun, specs, diff=None, linear: bool = False,
                 tol: float | None = None, make_args=None):
        self.name, self.prim, self.fun, self.specs = name, prim, fun, list(specs)
        self.diff = tuple(i for i, s in enumerate(self.specs) if np.dtype(s[1]).kind == "f"
                          ) if diff is None else tuple(diff)
        self.linear, self.tol, self._make_args = linear, tol, make_args

    def args(self, rng: np.random.RandomState) -> list[np.ndarray]:
        if self._make_args is not None:
            return self._make_args(rng)
        return [rand(rng, s, d, dom) for s, d, dom in self.specs]

    def __call__(self, J, *args):
        return self.fun(J, *args)

    def __repr__(self) -> str:
        return self.name


def lax_fn(name: str, **params):
    """`fun(J, *args)` calling `J.lax.<name>(*args, **params)`."""
    def fun(J, *args):
        return getattr(J.lax, name)(*args, **params)
    fun.__name__ = name
    return fun


def add_any(J, x, y):
    # minijax exposes JAX's add_jaxvals_p as ad_util.add_jaxvals_p; JAX's reference is lax.add.
    if J.__name__ == "jax":
        return J.lax.add(x, y)
    return ad_util.add_jaxvals_p.bind(x, y)


S = (2, 3)

# (lax name, primitive name, float domain, differentiable)
UNARY_FLOAT = [
    ("sin", "sin", "any", True), ("cos", "cos", "any", True), ("exp", "exp", "any", True),
    ("log", "log", "pos", True), ("log1p", "log1p", "gt-1", True),
    ("tanh", "tanh", "any", True), ("logistic", "logistic", "any", True),
    ("sqrt", "sqrt", "pos", True), ("rsqrt", "rsqrt", "pos", True),
    ("floor", "floor", "any", True), ("neg", "neg", "any", True), ("abs", "abs", "any", True),
    ("sign", "sign", "any", True), ("stop_gradient", "stop_gradient", "any", False),
    ("square", "square", "any", True), ("tan", "tan", "small", True),
    ("sinh", "sinh", "any", True), ("cosh", "cosh", "any", True), ("asin", "asin", "small", True),
    ("acos", "acos", "small", True), ("atan", "atan", "any", True),
    ("asinh", "asinh", "any", True), ("acosh", "acosh", "gt1", True),
    ("atanh", "atanh", "small", True), ("cbrt", "cbrt", "nonzero", True),
    ("ceil", "ceil", "any", True),
]
UNARY_INT = [("neg", "neg"), ("abs", "abs"), ("sign", "sign"), ("bitwise_not", "not"),
             ("square", "square")]

# (lax name, primitive name, lhs domain, rhs domain, differentiable)
BINARY_FLOAT = [
    ("add", "add", "any", "any", True), ("sub", "sub", "any", "any", True),
    ("mul", "mul", "any", "any", True), ("div", "div", "any", "nonzero", True),
    ("rem", "rem", "any", "nonzero", True), ("pow", "pow", "pos", "any", True),
    ("max", "max", "any", "any", True), ("min", "min", "any", "any", True),
]
BINARY_INT = ["add", "sub", "mul", "div", "rem", "max", "min"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
BITWISE = [("bitwise_and", "and"), ("bitwise_or", "or")]

# lax's implicit broadcasting: equal shapes, a rank-0 operand, or size-1 dimensions
BROADCAST_SHAPES = [(S, S), ((), S), (S, ()), ((1, 3), (2, 1)), (S, (1, 3))]


def _rem_args(rng):
    # keep x / y away from integers, where rem's derivative in y jumps
    y = rand(rng, S, F32, "nonzero")
    q = rng.uniform(0.2, 0.8, S) + rng.randint(-2, 3, S)
    return [np.asarray(q * y, F32), y]


def _unary_cases() -> list[Case]:
    cases = []
    for name, prim, dom, d in UNARY_FLOAT:
        for shape in [S, ()]:
            cases.append(Case(f"{name}_f32{list(shape)}", prim, lax_fn(name),
                              [(shape, F32, dom)], diff=None if d else (),
                              linear=name == "neg"))
    for name, prim in UNARY_INT:
        cases.append(Case(f"{name}_i32", prim, lax_fn(name), [(S, I32, "any")]))
    cases.append(Case("bitwise_not_bool", "not", lax_fn("bitwise_not"), [(S, BOOL, "any")]))
    for y in [-2, 0, 1, 2, 3]:
        cases.append(Case(f"integer_pow_f32_{y}", "integer_pow", lax_fn("integer_pow", y=y),
                          [(S, F32, "nonzero" if y < 0 else "any")]))
    for y in [0, 3]:
        cases.append(Case(f"integer_pow_i32_{y}", "integer_pow", lax_fn("integer_pow", y=y),
                          [(S, I32, "any")]))
    return cases


def _binary_cases() -> list[Case]:
    cases = []
    for name, prim, dx, dy, d in BINARY_FLOAT:
        for sx, sy in BROADCAST_SHAPES:
            # rem: |x / y| < 1 when broadcasting, away from the jumps of rem in y
            dxx = "small" if name == "rem" and sx != sy else dx
            cases.append(Case(f"{name}_f32{list(sx)}{list(sy)}", prim, lax_fn(name),
                              [(sx, F32, dxx), (sy, F32, dy)], diff=None if d else (),
                              linear=name in ("add", "sub"),
                              make_args=_rem_args if (name == "rem" and sx == sy) else None))
    for name in BINARY_INT:
        cases.append(Case(f"{name}_i32", name, lax_fn(name),
                          [(S, I32, "any"), (S, I32, "nonzero" if name in ("div", "rem")
                                                else "any")]))
    for name in COMPARE:
        cases.append(Case(f"{name}_f32", name, lax_fn(name), [(S, F32, "any"), ((), F32, "any")]))
        cases.append(Case(f"{name}_i32", name, lax_fn(name), [((1, 3), I32, "any"),
                                                             (S, I32, "any")]))
    for name in ["eq", "ne", "lt", "max", "min"]:
        cases.append(Case(f"{name}_bool", name, lax_fn(name), [(S, BOOL, "any"), (S, BOOL, "")]))
    for name, prim in BITWISE:
        cases.append(Case(f"{name}_i32", prim, lax_fn(name), [(S, I32, "any"), (S, I32, "")]))
        cases.append(Case(f"{name}_bool", prim, lax_fn(name), [(S, BOOL, "any"), ((), BOOL, "")]))
    cases.append(Case("add_any", "add_any", add_any, [(S, F32, "any"), (S, F32, "any")],
                      linear=True))
    return cases


def _select_n(J, which, *cases):
    return J.lax.select_n(which, *cases)


def _structural_cases() -> list[Case]:
    c = []
    c.append(Case("select_n_bool", "select_n", _select_n,
                  [(S, BOOL, ""), (S, F32, "any"), (S, F32, "any")], linear=True))
    c.append(Case("select_n_bool_scalar", "select_n", _select_n,
                  [((), BOOL, ""), (S, F32, "any"), (S, F32, "any")], linear=True))
    c.append(Case("select_n_int_scalar", "select_n", _select_n,
                  [((), I32, "idx3"), (S, F32, "any"), (S, F32, "any"), (S, F32, "any")],
                  linear=True))
    c.append(Case("select_n_int3", "select_n", _select_n,
                  [(S, I32, "idx3"), (S, F32, "any"), (S, F32, "any"), (S, F32, "any")],
                  linear=True))
    conv = lambda dt: (lambda J, x: J.lax.convert_element_type(x, dt))
    c.append(Case("convert_f32_i32", "convert_element_type", conv(np.int32),
                  [(S, F32, "nonzero")], diff=()))
    c.append(Case("convert_i32_f32", "convert_element_type", conv(np.float32), [(S, I32, "")]))
    c.append(Case("convert_f32_bool", "convert_element_type", conv(np.bool_),
                  [(S, F32, "any")], diff=()))
    c.append(Case("convert_bool_f32", "convert_element_type", conv(np.float32), [(S, BOOL, "")]))
    c.append(Case("convert_i32_bool", "convert_element_type", conv(np.bool_), [(S, I32, "idx3")]))
    c.append(Case("convert_f16_f32", "convert_element_type", conv(np.float32),
                  [(S, F16, "any")], linear=True))
    c.append(Case("convert_f32_f16", "convert_element_type", conv(np.float16),
                  [(S, F32, "any")], linear=True, tol=1e-3))
    c.append(Case("convert_f32_bf16", "convert_element_type", conv(dtypes.bfloat16),
                  [(S, F32, "any")], linear=True, tol=1e-2))
    bid = lambda shape, dims: (lambda J, x: J.lax.broadcast_in_dim(x, shape, dims))
    c.append(Case("broadcast_in_dim_row", "broadcast_in_dim", bid((2, 3), (1,)),
                  [((3,), F32, "any")], linear=True))
    c.append(Case("broadcast_in_dim_size1", "broadcast_in_dim", bid((2, 4, 3), (0, 2)),
                  [((1, 3), F32, "any")], linear=True))
    c.append(Case("broadcast_in_dim_scalar", "broadcast_in_dim", bid((2, 3), ()),
                  [((), F32, "any")], linear=True))
    c.append(Case("reshape", "reshape", lambda J, x: J.lax.reshape(x, (3, 2)),
                  [(S, F32, "any")], linear=True))
    c.append(Case("reshape_flat", "reshape", lambda J, x: J.lax.reshape(x, (6, 1)),
                  [((3, 2), F32, "any")], linear=True))
    c.append(Case("reshape_dimensions", "reshape",
                  lambda J, x: J.lax.reshape(x, (6,), dimensions=(1, 0)),
                  [((3, 2), F32, "any")], linear=True))
    c.append(Case("transpose", "transpose", lambda J, x: J.lax.transpose(x, (2, 0, 1)),
                  [((2, 3, 4), F32, "any")], linear=True))
    c.append(Case("squeeze", "squeeze", lambda J, x: J.lax.squeeze(x, (1, -1)),
                  [((2, 1, 3, 1), F32, "any")], linear=True))
    c.append(Case("squeeze_all", "squeeze", lambda J, x: J.lax.squeeze(x, (0,)),
                  [((1,), F32, "any")], linear=True))
    for axes in [(1,), (0, 2), (), (0, 1, 2)]:
        c.append(Case(f"reduce_sum{list(axes)}", "reduce_sum",
                      lambda J, x, axes=axes: J.lax.reduce_sum(x, axes),
                      [((2, 3, 4), F32, "any")], linear=True))
    for name in ["reduce_max", "reduce_min"]:
        for axes in [(1,), (0, 2)]:
            c.append(Case(f"{name}{list(axes)}", name,
                          lambda J, x, n=name, axes=axes: getattr(J.lax, n)(x, axes),
                          [((2, 3, 4), F32, "any")]))
        c.append(Case(f"{name}_i32", name, lambda J, x, n=name: getattr(J.lax, n)(x, (0,)),
                      [((4, 3), I32, "any")]))
    for name in ["reduce_max", "reduce_min"]:
        c.append(Case(f"{name}_bool", name, lambda J, x, n=name: getattr(J.lax, n)(x, (1,)),
                      [((4, 3), BOOL, "")]))
    c.append(Case("reduce_sum_i32", "reduce_sum", lambda J, x: J.lax.reduce_sum(x, (1,)),
                  [((4, 3), I32, "any")]))
    for name in ["argmax", "argmin"]:
        for axis in [0, 1]:
            c.append(Case(f"{name}_axis{axis}", name,
                          lambda J, x, n=name, a=axis: getattr(J.lax, n)(x, a, np.int32),
                          [((3, 4), F32, "any")]))
        c.append(Case(f"{name}_i32", name,
                      lambda J, x, n=name: getattr(J.lax, n)(x, 1, np.int32),
                      [((3, 4), I32, "idx3")]))
    dg = lambda dn, **kw: (lambda J, x, y: J.lax.dot_general(x, y, dn, **kw))
    c.append(Case("dot_general_matmul", "dot_general", dg((((1,), (0,)), ((), ()))),
                  [((2, 3), F32, "any"), ((3, 4), F32, "any")]))
    c.append(Case("dot_general_vdot", "dot_general", dg((((0,), (0,)), ((), ()))),
                  [((3,), F32, "any"), ((3,), F32, "any")]))
    c.append(Case("dot_general_outer", "dot_general", dg((((), ()), ((), ()))),
                  [((2,), F32, "any"), ((3,), F32, "any")]))
    c.append(Case("dot_general_batch", "dot_general", dg((((2,), (1,)), ((0,), (0,)))),
                  [((2, 3, 4), F32, "any"), ((2, 4, 5), F32, "any")]))
    c.append(Case("dot_general_batch_mid", "dot_general", dg((((2,), (0,)), ((1,), (1,)))),
                  [((3, 2, 4), F32, "any"), ((4, 2, 5), F32, "any")]))
    c.append(Case("dot_general_two_contract", "dot_general",
                  dg((((0, 2), (1, 0)), ((), ()))),
                  [((3, 2, 4), F32, "any"), ((4, 3, 5), F32, "any")]))
    c.append(Case("dot_general_i32", "dot_general", dg((((1,), (0,)), ((), ()))),
                  [((2, 3), I32, "any"), ((3, 4), I32, "any")]))
    c.append(Case("dot_general_i8_to_i32", "dot_general",
                  dg((((1,), (0,)), ((), ())), preferred_element_type=np.int32),
                  [((4, 8), I8, "big"), ((8, 3), I8, "big")]))
    c.append(Case("iota", "iota", lambda J: J.lax.iota(np.int32, 5), []))
    c.append(Case("broadcasted_iota", "iota",
                  lambda J: J.lax.broadcasted_iota(np.float32, (2, 3), 1), []))
    sl = lambda *a: (lambda J, x: J.lax.slice(x, *a))
    c.append(Case("slice", "slice", sl((1, 0), (4, 6)), [((5, 6), F32, "any")], linear=True))
    c.append(Case("slice_strided", "slice", sl((1, 0), (5, 6), (2, 4)),
                  [((5, 6), F32, "any")], linear=True))
    c.append(Case("slice_strided_1d", "slice", sl((0,), (5,), (2,)),
                  [((5,), F32, "any")], linear=True))
    c.append(Case("slice_empty", "slice", sl((2, 1), (2, 3)), [((5, 6), F32, "any")],
                  linear=True))
    cat = lambda dim: (lambda J, *xs: J.lax.concatenate(xs, dim))
    c.append(Case("concatenate_0", "concatenate", cat(0),
                  [((2, 3), F32, "any"), ((4, 3), F32, "any")], linear=True))
    c.append(Case("concatenate_1", "concatenate", cat(1),
                  [((2, 1), F32, "any"), (S, F32, "any"), ((2, 2), F32, "any")], linear=True))
    pad = lambda cfg: (lambda J, x, pv: J.lax.pad(x, pv, cfg))
    c.append(Case("pad", "pad", pad(((1, 2, 0), (0, 0, 1))),
                  [((3, 4), F32, "any"), ((), F32, "any")], linear=True))
    c.append(Case("pad_negative", "pad", pad(((-1, 1, 0), (2, -2, 1))),
                  [((3, 4), F32, "any"), ((), F32, "any")], linear=True))
    c.append(Case("pad_interior_crop", "pad", pad(((0, 0, 2), (-1, -1, 0))),
                  [((3, 4), F32, "any"), ((), F32, "any")], linear=True))
    for dims in [(0,), (0, 1), ()]:
        c.append(Case(f"rev{list(dims)}", "rev", lambda J, x, d=dims: J.lax.rev(x, d),
                      [((3, 4), F32, "any")], linear=True))
    return c


UNARY_CASES = _unary_cases()
BINARY_CASES = _binary_cases()
STRUCTURAL_CASES = _structural_cases()
ALL_CASES = UNARY_CASES + BINARY_CASES + STRUCTURAL_CASES

# Primitives that are linear in (some of) their operands and carry a transpose rule.
LINEAR_PRIMS = {"neg", "add", "sub", "add_any", "mul", "div", "select_n",
                "convert_element_type", "broadcast_in_dim", "reshape", "transpose", "squeeze",
                "reduce_sum", "dot_general", "slice", "concatenate", "pad", "rev", "cumsum",
                "ragged_dot_general", "stack", "unstack",
                "reduce_precision", "real", "imag", "complex", "conj", "fft",
                "jit", "sharding_constraint", "reshard", "device_put",
                # indexing, convolution and pooling (linear in the operand or bilinear)
                "gather", "scatter", "scatter-add", "scatter-mul", "scatter-sub", "dynamic_slice",
                "tile", "split", "optimization_barrier", "copy", "stage", "dce_sink",
                "dynamic_update_slice", "conv_general_dilated", "reduce_window_sum",
                "select_and_gather_add", "select_and_scatter_add",
                "triangular_solve",  # linear in b (minijax/lax/linalg.py)
                # primitives holding jaxprs: their transpose transposes the inner jaxpr
                # (while's rule raises JAX's reverse-mode error, as JAX's does)
                "cond", "scan", "while", "remat2", "custom_jvp_call", "custom_lin",
                # collectives (minijax/lax/parallel.py) and shard_map
                "psum_invariant", "pvary", "all_gather", "all_gather_invariant",
                "reduce_scatter", "ppermute",
                "all_to_all", "shard_map",
                # no outputs: their transpose returns no cotangents (minijax/debugging.py)
                "debug_callback", "debug_print"}


def is_differentiable(case: Case) -> bool:
    return bool(case.diff) and case.prim not in ("iota",)


def assert_close(got, want, name: str = "", tol: float | None = None) -> None:
    """Same shape and dtype; floats to a relative tolerance, everything else exactly."""
    got_np, want_np = np.asarray(got), np.asarray(want)
    assert got_np.shape == want_np.shape, f"{name}: shape {got_np.shape} != {want_np.shape}"
    assert got_np.dtype == want_np.dtype, f"{name}: dtype {got_np.dtype} != {want_np.dtype}"
    if got_np.dtype.kind in "fc" or got_np.dtype == dtypes.bfloat16:
        tol = tol or (1e-2 if got_np.dtype.itemsize <= 2 else 2e-5)
        np.testing.assert_allclose(got_np.astype(np.float64), want_np.astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got_np, want_np, err_msg=name)


# ---------------------------------------------------------------------------------------------
# Issue 5: expm1, atan2, is_finite, clamp, lgamma, digamma, reduce_precision, top_k and the
# cumulative reductions
# ---------------------------------------------------------------------------------------------

def _clamp_args(rng):
    # min < x < max, x < min and x > max all occur, each at least 0.2 from the kinks
    lo = np.asarray(rng.uniform(-1.0, -0.6, S), F32)
    hi = np.asarray(rng.uniform(0.6, 1.0, S), F32)
    x = rng.choice([-1.5, 0.0, 1.5], S) + rng.uniform(-0.3, 0.3, S)
    return [lo, np.asarray(x, F32), hi]


def _issue5_cases() -> list[Case]:
    c = []
    for name, dom in [("expm1", "any"), ("erfc", "any"), ("lgamma", "pos"), ("digamma", "pos")]:
        for shape in [S, ()]:
            c.append(Case(f"{name}_f32{list(shape)}", name, lax_fn(name), [(shape, F32, dom)]))
    c.append(Case("digamma_f32_negative", "digamma", lax_fn("digamma"),
                  [(S, F32, "nonzero")], make_args=lambda rng: [np.asarray(
                      rng.uniform(-2.8, -2.2, S), F32)]))
    c.append(Case("is_finite_f32", "is_finite", lax_fn("is_finite"), [(S, F32, "any")],
                  make_args=lambda rng: [np.asarray(rng.choice(
                      [0.5, -2.0, np.inf, -np.inf, np.nan], S), F32)]))
    for sx, sy in BROADCAST_SHAPES:
        c.append(Case(f"atan2_f32{list(sx)}{list(sy)}", "atan2", lax_fn("atan2"),
                      [(sx, F32, "nonzero"), (sy, F32, "nonzero")]))
    c.append(Case("clamp_scalar_bounds", "clamp",
                  lambda J, x: J.lax.clamp(np.float32(-0.5), x, np.float32(0.7)),
                  [(S, F32, "any")]))
    c.append(Case("clamp_f32", "clamp", lambda J, lo, x, hi: J.lax.clamp(lo, x, hi),
                  [(S, F32, "any"), (S, F32, "any"), (S, F32, "any")], make_args=_clamp_args))
    # not differentiated in the scalar min: JAX's jvp rule fails there (select of a scalar g)
    c.append(Case("clamp_scalar_min", "clamp", lambda J, lo, x, hi: J.lax.clamp(lo, x, hi),
                  [((), F32, "small"), (S, F32, "any"), (S, F32, "pos")], diff=(1, 2)))
    c.append(Case("clamp_i32", "clamp", lambda J, lo, x, hi: J.lax.clamp(lo, x, hi),
                  [((), I32, "idx3"), (S, I32, "any"), ((), I32, "pos")]))
    rp = lambda e, m: (lambda J, x: J.lax.reduce_precision(x, e, m))
    c.append(Case("reduce_precision_f16_format", "reduce_precision", rp(5, 10),
                  [(S, F32, "any")], diff=()))
    c.append(Case("reduce_precision_bf16_format", "reduce_precision", rp(8, 7),
                  [(S, F32, "any")], diff=()))
    # few bits lost: the rounding is far below finite-difference steps, so it checks as linear
    c.append(Case("reduce_precision_8_20", "reduce_precision", rp(8, 20), [(S, F32, "any")],
                  linear=True, tol=1e-4))
    c.append(Case("top_k_values", "top_k", lambda J, x: J.lax.top_k(x, 2)[0],
                  [((3, 5), F32, "any")]))
    c.append(Case("top_k_indices", "top_k", lambda J, x: J.lax.top_k(x, 3)[1],
                  [((3, 5), F32, "any")]))
    c.append(Case("top_k_axis0", "top_k", lambda J, x: J.lax.top_k(x, 2, axis=0)[0],
                  [((4, 3), F32, "any")]))
    c.append(Case("top_k_i32", "top_k", lambda J, x: J.lax.top_k(x, 2)[1],
                  [((6,), I32, "big")], make_args=lambda rng: [np.asarray(
                      rng.permutation(6) - 3, I32)]))
    for name in ["cumprod", "cummax", "cummin", "cumlogsumexp"]:
        for axis, reverse in [(1, False), (0, True)]:
            c.append(Case(f"{name}_axis{axis}{'_reverse' if reverse else ''}", name,
                          lambda J, x, n=name, a=axis, r=reverse: getattr(J.lax, n)(x, a, r),
                          [((3, 4), F32, "any")]))
    for name in ["cumprod", "cummax", "cummin"]:
        c.append(Case(f"{name}_i32", name, lambda J, x, n=name: getattr(J.lax, n)(x, 0),
                      [((4, 3), I32, "any")]))
    return c


ISSUE5_CASES = _issue5_cases()
ALL_CASES += ISSUE5_CASES


# ---------------------------------------------------------------------------------------------
# Issue 35: the rest of jax.lax's public names (bit counters, reductions, tile/split, ...)
# ---------------------------------------------------------------------------------------------

def _ints_with_negatives(rng):
    return [np.asarray(rng.choice([0, 1, -1, 7, 255, -2**31, 2**30 + 5], S), I32)]


def _scatter_args(rng):
    return [rand(rng, (5, 3), F32), np.array([[0], [3], [1]], I32), rand(rng, (3, 3), F32)]


_SCATTER_DN = lambda J: J.lax.ScatterDimensionNumbers((1,), (0,), (0,))


def _issue35_cases() -> list[Case]:
    c = [Case("exp2_f32", "exp2", lax_fn("exp2"), [(S, F32, "small")])]
    c.append(Case("round_away_from_zero", "round", lambda J, x: J.lax.round(x * 4), [
        (S, F32, "any")], diff=(), make_args=lambda rng: [np.asarray(
            rng.choice([-2.5, -0.5, 0.5, 1.5, 0.3, -1.2], S) / 4, F32)]))
    c.append(Case("round_to_nearest_even", "round", lambda J, x: J.lax.round(
        x * 4, J.lax.RoundingMethod.TO_NEAREST_EVEN), [(S, F32, "any")], diff=(),
        make_args=lambda rng: [np.asarray(rng.choice([-2.5, -0.5, 0.5, 1.5, 2.5], S) / 4,
                                          F32)]))
    for name in ["clz", "population_count"]:
        c.append(Case(f"{name}_i32", name, lax_fn(name), [(S, I32, "any")],
                      make_args=_ints_with_negatives))
    c.append(Case("clz_u8", "clz", lax_fn("clz"), [(S, np.uint8, "any")]))
    c.append(Case("mulhi_i32", "mulhi", lambda J, x, y: J.lax.mulhi(x * 40000, y * 90000),
                  [(S, I32, "big"), (S, I32, "big")]))
    c.append(Case("mulhi_u16", "mulhi", lax_fn("mulhi"), [(S, np.uint16, "any"),
                                                           (S, np.uint16, "any")]))
    for axes in [(1,), (0, 1)]:
        c.append(Case(f"reduce_prod_axes{list(axes)}", "reduce_prod",
                      lambda J, x, a=axes: J.lax.reduce_prod(x, a), [((3, 4), F32, "pos")]))
    c.append(Case("reduce_prod_i32", "reduce_prod", lambda J, x: J.lax.reduce_prod(x, (0,)),
                  [((3, 4), I32, "idx3")]))
    for name in ["reduce_and", "reduce_or", "reduce_xor"]:
        c.append(Case(f"{name}_bool", name, lambda J, x, n=name: getattr(J.lax, n)(x, (1,)),
                      [((3, 4), BOOL, "any")]))
        c.append(Case(f"{name}_i32", name, lambda J, x, n=name: getattr(J.lax, n)(x, (0,)),
                      [((3, 4), I32, "big")]))
    c.append(Case("reduce_monoid_is_reduce_max", "reduce_max", lambda J, x: J.lax.reduce(
        x, -np.inf, J.lax.max, (0,)), [((3, 4), F32, "any")]))
    c.append(Case("reduce_computation", "reduce", lambda J, x: J.lax.reduce(
        x, np.float32(0), lambda a, b: J.lax.max(J.lax.abs(a), J.lax.abs(b)), (1,)),
        [((3, 4), F32, "any")], diff=()))
    c.append(Case("reduce_variadic_argmax", "reduce", lambda J, x: J.lax.reduce(
        (x, J.lax.broadcasted_iota(np.int32, (3, 4), 1)), (np.float32(-np.inf), np.int32(0)),
        lambda a, b: (J.lax.max(a[0], b[0]), J.lax.select(a[0] >= b[0], a[1], b[1])),
        (1,))[1], [((3, 4), F32, "any")], diff=()))
    c.append(Case("tile", "tile", lambda J, x: J.lax.tile(x, (2, 3)), [((2, 3), F32, "any")],
                  linear=True))
    c.append(Case("split_middle", "split", lambda J, x: J.lax.split(x, (1, 3, 1), 1)[1],
                  [((2, 5), F32, "any")], linear=True))
    c.append(Case("optimization_barrier", "optimization_barrier", lambda J, x, y: J.lax.mul(
        *J.lax.optimization_barrier((x, y))), [(S, F32, "any"), (S, F32, "any")]))
    c.append(Case("slice_in_dim", "slice", lambda J, x: J.lax.slice_in_dim(x, 1, None, 2, 1),
                  [((3, 5), F32, "any")], linear=True))
    c.append(Case("index_in_dim", "slice", lambda J, x: J.lax.index_in_dim(x, -1, 0, False),
                  [((3, 5), F32, "any")], linear=True))
    c.append(Case("collapse", "reshape", lambda J, x: J.lax.collapse(x, 1), [((2, 3, 4), F32,
                                                                              "any")]))
    c.append(Case("broadcast_like", "broadcast_in_dim", lambda J, x, y: J.lax.broadcast_like(
        x, y), [((4,), F32, "any"), ((3, 4), F32, "any")], diff=(0,)))
    c.append(Case("broadcast_to_rank", "broadcast_in_dim", lambda J, x: J.lax.broadcast_to_rank(
        x, 3), [((4,), F32, "any")]))
    c.append(Case("batch_matmul", "dot_general", lambda J, x, y: J.lax.batch_matmul(x, y),
                  [((2, 3, 4), F32, "any"), ((2, 4, 5), F32, "any")]))
    c.append(Case("index_take", "gather", lambda J, x, i, j: J.lax.index_take(x, (i, j), (0, 2)),
                  [((3, 4, 5), F32, "any"), ((2,), I32, "idx3"), ((2,), I32, "idx3")],
                  diff=(0,)))
    c.append(Case("scatter_sub", "scatter-sub", lambda J, x, i, u: J.lax.scatter_sub(
        x, i, u, _SCATTER_DN(J)), [((5, 3), F32, "any"), ((3, 1), I32, "any"),
                                   ((3, 3), F32, "any")], make_args=_scatter_args, diff=(0, 2)))
    c.append(Case("scatter_apply", "scatter", lambda J, x, i: J.lax.scatter_apply(
        x, i, J.lax.sin, _SCATTER_DN(J), update_shape=(3, 3)),
        [((5, 3), F32, "any"), ((3, 1), I32, "any")],
        make_args=lambda rng: _scatter_args(rng)[:2], diff=()))
    c.append(Case("approx_max_k", "approx_top_k", lambda J, x: J.lax.approx_max_k(x, 2)[0],
                  [((3, 6), F32, "any")]))
    c.append(Case("approx_min_k_indices", "approx_top_k", lambda J, x: J.lax.approx_min_k(
        x, 3, reduction_dimension=0)[1], [((5, 2), F32, "any")]))
    c.append(Case("associative_scan_add", "pad", lambda J, x: J.lax.associative_scan(
        J.lax.add, x, axis=1), [((2, 7), F32, "any")]))
    c.append(Case("associative_scan_mul_reverse", "pad", lambda J, x: J.lax.associative_scan(
        J.lax.mul, x, reverse=True), [((6, 2), F32, "pos")]))
    c.append(Case("polygamma", "polygamma", lambda J, x: J.lax.polygamma(
        np.array([[0.0, 1.0, 2.0], [3.0, 1.0, 0.0]], F32), x), [(S, F32, "pos")]))
    c.append(Case("zeta", "zeta", lambda J, x, q: J.lax.zeta(x, q), [(S, F32, "gt1"),
                                                                      (S, F32, "pos")],
                  diff=()))  # JAX has no derivative for zeta; minijax's in q: lax_test
    c.append(Case("bessel_i1e", "bessel_i1e", lax_fn("bessel_i1e"), [(S, F32, "any")],
                  diff=()))
    for name in ["igamma", "igammac"]:  # in a: lax_test (igamma_grad_a has no jvp here)
        c.append(Case(name, name, lax_fn(name), [(S, F32, "pos"), (S, F32, "pos")],
                      diff=(1,), tol=1e-4))
    c.append(Case("igamma_grad_a", "igamma_grad_a", lax_fn("igamma_grad_a"),
                  [(S, F32, "pos"), (S, F32, "gt1")], diff=(), tol=1e-4))
    return c


ISSUE35_CASES = _issue35_cases()
ALL_CASES += ISSUE35_CASES
