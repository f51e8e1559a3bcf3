"""The MLP topic's training step on a TPU, its time split into the host's dispatch and the
wait: how much of minijax's step ratio there is Python.

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/accelerator_dispatch.py [--out FILE.json]

`tools/accelerator_compare.py` times a step as the median of single calls interleaved with
JAX's (`step_times`); this script times 300 calls in a row per module, three rounds (minijax
first in each), two ways: each call blocked on its loss ("blocked_us", what a training
loop that reads every loss pays), and all 300 dispatched before one wait ("dispatch_us", the
host's cost of a call while the device runs behind it; "drained_us" adds the final wait).
Then a cProfile of 300 blocked calls of each module, by own time. Built by
`accelerator_compare.build_mlp`: the same weights and batch under both modules. Runs on any
device; the committed record is a TPU's (`chapters/data/compare-tpu-run/mlp-dispatch.txt`,
printed by an earlier copy of this measurement).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

CALLS, ROUNDS = 300, 3


def measure(calls: int = CALLS, rounds: int = ROUNDS, profile: bool = True) -> dict:
    """{"rounds": [{module: {"blocked_us", "dispatch_us", "drained_us"}}], "profile":
    {module: text}, "device_kind"}; microseconds per call."""
    import jax

    from tools import accelerator_compare as A
    entries, batches, _ = A.BUILDERS["mlp"](False, 3, A._modules())
    args = {}
    for name, (J, call, state) in entries.items():
        state, loss = call(state, *batches[0])
        J.block_until_ready(loss)
        args[name] = (state, *J.device_put(batches[0]))

    def blocked(name: str, n: int) -> float:
        J, call, _ = entries[name]
        a = args[name]
        t0 = time.perf_counter()
        for _ in range(n):
            J.block_until_ready(call(*a)[1])
        return (time.perf_counter() - t0) / n * 1e6

    def unblocked(name: str, n: int) -> tuple[float, float]:
        J, call, _ = entries[name]
        a = args[name]
        outs = []
        t0 = time.perf_counter()
        for _ in range(n):
            outs.append(call(*a)[1])
        t1 = time.perf_counter()
        J.block_until_ready(outs[-1])
        return (t1 - t0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6

    for name in entries:
        blocked(name, 50)  # warm-up
    out = {"device_kind": jax.devices()[0].device_kind, "calls": calls, "rounds": []}
    for _ in range(rounds):
        row = {}
        for name in entries:
            b = blocked(name, calls)
            d, w = unblocked(name, calls)
            row[name] = {"blocked_us": b, "dispatch_us": d, "drained_us": w}
        out["rounds"].append(row)
    if profile:
        out["profile"] = {}
        for name in entries:
            pr = cProfile.Profile()
            pr.enable()
            blocked(name, calls)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
            out["profile"][name] = s.getvalue()
    return out


def show(res: dict) -> None:
    for i, row in enumerate(res["rounds"]):
        mj, jx = row["minijax"], row["jax"]
        print(f"round {i}: blocked {mj['blocked_us']:.1f} / {jx['blocked_us']:.1f} us "
              f"(ratio {mj['blocked_us'] / jx['blocked_us']:.3f}), dispatch "
              f"{mj['dispatch_us']:.1f} / {jx['dispatch_us']:.1f} us")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--calls", type=int, default=CALLS)
    a = p.parse_args(argv)
    res = measure(a.calls)
    show(res)
    if a.out:
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
