"""Eager operations on the chip: a `jnp` call outside `jit` on arrays in the TPU's memory.

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/accelerator_eager.py \
        --out chapters/data/eager-tpu.json

JAX runs every eager operation as a one-primitive executable on the default device. minijax
runs most eager operations on NumPy when that device is a CPU (it gives XLA's bits there at a
third of the cost); on an accelerator it compiles each primitive for the device as JAX does
(`minijax/dispatch.py: _eager_on_device`), so values stay in the device's
memory. This script times a few eager operations on device-resident arrays three ways, in one
process: JAX, minijax as it runs them ("device"), and minijax forced onto its host path
("host": each operand copied to the host, NumPy, the result kept on the host), and checks the
results agree. It writes `{"device_kind", "platform", "jax", "date", "ops": [{"name", "shape",
"dtype", "jax_ms", "minijax_ms", "minijax_host_ms", "max_diff"}]}`: the median wall time of
one eager call after a warm-up, its result waited for.

On a CPU it runs at small sizes (`--smoke`, for tests/accelerator_eager_test.py).
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
PATH = ROOT / "chapters" / "data" / "eager-tpu.json"

# name -> (operation of a module and two operands, whether the host path is timed: NumPy's
# bfloat16 matmul is software, minutes at 4096)
OPS = {
    "add": (lambda m, x, y: x + y, True),
    "exp": (lambda m, x, y: m.numpy.exp(x), True),
    "sum": (lambda m, x, y: m.numpy.sum(x, axis=0), True),
    "matmul": (lambda m, x, y: x @ y, False),
    "transpose": (lambda m, x, y: x.T, True),
}


def _median_ms(f, reps: int) -> float:
    import jax
    jax.block_until_ready(f())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        getattr(out, "block_until_ready", lambda: None)()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run(out: Path, *, n: int = 4096, dtype: str = "bfloat16", reps: int = 20) -> dict:
    """Time each of OPS on two [n, n] arrays of `dtype` already in device memory."""
    import jax
    import ml_dtypes

    import minijax
    from minijax import dispatch
    rng = np.random.default_rng(0)
    np_dtype = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    a, b = (rng.standard_normal((n, n)).astype(np_dtype) for _ in range(2))
    ja, jb = jax.device_put(a), jax.device_put(b)
    ident = minijax.jit(lambda x: x)
    ma, mb = ident(a), ident(b)  # jitted results: held in the device's memory
    dev = jax.devices()[0]
    result = {"device_kind": dev.device_kind, "platform": dev.platform, "jax": jax.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "ops": []}
    for name, (op, host_too) in OPS.items():
        want = np.asarray(op(jax, ja, jb), np.float32)
        got = np.asarray(op(minijax, ma, mb), np.float32)
        row = {"name": name, "shape": [n, n], "dtype": dtype,
               "jax_ms": _median_ms(lambda op=op: op(jax, ja, jb), reps),
               "minijax_ms": _median_ms(lambda op=op: op(minijax, ma, mb), reps),
               "minijax_host_ms": None,
               "max_diff": float(np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want))))}
        if host_too:
            saved = list(dispatch._default_platform)
            dispatch._default_platform[:] = ["cpu"]  # the host path, for comparison
            try:
                # fresh copies: the host path caches an operand's host copy, which would
                # hide the transfer
                def fresh(op=op):
                    return op(minijax, ident(a), ident(b))
                row["minijax_host_ms"] = _median_ms(fresh, max(3, reps // 4)) - _median_ms(
                    lambda: (ident(a), ident(b))[1], max(3, reps // 4))
            finally:
                dispatch._default_platform[:] = saved
        result["ops"].append(row)
        print(f"{name:10s} jax {row['jax_ms']:9.3f} ms  minijax {row['minijax_ms']:9.3f} ms  "
              f"host path {row['minijax_host_ms'] or float('nan'):9.3f} ms  "
              f"diff {row['max_diff']:.1e}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def load(path: Path = PATH) -> dict | None:
    return json.loads(Path(path).read_text()) if Path(path).exists() else None


def show(path: Path = PATH) -> None:
    """Print the saved run, or say that no accelerator was used."""
    saved = load(path)
    if saved is None:
        print("No accelerator was used: no eager run on a TPU is saved.")
        return
    print(f"eager operations on {saved['device_kind']} (JAX {saved['jax']}, {saved['date']})")
    print(f"{'op':10s}{'shape':>14s}  {'JAX ms':>9s}{'minijax ms':>12s}{'host path ms':>14s}")
    for r in saved["ops"]:
        host = r["minijax_host_ms"]
        host = f"{host:14.3f}" if host is not None else f"{'-':>14s}"
        shape = "x".join(map(str, r["shape"])) + " " + r["dtype"][:4]
        print(f"{r['name']:10s}{shape:>14s}  {r['jax_ms']:9.3f}{r['minijax_ms']:12.3f}{host}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=PATH)
    p.add_argument("--smoke", action="store_true", help="small arrays, on any device")
    args = p.parse_args(argv)
    from tools._chip import no_accelerator
    if no_accelerator(f"nothing measured, {args.out} not written", allow=args.smoke):
        return 0
    if args.smoke:
        from minijax import dispatch
        dispatch._default_platform[:] = ["tpu"]  # the CPU stands in for the chip
        run(args.out, n=64, dtype="float32", reps=3)
    else:
        run(args.out)
    show(args.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
