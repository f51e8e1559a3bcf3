"""core: the same small programs through minijax and real JAX, side by side.

Each program is written once against a module alias (`def build(J): jnp = J.numpy; ...`) and
built twice, with `J=jax` and `J=minijax`. For every program we compare:

* values (eager and under `jit`), and the dtype and weak type of every output;
* `jvp` with random tangents and `grad` of a randomly weighted sum of the outputs (a vjp with a
  random cotangent), for programs with float inputs;
* `vmap` over a new leading axis of every input;
* the jaxprs: `str(J.make_jaxpr(f)(*args))` for both, printed one under the other in the report.

JAX's results are the expected values. A jaxpr comparison is graded: *identical*, *identical
after renaming* the variables in order of appearance, *identical once JAX-only params are
dropped* (JAX 0.10 prints `out_sharding=None` on reductions and similar params minijax does not
have), or *differs*. Each program declares the grade it is expected to reach; the check asserts
that it does, and the report shows the texts for all of them.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import textwrap
from typing import Any, Callable

import jax
import numpy as np

from compare._modules import MODULES
from compare._report import TopicResult, code


@dataclasses.dataclass
class Program:
    """A program: `build(J)` returns the function; `args(rng)` its numpy inputs.

    jaxpr: the grade the two jaxpr texts must reach (see `jaxpr_grade`), or None to record them
    without asserting. diff/vmap: whether to run jvp+grad and vmap on it.
    """

    name: str
    build: Callable[[Any], Callable]
    args: Callable[[np.random.RandomState], tuple]
    jaxpr: str | None = None
    diff: bool = True
    vmap: bool = True
    note: str = ""


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# The programs
# ---------------------------------------------------------------------------------------------

def sin_mul_add(J):
    jnp = J.numpy
    return lambda x: jnp.sin(x) * 2.0 + 1


def elementwise(J):
    jnp = J.numpy
    return lambda x, y: jnp.tanh(x) * jnp.exp(-y) + jnp.sin(x) / (1.0 + y * y)


_C = np.linspace(-1.0, 1.0, 4, dtype=np.float32)


def closure_const(J):
    jnp = J.numpy
    return lambda x: jnp.cos(x) * _C


def matmul(J):
    return lambda x, w, b: x @ w + b


def reductions(J):
    jnp = J.numpy
    return lambda x: (jnp.sum(x, axis=0), jnp.mean(x), jnp.max(x, axis=1),
                      jnp.sum(x * x, axis=1, keepdims=True))


def variance(J):
    jnp = J.numpy
    return lambda x: (jnp.var(x, axis=1), jnp.std(x))


def broadcasting(J):
    return lambda x, y: x * 2 + 1.5 - y[:, None]


def weak_types(J):
    jnp = J.numpy
    # int32 * python int stays int32, int32 * python float becomes float32, float16 with a
    # python float stays float16; a float16 array meeting a float32 array promotes to float32.
    return lambda i, h, x: (i * 2, i * 2.0, h * 3.0 + 1, h + x, jnp.float32(2) * i)


def softmax(J):
    return lambda x: (J.nn.softmax(x), J.nn.log_softmax(x))


def indexing(J):
    return lambda x: (x[1], x[:, 1:3], x[::2], x[..., -1], x[None, 0], x[1, 2], x[::-1, 1])


def _loss(J):
    jnp = J.numpy
    return lambda x: jnp.sum(jnp.sin(x) * x ** 3)


def grad_of_grad(J):
    return J.grad(J.grad(lambda x: J.numpy.sin(x) * x ** 3))


def jvp_of_grad(J):
    g = J.grad(_loss(J))
    return lambda x, t: J.jvp(g, (x,), (t,))


def _linear_loss(J):
    jnp = J.numpy
    return lambda w, x, y: jnp.mean((jnp.tanh(x @ w) - y) ** 2)


def vmap_of_grad(J):
    return J.vmap(J.grad(_linear_loss(J)), in_axes=(None, 0, 0))


def jit_of_grad(J):
    return J.jit(J.grad(_loss(J)))


def grad_of_jit(J):
    return J.grad(J.jit(_loss(J)))


def vmap_axes(J):
    return J.vmap(lambda a, b: a @ b + 1.0, in_axes=(1, None), out_axes=1)


PROGRAMS = [
    Program("sin_mul_add", sin_mul_add, lambda r: (f32(r, 3, 4),), jaxpr="identical"),
    Program("elementwise", elementwise, lambda r: (f32(r, 3, 4), f32(r, 3, 4)),
            jaxpr="identical"),
    Program("closure_const", closure_const, lambda r: (f32(r, 3, 4),), jaxpr="identical",
            note="a numpy array closed over becomes a constvar (before the `;`)"),
    Program("matmul", matmul, lambda r: (f32(r, 4, 5), f32(r, 5, 3), f32(r, 3)),
            jaxpr="identical"),
    Program("reductions", reductions, lambda r: (f32(r, 3, 5),), jaxpr="identical"),
    Program("variance", variance, lambda r: (f32(r, 3, 5),), jaxpr="identical",
            note="`jnp.var` and `jnp.std` are nested jits in both (`_var`, `_std` around "
                 "`_var`, printed once as a shared `let _var = ...`), dividing by "
                 "`n - ddof` with a `_where` for NaN where that is <= 0"),
    Program("broadcasting", broadcasting, lambda r: (f32(r, 3, 4), f32(r, 3)),
            jaxpr="identical"),
    Program("weak_types", weak_types,
            lambda r: (r.randint(-5, 5, (2, 3)).astype(np.int32),
                       f32(r, 2, 3).astype(np.float16), f32(r, 2, 3)),
            jaxpr="identical", diff=False,
            note="integer inputs: no jvp/grad; dtypes and weak types are compared"),
    Program("softmax", softmax, lambda r: (f32(r, 3, 5),), jaxpr="identical"),
    Program("indexing", indexing, lambda r: (f32(r, 4, 5),), jaxpr="identical"),
    Program("grad_of_grad", grad_of_grad, lambda r: (np.float32(0.7),), jaxpr="identical"),
    Program("jvp_of_grad", jvp_of_grad, lambda r: (f32(r, 5), f32(r, 5)), jaxpr="identical",
            note="a Hessian-vector product"),
    Program("vmap_of_grad", vmap_of_grad, lambda r: (f32(r, 4, 2), f32(r, 6, 4), f32(r, 6, 2)),
            vmap=False, jaxpr="params",
            note="per-example gradients: the same equations; JAX's batching rules print the "
                 "axes they computed with NumPy as `np.int64(1)`, minijax's as `1`"),
    Program("jit_of_grad", jit_of_grad, lambda r: (f32(r, 5),), jaxpr="identical"),
    Program("grad_of_jit", grad_of_jit, lambda r: (f32(r, 5),), jaxpr="identical",
            note="both split the jit into a forward jit and a transposed (backward) jit"),
    Program("vmap_axes", vmap_axes, lambda r: (f32(r, 2, 3, 4), f32(r, 4, 5)),
            note="in_axes=(1, None), out_axes=1. JAX's batching rule contracts the batched "
                 "operand in place; minijax moves the batch axis to the front and back again "
                 "(two transposes)"),
]


# ---------------------------------------------------------------------------------------------
# Jaxpr text comparison
# ---------------------------------------------------------------------------------------------

_DECL = re.compile(r"\b([a-z]+):[a-z]+\d*\[")
_WORD = re.compile(r"\b[a-z]+\b")
# Params JAX 0.10 prints that minijax's primitives do not have (all at their default here).
_JAX_ONLY_PARAMS = re.compile(r" ?\b(out_sharding|sharding|accumulation_type)=None\b")


def rename_vars(text: str) -> str:
    """Rename jaxpr variables to v0, v1, ... in order of first appearance."""
    declared = set(_DECL.findall(text))
    mapping: dict[str, str] = {}

    def sub(m):
        w = m.group(0)
        if w not in declared:
            return w
        return mapping.setdefault(w, f"v{len(mapping)}")
    return _WORD.sub(sub, text)


def drop_jax_only_params(text: str) -> str:
    text = _JAX_ONLY_PARAMS.sub("", text)
    text = re.sub(r"np\.int64\((-?\d+)\)", r"\1", text)  # an axis JAX computed in NumPy
    text = text.replace("[]", "")  # a param list left empty
    return " ".join(text.split())  # line breaks depend on the (now shorter) line lengths


GRADES = ("identical", "renamed", "params", "differs")


def jaxpr_grade(ours: str, theirs: str) -> str:
    """The first of GRADES at which the two texts agree."""
    if ours == theirs:
        return "identical"
    a, b = rename_vars(ours), rename_vars(theirs)
    if a == b:
        return "renamed"
    if drop_jax_only_params(a) == drop_jax_only_params(b):
        return "params"
    return "differs"


def jaxpr_section(ours: str, theirs: str, grade: str) -> str:
    """JAX's jaxpr, once when minijax prints the same text, else followed by the lines where
    minijax's differs (a unified diff, `-` JAX, `+` minijax)."""
    if ours == theirs:
        return "jaxpr comparison: **identical**; both print:\n\n" + code(theirs)
    diff = difflib.unified_diff(theirs.splitlines(), ours.splitlines(), "jax", "minijax",
                                lineterm="")
    return (f"jaxpr comparison: **{grade}**. JAX:\n\n" + code(theirs)
            + "\n\nwhere minijax's differs:\n\n" + code("\n".join(diff), "diff"))


# ---------------------------------------------------------------------------------------------
# Running a program under both modules
# ---------------------------------------------------------------------------------------------

def _leaves(tree) -> list:
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _leaves(t)]
    return [tree]


def _types(tree) -> list[tuple[str, bool]]:
    return [(np.dtype(x.dtype).name, bool(getattr(x, "weak_type", False)))
            for x in _leaves(tree)]


def _run_one(J, prog: Program, args: tuple, rng_seed: int) -> dict:
    """Everything we compare for one program under one module.

    minijax runs each transformation eagerly (numpy impls), and the plain function under its
    `jit` too. JAX's eager mode compiles every primitive separately on first use, so its
    reference results are computed under `jax.jit` (one compile per transformation; the
    values are the same, to the last float16 bit only where XLA does not fuse: `_tolerance`)."""
    jnp = J.numpy
    run = jax.jit if J is jax else (lambda fn: fn)
    f = prog.build(J)
    xs = tuple(jnp.asarray(a) for a in args)
    out: dict[str, Any] = {}
    value = run(f)(*xs)
    out["value"] = value
    out["types"] = _types(value)
    out["jit"] = J.jit(f)(*xs)
    out["jaxpr"] = str(J.make_jaxpr(f)(*xs))
    rng = np.random.RandomState(rng_seed)  # the same tangents/cotangents for both modules
    if prog.diff:
        tangents = tuple(jnp.asarray(f32(rng, *np.shape(a))) for a in args)
        out["jvp"] = run(lambda xs, ts: J.jvp(f, xs, ts))(xs, tangents)
        weights = [f32(rng, *np.shape(o)) for o in _leaves(value)]

        def weighted(*a):
            return sum(jnp.sum(o * w) for o, w in zip(_leaves(f(*a)), weights))
        out["grad"] = run(J.grad(weighted, argnums=tuple(range(len(xs)))))(*xs)
    if prog.vmap:
        batched = tuple(jnp.asarray(np.stack([a, a * 0.5, a - 1]).astype(np.asarray(a).dtype))
                        for a in args)
        out["vmap"] = run(J.vmap(f))(*batched)
    return out


def _tolerance(tree) -> dict:
    """rtol/atol for comparing minijax's results with JAX's: float32's, or float16's where an
    output is float16. minijax's eager numpy rounds a float16 result after every operation;
    XLA may fuse `h * 3.0 + 1` and round once (whether it does depends on the CPU's float16
    support), so the two can differ by one float16 ulp (about 1e-3 relative)."""
    if any(np.asarray(x).dtype == np.float16 for x in _leaves(tree)):
        return dict(rtol=2e-3, atol=2e-3)
    return dict(rtol=2e-5, atol=2e-5)


def _np(tree):
    return [np.asarray(x) for x in _leaves(tree)]


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Core: the same programs through minijax and JAX (values, jvp, grad, "
                      "vmap, jaxprs)")
    res.chapter = "chapters/02-tracing.md"
    rows = []
    sections = []
    for k, prog in enumerate(PROGRAMS):
        args = prog.args(np.random.RandomState(100 + k))
        outs = {name: _run_one(J, prog, args, rng_seed=200 + k) for name, J in MODULES}
        mj, jx = outs["minijax"], outs["jax"]
        tol = _tolerance(jx["value"])
        res.check(f"{prog.name}: value", _np(mj["value"]), _np(jx["value"]), **tol)
        res.check(f"{prog.name}: jit value", _np(mj["jit"]), _np(jx["jit"]), **tol)
        res.check_true(f"{prog.name}: output dtypes and weak types", mj["types"] == jx["types"])
        for what in ("jvp", "grad", "vmap"):
            if what in jx:
                res.check(f"{prog.name}: {what}", _np(mj[what]), _np(jx[what]), **tol)
        grade = jaxpr_grade(mj["jaxpr"], jx["jaxpr"])
        if prog.jaxpr is not None:
            res.check_true(f"{prog.name}: jaxpr text {prog.jaxpr} or better",
                           GRADES.index(grade) <= GRADES.index(prog.jaxpr))
        types = ", ".join(f"{d}{' (weak)' if w else ''}" for d, w in jx["types"])
        rows.append(f"| {prog.name} | {grade} | {prog.jaxpr or '-'} | {types} |")
        src = textwrap.dedent(inspect.getsource(prog.build)).strip()
        sections.append(
            f"### {prog.name}\n\n"
            + (f"{prog.note}.\n\n" if prog.note else "")
            + "```python\n" + src + "\n```\n\n"
            + jaxpr_section(mj["jaxpr"], jx["jaxpr"], grade))
    res.sections.append(
        "### Jaxpr text, program by program\n\n"
        "Grades: *identical*; *renamed* (equal once variables are renamed in order of "
        "appearance); *params* (equal once JAX-only params such as `out_sharding=None` are "
        "dropped and whitespace is collapsed); *differs*. `asserted` is the grade the check "
        "requires (`-`: recorded only).\n\n"
        "| program | grade | asserted | output dtypes (JAX) |\n|---|---|---|---|\n"
        + "\n".join(rows))
    res.sections += sections
    res.extra = {}
    return res
