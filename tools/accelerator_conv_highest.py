"""Why the CNN topic's training step at `default_matmul_precision("highest")` does not finish
on a TPU: each convolution of the step compiled on its own, at the default precision and at
HIGHEST, then the whole step, each compile timed and cut after a limit.

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/accelerator_conv_highest.py [--out FILE.json]
                                                                         [--limit-s 45]

The step is `accelerator_compare.build_cnn_bn`'s (compare/cnn_bn.py, batch 64). Its
convolutions are read from JAX's jaxpr of the step (`jax.make_jaxpr`): the two forward
convolutions and the three of the backward pass (input and weight gradients), each with its
operand shapes and parameters. Each is jitted alone under JAX and compiled
(`.lower().compile()`) in a thread; one that has not finished after `--limit-s` seconds is
recorded as such and left running, and the compiles after it are timed all the same. Then the
whole step (four times the limit, or the limit once a piece has stalled), under JAX and
under minijax (their modules at HIGHEST are the same convolutions:
tests/accelerator_compare_test.py compares them on a CPU). Writes {"device_kind", "jax",
"date", "rows": [{"what", "precision", "shapes", "compile_s" or "stalled_after_s"}]}.
Runs on any device; on a CPU every compile finishes in well under a second.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))


def timed_compile(lower, limit_s: float, run_args: tuple | None = None) -> dict:
    """{"compile_s": s} for `lower().compile()` run in a thread, and {"run_s": s} for one call
    of the result on `run_args` (blocked on its outputs) when given; {"stalled_after_s":
    limit} (with what finished) when not done by then (the thread is left to finish on its
    own); {"error": text} if it raised."""
    box: dict = {}

    def work():
        t0 = time.perf_counter()
        try:
            compiled = lower().compile()
            box["compile_s"] = time.perf_counter() - t0
            if run_args is not None:
                t0 = time.perf_counter()
                for leaf in jax_leaves(compiled(*run_args)):
                    leaf.block_until_ready()
                box["run_s"] = time.perf_counter() - t0
        except Exception as e:  # recorded
            box["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(limit_s)
    done = dict(box)
    if "error" in done or "run_s" in done or ("compile_s" in done and run_args is None):
        return done
    return {**done, "stalled_after_s": limit_s}


def jax_leaves(tree) -> list:
    import jax
    return jax.tree_util.tree_leaves(tree)


def conv_pieces(step, args) -> list[tuple[str, dict, tuple]]:
    """(label, params, operand avals) of every `conv_general_dilated` in JAX's jaxpr of
    `step(*args)`, in program order."""
    import jax
    import jax.extend.core  # jaxprs_in_params
    jaxpr = jax.make_jaxpr(step)(*args).jaxpr
    out, todo = [], [jaxpr]
    while todo:
        j = todo.pop(0)
        for eqn in j.eqns:
            if eqn.primitive.name == "conv_general_dilated":
                avals = tuple(v.aval for v in eqn.invars)
                out.append((f"conv {len(out)}", dict(eqn.params), avals))
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                todo.append(sub)
    return out


def measure(limit_s: float) -> dict:
    import jax
    import numpy as np
    from jax import lax

    import minijax
    from tools import accelerator_compare as A
    rows = []

    def row(what, precision, shapes, result):
        rows.append({"what": what, "precision": precision, "shapes": shapes, **result})
        print(rows[-1], flush=True)

    entries, batches, _ = A.BUILDERS["cnn_bn"](False, 3, A._modules())
    J, call, state = entries["jax"]
    args = (state, *batches[0])
    for precision in ("default", "highest"):
        scope = (jax.default_matmul_precision(precision) if precision == "highest"
                 else contextlib.nullcontext())
        with scope:
            pieces = conv_pieces(call, args)
        for label, params, avals in pieces:
            shapes = " x ".join(f"{a.dtype}{list(a.shape)}" for a in avals)
            zeros = [np.zeros(a.shape, a.dtype) for a in avals]
            f = jax.jit(lambda a, b, params=params: lax.conv_general_dilated_p.bind(
                a, b, **params))
            row(label, precision, shapes, timed_compile(lambda f=f, z=zeros: f.lower(*z), limit_s))
    # the whole step gets four times the limit, or just the limit where a piece stalled
    step_limit = limit_s if any("stalled_after_s" in r for r in rows) else 4 * limit_s
    for name, module in (("jax", jax), ("minijax", minijax)):
        with module.default_matmul_precision("highest"):
            built, batches, _ = A.BUILDERS["cnn_bn"](False, 3, A._modules())
            _, call, state = built[name]
            row(f"the whole step ({name})", "highest", "",
                timed_compile(lambda call=call, args=(state, *batches[0]): call.lower(*args),
                              step_limit, run_args=(state, *batches[0])))
    dev = jax.devices()[0]
    return {"device_kind": dev.device_kind, "jax": jax.__version__, "limit_s": limit_s,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--limit-s", type=float, default=45.0)
    a = p.parse_args(argv)
    res = measure(a.limit_s)
    if a.out:
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    import os
    code = main()
    sys.stdout.flush()
    os._exit(code)  # a stalled compile's thread would keep the process alive
