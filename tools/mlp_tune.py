"""A one-process block-size study of the fused expert MLP on a TPU (issue 41), to run on the
chip from the repository root:

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/mlp_tune.py OUT.json [SET ...]

For each shape of each SET (below) it times `fused_mlp_fwd` and the cotangents of `fused_mlp`
(`jax.vjp`, so the forward is dead code for XLA, as in tools/accelerator_tpu.py) at each
candidate tiling, against two `lax.ragged_dot`s + SiLU and their cotangents; it prints each
line as it goes and writes OUT_SET.json. A candidate ("T", ...) traces the kernels with
`SIGMOID_VIA_TANH` set (sigmoid through tanh), a tiling (None,) is the kernels' default.
The docstring of compare/_ragged_kernels.py quotes its results."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax

from compare import _ragged_kernels as RK
from tools import accelerator_tpu as A

# name: (shapes (M, D, F, G), forward candidates, backward candidates)
SETS = {
    "d1024": ([(8192, 1024, 4096, 8)],
              [(128, 4096), (256, 4096), (512, 4096), (256, 2048), (256, 4096, 1024),
               (256, 4096, 256), (512, 4096, 512, 64), (256, 1024)],
              [(256, 2048), (512, 2048), (256, 1024), (512, 1024), (256, 2048, 1024),
               (128, 2048)]),
    "final": ([(8192, 1024, 4096, 8)],
              [("T", 256, 4096), (256, 4096), ("T", 256, 4096, 512, 64)],
              [("T", 128, 2048), (128, 2048)]),
    "sweep2": ([(8192, 1024, 2048, 8), (8192, 2048, 4096, 8), (8192, 512, 4096, 8),
                (8192, 2048, 8192, 8)], [(None,)], [(None,)]),
    "tiny": ([(512, 128, 256, 4)], [(128, 256), ("T", 256, 256, 128, 128)],
             [(256, 128, 128, 128)]),
}


def cotangents(mlp):
    """jit of the cotangents of `mlp(x, w_up, w_down, group_sizes)` at dy."""
    return jax.jit(lambda x, u, w, gs, dy: jax.vjp(
        lambda x, u, w: mlp(x, u, w, gs), x, u, w)[1](dy))


def study(out: Path, b: A.Bench, shapes, fwd_cands, bwd_cands) -> list[dict]:
    R, rows = b.R, []
    for m, d, f, g in shapes:
        sizes = jax.device_put(A.uneven_groups(b.rng, m, g))
        xs, dys = b.normal((m, d)), b.normal((m, d))
        up, down = b.normal((g, d, f), scale=d ** -0.5), b.normal((g, f, d), scale=f ** -0.5)
        ref, ref_g = jax.jit(R.ragged_mlp), cotangents(R.ragged_mlp)
        fwd_args, bwd_args = (xs, up, down, sizes), (xs, up, down, sizes, dys)
        r = {"shape": [m, d, f, g], "fwd": [], "bwd": [],
             "ref_ms": 1e3 * A.median_seconds(ref, *fwd_args, reps=10),
             "refg_ms": 1e3 * A.median_seconds(ref_g, *bwd_args, reps=10)}
        cases = (("fwd", fwd_cands, fwd_args, ref(*fwd_args), "ref_ms",
                  lambda c: jax.jit(lambda x, u, w, gs: R.fused_mlp_fwd(x, u, w, gs, c))),
                 ("bwd", bwd_cands, bwd_args, ref_g(*bwd_args), "refg_ms",
                  lambda c: cotangents(lambda x, u, w, gs: R.fused_mlp(x, u, w, gs, c))))
        for key, cands, args, want, ref_key, make in cases:
            for c in cands:
                tanh = c[0] == "T"
                c = c[1:] if tanh else c
                c = None if c[0] is None else c
                RK.SIGMOID_VIA_TANH = tanh
                t0 = time.perf_counter()
                try:
                    fn = make(c)
                    e = {"tiling": c, "ms": 1e3 * A.median_seconds(fn, *args, reps=8),
                         "err": A.rel_err(fn(*args), want), "tanh": tanh}
                except Exception as ex:  # a tiling Mosaic refuses
                    e = {"tiling": c, "error": A._error(ex)}
                RK.SIGMOID_VIA_TANH = False
                e["s"] = time.perf_counter() - t0
                r[key].append(e)
                print(r["shape"], key, e, "ref", r[ref_key], flush=True)
                out.write_text(json.dumps(rows + [r], default=str))
        rows.append(r)
    return rows


def main() -> None:
    out = Path(sys.argv[1])
    b = A.Bench(interpret=bool(os.environ.get("INTERP")), reps=10, search_reps=4,
                smoke=False)
    for name in sys.argv[2:] or ["d1024"]:
        study(out.with_name(f"{out.stem}_{name}.json"), b, *SETS[name])


if __name__ == "__main__":
    main()
