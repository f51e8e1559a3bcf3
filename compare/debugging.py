"""Debugging: looking inside a running program, in minijax and JAX (the JAX 201 debugging pages).

Each program is written once against a module alias `J` and run with `J=jax` and `J=minijax`;
what it printed, what the host saw and the errors raised must agree:

* `debug.print` and `debug.callback` eagerly and under `jit`, `vmap` (one call per example)
  and `grad` (the primal values, once; the backward pass adds no calls);
* `checkify`: user checks, NaN, division by zero and out-of-bounds index checks, the error
  value it returns under `jit`, `vmap` (the failing example named) and `grad`;
* `jax_debug_nans` / `jax_debug_infs`: the program runs compiled, and when a NaN or inf comes
  out it is run again primitive by primitive so the error names the one that made it;
* `debug.breakpoint`: the text debugger, driven by a scripted session (evaluate traced values,
  walk the frames, continue), eagerly and under `jit`, `vmap` and `grad`;
* `debug.visualize_array_sharding`: the picture of an array's layout over a mesh.
"""

from __future__ import annotations

import contextlib
import io
import re

import jax
import jax.experimental.checkify
import numpy as np

import minijax.experimental.checkify  # noqa: F401 (J.experimental.checkify)
from compare._jax201 import captured_stdout, catch, table
from compare._modules import MODULES
from compare._report import TopicResult, code

X = np.linspace(-1, 1, 3, dtype=np.float32)
XS = np.arange(6, dtype=np.float32).reshape(2, 3)
WRAPS = {"eager": lambda J, f: f, "jit": lambda J, f: J.jit(f), "vmap": lambda J, f: J.vmap(f),
         "grad": lambda J, f: J.grad(lambda x: f(x).sum())}


def _input(how: str):
    return XS if how == "vmap" else X


# ---------------------------------------------------------------------------------------------
# debug.print and debug.callback
# ---------------------------------------------------------------------------------------------

def printed(J) -> dict[str, str]:
    """What `debug.print` printed inside the same function under each transformation."""
    def f(x):
        y = J.numpy.sin(x) * 2
        J.debug.print("x={x} y.sum()={s}", x=x, s=y.sum())
        return y

    out = {}
    for how, wrap in WRAPS.items():
        with captured_stdout() as buf:
            J.block_until_ready(wrap(J, f)(_input(how)))
            J.effects_barrier()
        out[how] = buf.getvalue()
    return out


def seen_by_callback(J) -> dict[str, list]:
    """What a `debug.callback` received, per transformation."""
    out = {}
    for how, wrap in WRAPS.items():
        seen: list = []

        def f(x, seen=seen):
            J.debug.callback(lambda v: seen.append(np.asarray(v).tolist()), x * 3)
            return J.numpy.cos(x)
        J.block_until_ready(wrap(J, f)(_input(how)))
        J.effects_barrier()
        out[how] = seen
    return out


# ---------------------------------------------------------------------------------------------
# checkify
# ---------------------------------------------------------------------------------------------

def _checked_program(J):
    jnp, c = J.numpy, J.experimental.checkify

    def f(x, i):
        c.check(jnp.all(x > 0), "x must be positive, got {x}", x=x)
        return jnp.log(x - 1.0), x[i], jnp.arange(3) // (i - 1)
    return f


CHECK_CASES = {"check fails": (np.array([-1.5, 2.0, 3.0], np.float32), 2),
               "log of a negative, i - 1 == 0": (np.array([0.5, 2.0, 3.0], np.float32), 1),
               "index out of bounds": (np.array([1.5, 2.0, 3.0], np.float32), 5),
               "no error": (np.array([1.5, 2.0, 3.0], np.float32), 2)}
ERROR_SETS = ("user_checks", "nan_checks", "div_checks", "index_checks", "all_checks")


def checkify_messages(J, error_sets=ERROR_SETS) -> dict[str, str | None]:
    """`err.get()` for each error set and case under jit, and for vmap and grad."""
    c = J.experimental.checkify
    out = {}
    for errors in error_sets:
        checked = J.jit(c.checkify(_checked_program(J), errors=getattr(c, errors)))
        for case, (x, i) in CHECK_CASES.items():
            out[f"jit, {errors}: {case}"] = checked(x, i)[0].get()

    def g(x):
        c.check(x > 0, "x must be positive, got {}", x)
        return J.numpy.sin(x)
    xs = np.array([1.0, -1.0, -2.0], np.float32)
    out["vmap: the failing examples named"] = J.vmap(c.checkify(g))(xs)[0].get()
    out["jit(vmap(f)) under checkify"] = c.checkify(J.jit(J.vmap(g)))(xs)[0].get()
    out["grad(f) under checkify, failing"] = c.checkify(J.grad(g))(np.float32(-3.0))[0].get()
    out["grad(f) under checkify, passing"] = c.checkify(J.grad(g))(np.float32(3.0))[0].get()
    oob = c.checkify(lambda x: x[J.numpy.array(5)], errors=c.index_checks)
    out["vmap: index out of bounds"] = J.vmap(oob)(np.ones((3, 2), np.float32))[0].get()
    return out


# ---------------------------------------------------------------------------------------------
# jax_debug_nans / jax_debug_infs
# ---------------------------------------------------------------------------------------------

def _with_flag(J, name: str, value: bool, fn):
    """fn() with the option `name` set, through the module's own context manager
    (`J.debug_nans`, `J.debug_infs`: JAX's, and minijax's of the same names)."""
    with getattr(J, name.removeprefix("jax_"))(value):
        return fn()


def flag_errors(J) -> dict[str, tuple[str | None, str]]:
    """The FloatingPointError each flag raises for a NaN (log of a negative, in a nested jit)
    and an inf (exp overflow), eagerly and under jit; and the value with the flag off."""
    jnp = J.numpy

    def nan_prog(x):
        return J.jit(lambda y: jnp.log(y - 2.0) * 2.0)(jnp.sin(x)) + 1.0

    def inf_prog(x):
        return jnp.exp(x * 100.0) - 1.0

    x = np.ones(3, np.float32)
    out = {}
    for flag, prog in (("jax_debug_nans", nan_prog), ("jax_debug_infs", inf_prog)):
        for how in ("eager", "jit"):
            f = J.jit(prog) if how == "jit" else prog
            out[f"{flag}, {how}"] = catch(lambda f=f, flag=flag: _with_flag(
                J, flag, True, lambda: J.block_until_ready(f(x))))
        out[f"{flag} off"] = (None, str(np.isfinite(np.asarray(J.jit(prog)(x))).tolist()))
    return out


# ---------------------------------------------------------------------------------------------
# debug.breakpoint
# ---------------------------------------------------------------------------------------------

# evaluate a traced value and an expression, walk up and down the frames, list the source,
# name a missing variable, continue
SESSION = "p y\ny.shape, y.dtype\nw\nu\nd\nd\nl\np missing\nc\n"


def breakpoint_sessions(J) -> dict[str, str]:
    """What the text debugger printed for SESSION at a breakpoint in `f`, per transformation
    (under vmap one session per example), with addresses masked."""
    out = {}
    for how, wrap in WRAPS.items():
        buf = io.StringIO()

        def f(x, buf=buf):
            y = x * 2.5 + 1
            J.debug.breakpoint(stdin=io.StringIO(SESSION * 2), stdout=buf, num_frames=2)
            return y
        J.block_until_ready(wrap(J, f)(_input(how)))
        J.effects_barrier()
        out[how] = re.sub(r"0x[0-9a-f]+", "0x…", buf.getvalue())
    return out


# ---------------------------------------------------------------------------------------------
# visualize_array_sharding
# ---------------------------------------------------------------------------------------------

LAYOUTS = [(("x", "y"), (8, 4)), (("x",), (8, 4)), ((None, "y"), (8, 4)), ((), (8, 4)),
           ((("x", "y"),), (16,))]


def pictures(J) -> dict[str, str]:
    """`visualize_array_sharding`'s text for arrays laid out over a 2x4 mesh."""
    S = J.sharding
    mesh = J.make_mesh((2, 4), ("x", "y"), axis_types=(S.AxisType.Explicit,) * 2)
    out = {}
    for spec, shape in LAYOUTS:
        arr = J.device_put(np.ones(shape, np.float32), S.NamedSharding(mesh, S.PartitionSpec(
            *spec)))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            J.debug.visualize_array_sharding(arr)
        out[f"f32{list(shape)} P{spec}"] = buf.getvalue()
    return out


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Debugging: debug.print, checkify, debug_nans, breakpoint, sharding "
                      "pictures")
    res.chapter = "chapters/15-debugging.md"
    res.devices = jax.device_count()

    _debug_print(res)

    _checkify(res, quick)

    _debug_flags(res)

    _breakpoint(res)

    _sharding_pictures(res)
    return res


def _debug_print(res):
    """debug.print and debug.callback under each transformation: what minijax prints and sees
    against JAX's, and the section."""
    text = {name: printed(J) for name, J in MODULES}
    seen = {name: seen_by_callback(J) for name, J in MODULES}
    for how in WRAPS:
        res.check_true(f"debug.print under {how}: minijax prints what JAX prints",
                       text["minijax"][how] == text["jax"][how] != "")
        res.check_true(f"debug.callback under {how}: minijax's host function saw JAX's "
                       "values", seen["minijax"][how] == seen["jax"][how])
    with res.running("jax"):
        res.check_true("debug.print under vmap: one line per example",
                       text["jax"]["vmap"].count("\n") == len(XS))
        res.check_true("debug.callback under grad: the primal values, once",
                       seen["jax"]["grad"] == [(X * 3).tolist()])
    res.sections.append(
        "### debug.print and debug.callback\n\n"
        "Both bind a primitive with no outputs and a debug effect, so `jit` keeps them and "
        "lowers them to a host callback that runs each time the program does. `vmap` calls "
        "the host once per example; `grad` shows the forward (primal) values once, and the "
        "backward pass adds no call. `f(x)` prints `x` and `sin(x).sum() * 2`; what each "
        "transformation printed (the same text in both modules):\n\n"
        + table(["under", "printed"], [[h, f"`{t.strip()}`".replace("\n", " / ")]
                                       for h, t in text["jax"].items()]))


def _checkify(res, quick):
    """checkify's messages for each error set and transformation, minijax's against JAX's, and
    the section."""
    sets = ("user_checks", "all_checks") if quick else ERROR_SETS  # JAX's checkify is slow
    msgs = {name: checkify_messages(J, sets) for name, J in MODULES}
    for what, want in msgs["jax"].items():
        res.check_true(f"checkify, {what}: minijax's error equals JAX's",
                       msgs["minijax"][what] == want)
    with res.running("jax"):
        res.check_true("checkify: every error set catches its case and passes the clean one",
                       all(msgs["jax"][f"jit, {e}: no error"] is None for e in sets)
                       and msgs["jax"]["jit, all_checks: index out of bounds"] is not None
                       and msgs["jax"]["jit, user_checks: check fails"] is not None
                       and msgs["jax"]["jit, user_checks: index out of bounds"] is None)
    rows = [[what, "-" if m is None else f"`{m}`"] for what, m in msgs["jax"].items()
            if not what.endswith("no error")]
    res.sections.append(
        "### checkify\n\n"
        "`checkify(f, errors=...)` turns the failure of a check into a value: it returns "
        "`(err, out)`, and `err.get()` is the message of the first check that failed (or "
        "None). User checks (`check(pred, msg)`) are always on; NaN, division-by-zero and "
        "out-of-bounds index checks are added per error set. Under `vmap` the failing "
        "examples are named, under `grad` the check sees the primal values. The program "
        "`f(x, i)` checks `x > 0`, then computes `log(x - 1)`, `x[i]` and `arange(3) // "
        "(i - 1)`. JAX's messages (minijax's are checked equal):\n\n"
        + table(["case", "err.get()"], rows))


def _debug_flags(res):
    """What jax_debug_nans and jax_debug_infs raise in both modules, eager and under jit, and
    the section."""
    flags = {name: flag_errors(J) for name, J in MODULES}
    for what, (kind, msg) in flags["jax"].items():
        res.check_true(f"{what}: minijax raises what JAX raises",
                       flags["minijax"][what] == (kind, msg))
    with res.running("jax"):
        res.check_true("jax_debug_nans names the primitive that made the NaN (log)",
                       all(flags["jax"][f"jax_debug_nans, {h}"] ==
                           ("FloatingPointError", "invalid value (nan) encountered in log")
                           for h in ("eager", "jit")))
        res.check_true("jax_debug_infs names the primitive that made the inf (exp)",
                       all("encountered in exp" in flags["jax"][f"jax_debug_infs, {h}"][1]
                           for h in ("eager", "jit")))
    res.sections.append(
        "### jax_debug_nans and jax_debug_infs\n\n"
        "With the flag on, every result is checked. A compiled program that produced a NaN "
        "is run once more, equation by equation and without compiling, so the error can name "
        "the primitive that made it instead of the whole program; with the flag off the same "
        "programs just return NaN or inf. What each raised (both modules alike):\n\n"
        + table(["flag, mode", "raised", "message"],
                [[w, k or "-", m] for w, (k, m) in flags["jax"].items()]))


def _breakpoint(res):
    """debug.breakpoint sessions scripted through stdin, minijax's against JAX's, and the
    section."""
    sessions = {name: breakpoint_sessions(J) for name, J in MODULES}
    for how in WRAPS:
        res.check_true(f"debug.breakpoint under {how}: minijax's debugger session prints "
                       "JAX's", sessions["minijax"][how] == sessions["jax"][how] != "")
    with res.running("jax"):
        res.check_true("debug.breakpoint under vmap: one session per example",
                       sessions["jax"]["vmap"].count("Entering jdb:") == len(XS))
    res.sections.append(
        "### debug.breakpoint\n\n"
        "`debug.breakpoint()` captures the Python frames while tracing; their traced locals "
        "travel to run time through a debug callback, so the debugger that opens sees the "
        "values the compiled program computed. Here it reads its commands from a scripted "
        "stream (`stdin=`) instead of the keyboard: "
        + ", ".join(f"`{c}`" for c in SESSION.strip().split("\n"))
        + ". The session under `jit` (file paths as this run had them; both modules printed "
        "the same):\n\n" + code(sessions["jax"]["jit"]))


def _sharding_pictures(res):
    """visualize_array_sharding: minijax draws JAX's pictures; the section shows two."""
    pics = {name: pictures(J) for name, J in MODULES}
    for what, pic in pics["jax"].items():
        res.check_true(f"visualize_array_sharding {what}: minijax draws JAX's picture",
                       pics["minijax"][what] == pic)
    first = list(pics["jax"])[:2]
    res.sections.append(
        "### visualize_array_sharding\n\n"
        "A grid of the array's blocks, each labelled with the devices holding it: a quick "
        "way to see a layout. Two of JAX's pictures (minijax's are checked equal):\n\n"
        + "\n\n".join(f"{w}:\n\n" + code(pics["jax"][w]) for w in first))
