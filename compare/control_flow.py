"""control_flow: `cond`, `scan`, `while_loop` and `fori_loop` in minijax and real JAX.

Each program is written once against a module alias (`build(J)`) and built with `J=jax` and
`J=minijax`. We compare:

* the jaxprs of cond / switch / scan / while / fori programs, printed one under the other and
  graded as in `compare/core.py` (identical, renamed, params, differs);
* their values, eager and under `jit`;
* an RNN-style scan (a tanh cell over a batch of sequences) trained for a few SGD steps with
  `jit(value_and_grad(loss))`: the per-step losses and final parameters must agree;
* the size of the backward pass: equations in `make_jaxpr(grad(rnn_loss))` after dead-code
  elimination, counted into the loop bodies (minijax: `pe.dce_jaxpr` + `pe.count_eqns`; JAX:
  `jax._src.interpreters.partial_eval.dce_jaxpr` and the same recursive count). Target:
  minijax <= 1.25x JAX.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any, Callable

import jax
import numpy as np

import minijax
from compare._modules import MODULES
from compare._report import TopicResult, code, interleaved_ms
from compare.core import GRADES, jaxpr_grade

EQN_RATIO_TARGET = 1.25

# ---------------------------------------------------------------------------------------------
# Small programs: jaxprs side by side, values
# ---------------------------------------------------------------------------------------------


def cond_program(J):
    jnp = J.numpy
    return lambda p, x: J.lax.cond(p > 0, lambda x: jnp.sin(x) * 2.0, jnp.cos, x)


def switch_program(J):
    jnp = J.numpy
    return lambda i, x: J.lax.switch(i, [jnp.sin, jnp.cos, lambda x: x * 3.0], x)


def scan_program(J):
    jnp = J.numpy

    def body(c, x):
        c = jnp.tanh(c * 0.5 + x)
        return c, c * x
    return lambda xs: J.lax.scan(body, jnp.zeros(xs.shape[1:]), xs)


def while_program(J):
    return lambda x: J.lax.while_loop(lambda c: c[1] < 100.0,
                                      lambda c: (c[0] + 1, c[1] * 2.0), (0, x))


def fori_program(J):
    jnp = J.numpy
    return lambda x: J.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) + i, x)


def vmap_cond_program(J):
    jnp = J.numpy
    return J.vmap(lambda p, x: J.lax.cond(p > 0, jnp.sin, jnp.cos, x))


# (name, build, args, the jaxpr grade asserted, note)
PROGRAMS: list[tuple[str, Callable, Callable, str | None, str]] = [
    ("cond", cond_program, lambda r: (np.float32(0.5), r.randn(3).astype(np.float32)),
     "identical", "both branches are traced to jaxprs; the predicate becomes an i32 index"),
    ("switch", switch_program, lambda r: (np.int32(5), r.randn(3).astype(np.float32)),
     None, "the index is clamped: JAX binds `clamp`, minijax (which has no clamp primitive) "
     "`min` then `max`"),
    ("scan", scan_program, lambda r: (r.randn(5, 3).astype(np.float32),),
     "identical", "the body is one jaxpr; xs are sliced and ys stacked along the leading axis"),
    ("while", while_program, lambda r: (np.float32(1.5),),
     "identical", "cond_jaxpr and body_jaxpr, each with its consts counted"),
    ("fori (static bounds)", fori_program, lambda r: (r.randn(3).astype(np.float32),),
     "identical", "concrete bounds make fori_loop a scan (so reverse mode works)"),
    ("vmap of cond (batched predicate)", vmap_cond_program,
     lambda r: (r.randn(4).astype(np.float32), r.randn(4, 3).astype(np.float32)),
     "identical", "a batched predicate turns the cond into select_n of both branches"),
]


def _np(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _programs_section(res: TopicResult) -> None:
    rows, sections = [], []
    for k, (name, build, make_args, want, note) in enumerate(PROGRAMS):
        args = make_args(np.random.RandomState(k))
        out = {}
        for mod_name, J in MODULES:
            f = build(J)
            out[mod_name] = dict(value=f(*args), jit=J.jit(f)(*args),
                                 jaxpr=str(J.make_jaxpr(f)(*args)))
        mj, jx = out["minijax"], out["jax"]
        res.check(f"{name}: value", _np(mj["value"]), _np(jx["value"]), rtol=1e-5, atol=1e-6)
        res.check(f"{name}: jit value", _np(mj["jit"]), _np(jx["jit"]), rtol=1e-5, atol=1e-6)
        grade = jaxpr_grade(mj["jaxpr"], jx["jaxpr"])
        if want is not None:
            res.check_true(f"{name}: jaxpr text {want} or better",
                           GRADES.index(grade) <= GRADES.index(want))
        rows.append(f"| {name} | {grade} | {want or '-'} |")
        src = textwrap.dedent(inspect.getsource(build)).strip()
        sections.append(f"### {name}\n\n{note}.\n\n```python\n{src}\n```\n\n"
                        f"jaxpr comparison: **{grade}**. JAX:\n\n{code(jx['jaxpr'])}\n\n"
                        f"minijax:\n\n{code(mj['jaxpr'])}")
    res.sections.append("### Control-flow jaxprs, program by program\n\n"
                        "| program | grade | asserted |\n|---|---|---|\n" + "\n".join(rows))
    res.sections += sections


# ---------------------------------------------------------------------------------------------
# An RNN trained with jit(value_and_grad) over a scan
# ---------------------------------------------------------------------------------------------

def rnn_loss_fn(J) -> Callable:
    """loss(params, xs f32[T,B,D], ys f32[T,B,H]): a tanh RNN cell scanned over time, mean
    squared error of the hidden states against targets."""
    jnp = J.numpy

    def rnn_loss(params, xs, ys):
        W, U, b = params

        def cell(h, xy):
            x, y = xy
            h = jnp.tanh(h @ W + x @ U + b)
            return h, jnp.mean((h - y) ** 2)

        h0 = jnp.zeros((xs.shape[1], W.shape[0]), xs.dtype)
        _, losses = J.lax.scan(cell, h0, (xs, ys))
        return jnp.mean(losses)
    return rnn_loss


def rnn_data(T: int, B: int, D: int, H: int, seed: int = 0):
    """Sine waves of random phase and frequency as inputs, shifted copies as targets."""
    rng = np.random.RandomState(seed)
    t = np.arange(T + 1, dtype=np.float32)[:, None, None]
    freq = rng.uniform(0.1, 0.5, (1, B, 1)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, (1, B, max(D, H))).astype(np.float32)
    wave = np.sin(freq * t + phase).astype(np.float32)
    params = (rng.randn(H, H).astype(np.float32) * (0.5 / np.sqrt(H)),
              rng.randn(D, H).astype(np.float32) * (1.0 / np.sqrt(D)),
              np.zeros(H, np.float32))
    return params, wave[:-1, :, :D], 0.8 * wave[1:, :, :H]


def train_rnn(J, params, xs, ys, steps: int, lr: float) -> dict[str, Any]:
    """`steps` SGD steps with `jit(value_and_grad(rnn_loss))`: the losses, the parameters, and
    `call`, one blocking call of the compiled step on inputs already on the device (to time)."""
    step = J.jit(J.value_and_grad(rnn_loss_fn(J)))
    losses = []
    for _ in range(steps):
        loss, grads = step(params, xs, ys)
        params = tuple(p - lr * g for p, g in zip(params, grads))
        losses.append(float(loss))
    on_device = J.device_put((params, xs, ys))
    return dict(losses=losses, params=[np.asarray(p) for p in params],
                call=lambda: J.block_until_ready(step(*on_device)))


def _jax_count_eqns(jaxpr) -> int:
    from jax._src import core as jcore
    return sum(1 + sum(_jax_count_eqns(sub) for sub in jcore.jaxprs_in_params(e.params))
               for e in jaxpr.eqns)


def grad_eqn_counts(params, xs, ys) -> dict[str, int]:
    """Equations of make_jaxpr(grad(rnn_loss)) after DCE, nested loop bodies included."""
    from jax._src.interpreters import partial_eval as jpe

    from minijax.interpreters import partial_eval as mpe

    closed = jax.make_jaxpr(jax.grad(rnn_loss_fn(jax)))(params, xs, ys)
    jaxpr, _ = jpe.dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    mclosed = minijax.make_jaxpr(minijax.grad(rnn_loss_fn(minijax)))(params, xs, ys)
    mjaxpr, _ = mpe.dce_jaxpr(mclosed.jaxpr)
    return {"jax": _jax_count_eqns(jaxpr), "minijax": mpe.count_eqns(mjaxpr),
            "jax_jaxpr": str(jaxpr), "minijax_jaxpr": str(mjaxpr)}


def _rnn_section(res: TopicResult, quick: bool) -> None:
    T, B, D, H = (6, 4, 3, 8) if quick else (20, 16, 4, 32)
    steps, lr, reps = (3, 0.5, 5) if quick else (30, 0.5, 100)
    params, xs, ys = rnn_data(T, B, D, H)
    runs = {name: train_rnn(J, params, xs, ys, steps, lr) for name, J in MODULES}
    mj, jx = runs["minijax"], runs["jax"]
    res.check("rnn: per-step losses agree", mj["losses"], jx["losses"], rtol=1e-4, atol=1e-6)
    res.check("rnn: final parameters agree", mj["params"], jx["params"], rtol=1e-3, atol=1e-5)
    res.check_true("rnn: loss decreased (both)",
                   all(r["losses"][-1] < r["losses"][0] for r in (mj, jx)))
    med = interleaved_ms({name: r["call"] for name, r in runs.items()}, repeat=reps)
    res.timings_ms.update({"rnn compiled step, jax": med["jax"],
                           "rnn compiled step, minijax": med["minijax"],
                           "ratio minijax/jax": med["minijax"] / med["jax"]})

    counts = grad_eqn_counts(params, xs, ys)
    ratio = counts["minijax"] / counts["jax"]
    res.check_true(f"grad(rnn_loss) equations after DCE: minijax {counts['minijax']} <= "
                   f"{EQN_RATIO_TARGET}x JAX {counts['jax']}", ratio <= EQN_RATIO_TARGET)
    res.extra.update({
        "rnn": {name: {"losses": r["losses"], "step_ms": med[name]} for name, r in runs.items()},
        "grad_eqn_counts": {"jax": counts["jax"], "minijax": counts["minijax"],
                            "ratio": ratio, "target": EQN_RATIO_TARGET},
    })
    rows = "\n".join(f"| {i} | {a:.6f} | {b:.6f} |"
                     for i, (a, b) in enumerate(zip(jx["losses"], mj["losses"])))
    src = textwrap.dedent(inspect.getsource(rnn_loss_fn)).strip()
    res.sections.append(
        f"### RNN over a scan, trained with jit(value_and_grad)\n\n"
        f"T={T} steps, batch {B}, {D} inputs, {H} hidden units, {steps} SGD steps "
        f"(lr {lr}).\n\n```python\n{src}\n```\n\n| step | JAX loss | minijax loss |\n"
        f"|---|---|---|\n{rows}\n\n"
        f"Equations in `make_jaxpr(grad(rnn_loss))` after DCE (loop bodies included): "
        f"JAX **{counts['jax']}**, minijax **{counts['minijax']}** (ratio {ratio:.2f}, target "
        f"<= {EQN_RATIO_TARGET}). Both differentiate the scan the same way: a forward scan "
        "that also emits the residuals as extra stacked outputs (loop-invariant ones hoisted "
        "out of the loop), then a reversed scan over the transposed body that accumulates the "
        "parameter cotangents in its carry.\n\nJAX:\n\n" + code(counts["jax_jaxpr"])
        + "\n\nminijax:\n\n" + code(counts["minijax_jaxpr"]))


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Control flow: cond, scan, while_loop and fori_loop in minijax and JAX")
    res.chapter = "chapters/08-control-flow.md"
    _programs_section(res)
    _rnn_section(res, quick)
    return res
