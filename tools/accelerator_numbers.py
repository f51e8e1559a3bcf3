"""Accelerator numbers for chapters 16, 23 and 24: measured on a GPU, saved, read back.

    .venv/bin/python tools/accelerator_numbers.py [--out chapters/data/accelerator.json]

Where `jax.devices()[0].platform == "gpu"` it measures, in one process:
- **memory** (chapter 23): `memory_stats()` of the device before and after the first operation,
  and one real out-of-memory report: an array larger than the allocator's pool, made under
  minijax and JAX, its `RESOURCE_EXHAUSTED` message kept;
- **flash_attention** (chapter 16): the FlashAttention kernel of `compare/_pallas_kernels.py`,
  compiled by JAX's Triton backend (`interpret=False`), forward and forward+backward against
  `jax.nn.dot_product_attention` (XLA's and cuDNN's implementations), in TFLOP/s and as a
  fraction of the device's dense bf16 peak (`PEAK_BF16_TFLOPS`); minijax's Pallas has no GPU
  compiler, and the file records the error it raises when asked for one;
- **offload** (chapter 24): `device_put` device -> pinned_host -> device for a few sizes, in
  GB/s, under both modules.
It writes them, with the device kind and the JAX version, to `--out`. Without a GPU it
measures nothing, writes nothing and says so; chapters 16, 23 and 24 then print that no
accelerator was used (`show`). What a CPU can check, tests/accelerator_numbers_test.py does:
every measurement at tiny sizes in interpret mode, and the GPU kernels lowered for CUDA
(`lower(lowering_platforms=("cuda",))` needs no GPU) to Triton calls; Triton's compile to PTX
and the timings need the GPU.

How to run this on a GPU: on a machine with an NVIDIA GPU (Hopper or newer gives the numbers
the chapters discuss; Triton needs Ampere or newer), install JAX's CUDA build of the pinned
version into the project's environment (`.venv/bin/python -m pip install "jax[cuda12]==0.10.2"`),
check that `.venv/bin/python -c "import jax; print(jax.devices())"` lists a CUDA device, and
run `.venv/bin/python tools/accelerator_numbers.py` from the repository root, in a fresh process
with no other program holding the GPU and `XLA_PYTHON_CLIENT_*` unset (the memory numbers assume
the default allocator). It takes a few minutes (a Triton and an XLA compile per shape;
`--seqs 512,2048` shortens it), prints its tables and writes `chapters/data/accelerator.json`.
Commit that file; then `make chapter N=16` (and 23, 24) fails until the shown outputs are
refreshed with `.venv/bin/python tools/update_chapter_outputs.py chapters/16-pallas.md` (and
the other two), which prints the saved tables into the chapters.
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
PATH = ROOT / "chapters" / "data" / "accelerator.json"

# Dense (no 2:4 sparsity) BF16 tensor-core peaks, TFLOP/s: NVIDIA's datasheets list them with
# sparsity, twice these figures (H100 SXM and H200: 1,979; H100 PCIe: 1,513; H100 NVL: 1,671;
# A100: 624; L4: 242; B200 (HGX): 4,500). Matched against `device_kind` in this order, the
# specific names first (H200 and "H100 PCIe" before "H100").
PEAK_BF16_TFLOPS = (("H200", 989.5), ("H100 PCIe", 756.5), ("H100 NVL", 835.5), ("H100", 989.5),
                    ("B200", 2250.0), ("A100", 312.0), ("L4", 121.0))
PEAK_SOURCE = ("NVIDIA datasheets (H100, H200, A100, L4, HGX B200), dense BF16 tensor core = "
               "half the with-sparsity figure")


GPU_BLOCK = 64  # query and key block rows of the FlashAttention kernels on a GPU


def gpu_compiler_params():
    """Triton's compiler parameters for the kernels: passing them picks the Triton backend
    (the kernels use Triton-style masked loads and dots on blocks in registers)."""
    from jax.experimental.pallas import triton as jplgpu
    return jplgpu.CompilerParams(num_warps=4, num_stages=2)


def peak_tflops(device_kind: str) -> float | None:
    """The dense bf16 peak of `device_kind` (e.g. "NVIDIA H200"), or None if not in the table."""
    for name, peak in PEAK_BF16_TFLOPS:
        if name.lower() in device_kind.lower():
            return peak
    return None


def attention_flops(batch_heads: int, seq: int, d: int, *, causal: bool, backward: bool) -> float:
    """Matmul FLOPs of attention: forward QK^T and PV, 2 matmuls of 2*seq*seq*d per head; the
    backward adds 5 more (S recomputed, dV, dP, dQ, dK), so forward+backward is 3.5 times the
    forward. A causal mask halves both (the FlashAttention papers count the same way)."""
    fwd = 4.0 * batch_heads * seq * seq * d * (0.5 if causal else 1.0)
    return fwd * 3.5 if backward else fwd


def median_seconds(J, fn, *args, reps: int) -> float:
    """Median wall time of `fn(*args)` (already warmed up once), waiting for its outputs."""
    J.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        J.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _modules():
    import jax

    import minijax
    return (("minijax", minijax), ("jax", jax))


# ------------------------------------------------------------------ chapter 23: memory
def measure_memory(oom_bytes: int | None = None) -> dict:
    """`memory_stats()` before and after the process's first operation (a 1024x1024 matmul under
    minijax.jit), then an array of `oom_bytes` (default: the pool's `bytes_limit` + 1 GiB) made
    under each module; the error each raised is kept (its first 60 lines)."""
    _, minijax = _modules()[0]
    dev = minijax.devices()[0]
    before = dev.memory_stats()
    y = minijax.jit(lambda t: t @ t)(np.ones((1024, 1024), np.float32))
    minijax.block_until_ready(y)
    after = dev.memory_stats()
    if oom_bytes is None:
        if after is None:
            raise ValueError(f"measure_memory: {dev.device_kind} keeps no memory_stats(), so "
                             "there is no pool to go past; pass oom_bytes")
        oom_bytes = after["bytes_limit"] + 2**30
    report = {"first_op": "minijax.jit(lambda t: t @ t) of f32[1024,1024]",
              "before_first_op": before, "after_first_op": after,
              "oom_requested_bytes": oom_bytes, "oom": {}}
    for name, J in _modules():
        try:
            J.block_until_ready(J.jit(lambda J=J: J.numpy.zeros((oom_bytes // 4,), np.float32))())
            report["oom"][name] = None  # it fitted: no report
        except Exception as e:  # jaxlib's JaxRuntimeError
            report["oom"][name] = "\n".join(f"{type(e).__name__}: {e}".splitlines()[:60])
    return report


# ------------------------------------------------------------------ chapter 16: FlashAttention
def measure_flash(seqs, dims, *, tokens: int, hidden: int, block: int, causal: bool = True,
                  dtype=np.float32, interpret: bool, compiler_params=None, reps: int) -> dict:
    """FlashAttention (compare/_pallas_kernels.py) against `jax.nn.dot_product_attention`, for
    q, k, v of `dtype` with `tokens // seq` sequences of `seq` tokens and `hidden // d` heads of
    dimension `d`. One row per shape and implementation; a row that failed holds its error."""
    import jax
    from jax.experimental import pallas as jpl
    from jax.experimental.pallas import triton as jplgpu

    from compare import _pallas_kernels
    K = _pallas_kernels.build(jax, jpl, jplgpu, interpret=interpret,
                             compiler_params=compiler_params)
    rng = np.random.default_rng(0)
    rows = []
    for seq in seqs:
        for d in dims:
            b, n = max(1, tokens // seq), hidden // d
            q4, k4, v4, do4 = (jax.device_put(rng.standard_normal((b, seq, n, d)).astype(dtype))
                               for _ in range(4))
            per_head = [x.transpose(0, 2, 1, 3).reshape(b * n, seq, d) for x in (q4, k4, v4, do4)]

            def pallas(q, k, v):
                return K.flash_attention(q, k, v, block, block, causal)

            impls = [("pallas", pallas, per_head)]
            for impl in ("xla", "cudnn"):
                def dpa(q, k, v, impl=impl):
                    return jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                                        implementation=impl)
                impls.append((f"dot_product_attention {impl}", dpa, (q4, k4, v4, do4)))
            reference = None
            for label, f, (q, k, v, do) in impls:
                row = {"seq": seq, "d": d, "batch": b, "heads": n, "impl": label,
                       "dtype": np.dtype(dtype).name, "causal": causal}
                if label == "pallas":
                    row["block"] = block
                try:
                    fwd = jax.jit(f)
                    both = jax.jit(lambda q, k, v, do, f=f: jax.vjp(f, q, k, v)[1](do))
                    out = np.asarray(fwd(q, k, v), np.float32)
                    if label == "pallas":
                        out = out.reshape(b, n, seq, d).transpose(0, 2, 1, 3)
                    if reference is None and label != "pallas":
                        reference = out
                    row["out"] = out
                    for key, g, args, bwd in (("fwd", fwd, (q, k, v), False),
                                              ("fwd_bwd", both, (q, k, v, do), True)):
                        s = median_seconds(jax, g, *args, reps=reps)
                        row[f"{key}_ms"] = 1e3 * s
                        row[f"{key}_tflops"] = attention_flops(
                            b * n, seq, d, causal=causal, backward=bwd) / s / 1e12
                except Exception as e:  # a backend that cannot run this shape
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                rows.append(row)
            for row in rows[-len(impls):]:  # agreement with XLA's attention, in float32
                out = row.pop("out", None)
                if out is not None and reference is not None:
                    row["max_abs_diff_vs_xla"] = float(np.max(np.abs(out - reference)))
    return {"rows": rows, "minijax": minijax_pallas_compiled()}


def minijax_pallas_compiled() -> str:
    """What minijax's Pallas says when asked to compile a kernel (`interpret=False`)."""
    _, minijax = _modules()[0]
    from compare import _pallas_kernels
    from minijax.experimental import pallas as mpl
    from minijax.experimental.pallas import triton as mplgpu
    M = _pallas_kernels.build(minijax, mpl, mplgpu, interpret=False)
    x = np.ones((1, 256, 128), np.float32)  # blocks a TPU can tile: the compile is what fails
    try:
        M.flash_forward(x, x, x, bq=128, bk=128)
    except ValueError as e:
        return f"ValueError: {e}"
    return "compiled"  # minijax grew a GPU backend: measure it too


# ------------------------------------------------------------------ chapter 24: offloading
def measure_offload(sizes_mib, *, reps: int) -> dict:
    """`device_put` of f32 arrays of `sizes_mib` MiB from device memory to pinned_host and back,
    median time and GB/s (1e9 bytes/s) per direction, under both modules. Each timed copy moves
    a fresh array computed on the device, so neither module can reuse a host copy it kept
    (both copy buffer to buffer: minijax's `compiler.copy_buffer`, JAX's
    `batched_copy_array_to_devices_with_sharding`; minijax's rows in the TPU run of 1421a8b
    predate that: its copies back to the device went through a NumPy array on the host)."""
    rows = []
    for name, J in _modules():
        S, dev = J.sharding.SingleDeviceSharding, J.devices()[0]
        host, device = S(dev, memory_kind="pinned_host"), S(dev)
        for mib in sizes_mib:
            fresh = J.jit(lambda i, J=J, n=mib * 2**18: J.numpy.arange(n, dtype=np.float32) + i)
            x = J.block_until_ready(fresh(0))
            back = J.device_put(J.device_put(x, host), device)
            row = {"module": name, "mib": mib, "bytes": mib * 2**20,
                   "round_trip_equal": bool(np.array_equal(np.asarray(back), np.asarray(x))),
                   "host_kind": J.device_put(x, host).sharding.memory_kind}
            times = {"to_host": [], "to_device": []}
            for i in range(reps + 1):  # the first of each is a warm-up
                x = J.block_until_ready(fresh(i))
                t0 = time.perf_counter()
                h = J.block_until_ready(J.device_put(x, host))
                t1 = time.perf_counter()
                J.block_until_ready(J.device_put(h, device))
                t2 = time.perf_counter()
                times["to_host"].append(t1 - t0)
                times["to_device"].append(t2 - t1)
            for key, ts in times.items():
                s = statistics.median(ts[1:])
                row[f"{key}_ms"], row[f"{key}_gbs"] = 1e3 * s, mib * 2**20 / s / 1e9
            rows.append(row)
    return {"rows": rows}


# ------------------------------------------------------------------ the chapters read it back
def load(path: Path = PATH) -> dict | None:
    """The saved measurements, or None when there are none (no GPU run has written them)."""
    return json.loads(Path(path).read_text()) if Path(path).exists() else None


def show(section: str, path: Path = PATH) -> None:
    """Print `section` ("flash_attention", "memory" or "offload") of the saved file as a table,
    or say that no accelerator was used."""
    if section not in ("flash_attention", "memory", "offload"):
        raise ValueError(f"show: no section {section!r}; the saved run has 'flash_attention', "
                         "'memory' and 'offload'")
    saved = load(path)
    if saved is None:
        where = Path(path).resolve()
        where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
        print(f"No accelerator was used: there is no saved GPU run ({where}),"
              "\nso nothing on this page was measured on a GPU.")
        return
    print(f"{saved['device_kind']}, JAX {saved['jax_version']}, measured {saved['date']}")
    data = saved.get(section, {"error": "not measured (the run stopped before it)"})
    if "error" in data:
        print(f"{section}: {data['error']}")
        return
    if section == "flash_attention":
        peak = saved.get("peak_bf16_tflops")
        print(f"peak (dense bf16): {peak} TFLOP/s, from {saved['peak_source']}" if peak else
              f"peak (dense bf16): {saved['device_kind']} is not in PEAK_BF16_TFLOPS")
        print(f"{'seq':>5} {'d':>4} {'implementation':28}{'fwd ms':>9}{'TFLOP/s':>9}{'of peak':>8}"
              f"{'f+b ms':>9}{'TFLOP/s':>9}{'of peak':>8}")
        for r in data["rows"]:
            head = f"{r['seq']:5d} {r['d']:4d} {r['impl']:28}"
            if "error" in r:
                print(head + r["error"][:60])
                continue
            cells = ""
            for key in ("fwd", "fwd_bwd"):
                frac = f"{r[key + '_tflops'] / peak:8.1%}" if peak else f"{'-':>8}"
                cells += f"{r[key + '_ms']:9.3f}{r[key + '_tflops']:9.1f}{frac}"
            print(head + cells)
        print("minijax, interpret=False:", data["minijax"])
    elif section == "memory":
        keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "largest_free_block_bytes")
        for when in ("before_first_op", "after_first_op"):
            stats = data[when] or {}
            print(f"{when.replace('_', ' '):16s}", {k: stats.get(k) for k in keys})
        print(f"out of memory, asking for {data['oom_requested_bytes'] / 2**30:.1f} GiB:")
        for name, message in data["oom"].items():
            lines = (message or "no error").splitlines()
            print(f"  {name}: " + "\n    ".join(lines[:12]))
    else:
        print(f"{'module':8} {'MiB':>6} {'to pinned_host GB/s':>20} {'to device GB/s':>15}")
        for r in data["rows"]:
            print(f"{r['module']:8} {r['mib']:6d} {r['to_host_gbs']:20.1f} "
                  f"{r['to_device_gbs']:15.1f}")


# ------------------------------------------------------------------ the script
def run(out: Path, *, seqs, dims, reps: int, tokens: int, hidden: int, block: int, dtype,
        interpret: bool, compiler_params, offload_mib, oom_bytes: int | None = None) -> dict:
    """Measure the three sections in order (memory first: nothing has run on the device yet),
    saving `out` after each, so a run cut short keeps what it measured; a section that raised
    is saved as its error. Returns the results."""
    import jax
    dev = jax.devices()[0]
    results = {"device_kind": dev.device_kind, "platform": dev.platform,
               "jax_version": jax.__version__,
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
               "peak_bf16_tflops": peak_tflops(dev.device_kind), "peak_source": PEAK_SOURCE}
    sections = (
        ("memory", lambda: measure_memory(oom_bytes)),
        ("flash_attention", lambda: measure_flash(
            seqs, dims, tokens=tokens, hidden=hidden, block=block, dtype=dtype,
            interpret=interpret, compiler_params=compiler_params, reps=reps)),
        ("offload", lambda: measure_offload(offload_mib, reps=reps)))
    out.parent.mkdir(parents=True, exist_ok=True)
    for name, measure in sections:
        t0 = time.perf_counter()
        try:
            results[name] = measure()
        except Exception as e:  # keep the other sections
            results[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
        out.write_text(json.dumps(results, indent=1, default=float) + "\n")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PATH)
    parser.add_argument("--seqs", default="512,1024,2048,4096,8192")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args(argv)
    import jax

    from tools._chip import no_accelerator
    if no_accelerator(f"nothing measured, {args.out} not written", platform="gpu"):
        return 0
    run(args.out, seqs=[int(s) for s in args.seqs.split(",")],
        dims=[int(d) for d in args.dims.split(",")], reps=args.reps, tokens=16384, hidden=2048,
        block=GPU_BLOCK, dtype=jax.numpy.bfloat16, interpret=False,
        compiler_params=gpu_compiler_params(), offload_mib=[16, 256, 1024])
    for section in ("flash_attention", "memory", "offload"):
        show(section, args.out)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a file: `compare` and this checkout's minijax
    sys.exit(main())
