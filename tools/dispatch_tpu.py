"""Cached `jit` calls on the chip: `../shared/bench/perf.py dispatch`'s three calls, each
result waited for leaf by leaf, under both modules in one process.

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/dispatch_tpu.py --out chapters/data/dispatch-tpu.json

The calls: `x + 1` on a float32 scalar, the sum of 10 float32[4] arguments, and a dict of 20
float32[4] arrays doubled. Each round times `CALLS` calls of one module, then the other
(minijax first), every leaf of every result blocked on, as perf.py does; the medians over
`ROUNDS` rounds are kept, in microseconds per call.

It also checks on the chip what `minijax/array.py: Array.block_until_ready` relies on: the
outputs of one execution are made ready together. A program returns a cheap output and a
heavy one; after XLA's own wait on the cheap one, the heavy one must be ready
("heavy_ready_after_cheap_wait" of "checked" calls).

Writes `{"device_kind", "platform", "jax", "date", "calls": [{"name", "jax_us",
"minijax_us", "ratio"}], "outputs_ready_together": {"checked",
"heavy_ready_after_cheap_wait"}}`. On a CPU it runs only with `--smoke` (few calls, for
tests/dispatch_tpu_test.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
PATH = ROOT / "chapters" / "data" / "dispatch-tpu.json"
CALLS, ROUNDS = 300, 15


def cases(J) -> dict:
    """name -> (jitted function, arguments) under module `J`, as perf.py's dispatch cases."""
    jnp = J.numpy
    xs = [jnp.ones((4,), jnp.float32) for _ in range(10)]
    d = {f"k{i}": jnp.ones((4,), jnp.float32) for i in range(20)}
    return {"scalar x+1": (J.jit(lambda x: x + 1), (jnp.asarray(1.0, dtype=jnp.float32),)),
            "10 args": (J.jit(lambda *a: sum(a[1:], a[0])), tuple(xs)),
            "dict of 20": (J.jit(lambda t: {k: v * 2 for k, v in t.items()}), (d,))}


def _per_call_us(J, f, args, calls: int) -> float:
    def blocked():
        for x in J.tree_util.tree_leaves(f(*args)):
            x.block_until_ready()
    blocked()
    t0 = time.perf_counter()
    for _ in range(calls):
        blocked()
    return (time.perf_counter() - t0) / calls * 1e6


def ready_together(calls: int) -> dict:
    """Over `calls` calls of a program with a cheap and a heavy output: how often the heavy
    one was ready right after XLA waited for the cheap one."""
    import minijax

    @minijax.jit
    def f(x):
        y = x
        for _ in range(12):
            y = minijax.numpy.tanh(y @ y) * 0.5
        return x[0, 0] + 1.0, y
    x = np.full((1024, 1024), 0.01, np.float32)
    f(x)[1].block_until_ready()
    ready = 0
    for _ in range(calls):
        cheap, heavy = f(x)
        cheap._buf.block_until_ready()  # XLA's own wait, not the shared flag
        ready += bool(heavy._buf.is_ready())
        heavy.block_until_ready()
    return {"checked": calls, "heavy_ready_after_cheap_wait": ready}


def run(out: Path, *, calls: int = CALLS, rounds: int = ROUNDS) -> dict:
    """Measure, print a line per call, write `out`; returns what was written."""
    import jax

    import minijax
    dev = jax.devices()[0]
    result = {"device_kind": dev.device_kind, "platform": dev.platform, "jax": jax.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "calls": []}
    mine, theirs = cases(minijax), cases(jax)
    for name in mine:
        times = [(_per_call_us(minijax, *mine[name], calls),
                  _per_call_us(jax, *theirs[name], calls)) for _ in range(rounds)]
        m, j = (statistics.median(t[i] for t in times) for i in (0, 1))
        result["calls"].append({"name": name, "jax_us": j, "minijax_us": m, "ratio": m / j})
        print(f"{name:12s} jax {j:9.1f} us  minijax {m:9.1f} us  ratio {m / j:.2f}", flush=True)
    result["outputs_ready_together"] = ready_together(max(3, calls // 10))
    print("outputs ready together:", result["outputs_ready_together"], flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=PATH)
    p.add_argument("--smoke", action="store_true", help="a few calls, on any device")
    args = p.parse_args(argv)
    from tools._chip import no_accelerator
    if no_accelerator(f"nothing measured, {args.out} not written", allow=args.smoke):
        return 0
    if args.smoke:
        run(args.out, calls=5, rounds=2)
    else:
        run(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
