"""Chapter 26's addition transformer at its 10M size on a TPU: seed bands, what makes 6-digit
training robust, length generalisation with Abacus embeddings, NNX, and the chapter's
tokenisation ablations over seeds, saved as data that the chapter reads back.

    python tools/addition_tpu.py [--out chapters/data/26-addition-tpu.json] [--budget-s 450]
                                 [--smoke] [--phases 1,2,3,4,5] [--merge-into SAVED.json]

One process runs the phases asked for, in this order:

1. seeds: the 10M configuration (`compare/addition.py: SIZES["10M"]`) on 3- and 6-digit sums,
   under raw minijax and raw JAX (`gpt.program`, the same code under both modules), seeds
   0, 1, 2 (each seed draws its own initial weights and its own batches; the modules of a
   seed see the same ones). Each run trains until its validation exact match reaches
   `--stop-at` or the configuration's step count, evaluating every 100 steps: the first
   evaluated step at 99%, the test exact match (5,000 held-out sums), training seconds and the
   loss curve (mean loss per 50 steps).
2. robustness: 6-digit sums under raw JAX with one change each: matmuls at
   `precision="highest"` (float32 passes instead of the TPU's default single bf16 pass; only
   on the seeds that missed 99% in phase 1, its step being slower), a five times longer
   warmup, a lower peak learning rate; on two seeds, those that missed 99% first.
3. length generalisation: operands of 1 to 10 digits (lengths drawn independently), all three
   numbers written least significant digit first and unpadded, tested on sums of two 20-digit
   numbers. Abacus embeddings (McLeish et al. 2024, "Transformers Can Do Arithmetic with the
   Right Embeddings"): each digit gets a learned embedding for its place within its number
   (units 1, tens 2, ...), shifted by a random offset in 1..ABACUS_OFFSET per training sum so
   that places beyond 10 are trained too; no other position embedding. Tested at offset 1
   (the lowest trained: the answer's low places then sit where training saw them least) and
   at random offsets, each test sum's drawn so that all its places were trained.
   One change of ours: '=' takes the place just below the units (the offset, never 0, the
   place of '+' and '.'), so that every answer digit, the units included, is predicted from
   the position one place below it. Every run trains all its steps (the learning rate
   schedule spans them; no stop at a validation level, as what matters is the longer
   sums). Under raw JAX, then the baseline (the same data and model with learned absolute
   positions, raw JAX, as many steps), then raw minijax. A saved result from the earlier
   plan, which stopped at 99.5% validation, is kept as `length_generalisation_early_stop`.
   This phase writes `LENGEN_KEY` (offsets 1..20); the offset sweep that reached 20-digit
   sums is `tools/abacus_small.py --scale tpu`, whose best variant's summary is the file's
   "length_generalisation".
4. NNX: the chapter 20 Flax NNX model with Optax on 3- and 6-digit sums, seeds 0, 1, 2, when
   flax and optax import (the step compiled once per digit count).
5. ablations: chapter 26's tokenisation ablations (`addition.ABLATIONS` and the default
   format) at the chapter's default size, raw JAX, seeds 0, 1, 2, every run to its last step.

`--budget-s` counts from the start of the process: a run starts only when its estimated time
(measured ms a step, else a guess, plus a compile) fits what is left less what the plan keeps
for the later phases asked for (`Plan.phase_s`), and a run that reaches the deadline stops
there and says so (`cut`). The JSON is written after every run. With `--merge-into`, the
process starts from a saved result: its runs are kept, the runs it already has are not redone,
its measured step and compile times start the estimates, and the merged whole is written to
`--out` (a saved result from another device kind, stop level or plan is refused). Without a
TPU the script trains nothing unless `--smoke` (a tiny model, a few steps, every phase and
change: the code path, for tests/addition_tpu_test.py). On the TPU machine (the project is not
installed; flax and optax, for phase 4, under /tmp/site), from the repository root:

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PYTHONPATH:/tmp/site timeout 540 python3 \\
        tools/addition_tpu.py --phases 2,3,4,5 --budget-s 500 \\
        --merge-into chapters/data/26-addition-tpu.json --out $OUT/26-addition-tpu.json

and commit the file as `chapters/data/26-addition-tpu.json`, then refresh chapter 26's shown
outputs with `tools/update_chapter_outputs.py chapters/26-*.md`.

The file: `{"device_kind", "jax", "date", "params", "config", "sessions": [{"phases",
"date", "jax", "budget_s", "wall_s"}], "runs": [{"impl", "digits", "seed", "steps_to_99",
"test_exact_match", "train_s", "curve", "val", "steps", "ms_per_step", "cut"}],
"robustness": [{"variant", ...the same keys}], LENGEN_KEY: {"method", "train_digits",
"test_digits", "impl": {"minijax", "jax"}, "baseline", "runs": [...]}, "length_generalisation":
{"method", "variant", "train_digits", "test_digits", "impl", "seeds", "baseline", "source", ...}
(written by tools/abacus_small.py --summarise-into, not by this script), "ablations":
[{"format", ...the same keys}]}`; `curve` is [[step, mean loss over the steps up
to it]], `val` [[step, validation exact match]].
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.append(str(ROOT))

PATH = ROOT / "chapters" / "data" / "26-addition-tpu.json"
START = time.perf_counter()

SEEDS = (0, 1, 2)
ROBUST_SEEDS = (0, 1)
VARIANTS = {  # name -> (gpt.Config changes, matmul precision)
    "precision highest": ({}, "highest"),
    "warmup 1000": ({"warmup": 1000}, None),
    "peak lr 3e-4": ({"peak_lr": 3e-4, "end_lr": 3e-5}, None),
}
ABACUS_OFFSET = 20      # training offsets 1..20: places up to 31 are trained
LENGEN_STEPS = 8000     # every length-generalisation run trains this many steps
# where phase 3 keeps its runs; "length_generalisation" itself holds the best method's summary,
# written by `tools/abacus_small.py --scale tpu --summarise-into` (offsets 1..100)
LENGEN_KEY = "length_generalisation_offsets_20"
CURVE_EVERY = 50
FIRST_LOSSES = 50       # kept step by step: where two modules' runs of a seed part


# ---------------------------------------------------------------------------------------------
# One way to train: a Trainer per module, model and compiled step shape
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Trainer:
    """What a run needs: `init(seed) -> state`, `step(state, x, y) -> (state, loss)`,
    `predict(state, x) -> int32[B, T]` (argmax next tokens), and the module `J`."""

    J: Any
    init: Callable
    step: Callable
    predict: Callable
    compile_s: float = 0.0


def raw_trainer(J, cfg, seq_len: int, *, precision: str | None = None,
                abacus_places: int = 0, inject: bool = False) -> Trainer:
    """The hand-written GPT and AdamW of `gpt.program` under module J, its step compiled once
    for int32[batch, seq_len] (under `precision` when given). With `abacus_places` P, the
    absolute position table is dropped and a table `wab` of P place embeddings added: the
    inputs are then `token * P + place` (see `abacus_tokens`), embedded as wte[token] +
    wab[place], which keeps `gpt.program`'s forward unchanged. With `inject`, input injection
    (McLeish et al. 2024): the embeddings are added again to the input of every block after
    the first, the forward assembled from `gpt.program`'s embed, block and head."""
    from compare import addition, gpt

    prog = gpt.program(J, cfg, ignore_id=addition.IGNORE)
    jnp = J.numpy

    def forward(params, x):
        if not inject:
            return prog["forward"](params, x)[0]
        h0 = prog["embed"](params, x)
        h, mask = h0, jnp.tril(jnp.ones((x.shape[1], x.shape[1]), bool))
        for i, blk in enumerate(params["blocks"]):
            h = prog["block"](blk, h if i == 0 else h + h0, mask)[0]
        return prog["head"](params, h)

    def model_params(params):
        if not abacus_places:
            return params
        wte = (params["wte"][:, None, :] + params["wab"][None, :, :]).reshape(-1, cfg.d_model)
        rest = {k: v for k, v in params.items() if k != "wab"}
        return {**rest, "wte": wte, "wpe": jnp.zeros((cfg.block, cfg.d_model), np.float32)}

    def train_step(params, opt, x, y):
        value, grads = J.value_and_grad(
            lambda p: prog["cross_entropy"](forward(model_params(p), x), y))(params)
        params, opt, _ = prog["adamw"](params, grads, opt)
        return params, opt, value

    def init(seed):
        params = gpt.init_params(cfg, seed)
        if abacus_places:
            del params["wpe"]
            rng = np.random.RandomState(seed + 1000)
            params["wab"] = (rng.standard_normal((abacus_places, cfg.d_model)) * 0.02).astype(
                np.float32)
        params = J.device_put(params)
        return params, prog["init_opt"](params)

    zeros = J.device_put(np.zeros((cfg.batch, seq_len), np.int32))
    with J.default_matmul_precision(precision):
        compiled, stages = gpt.stage_times(J, train_step, (*init(0), zeros, zeros))
    predict = J.jit(lambda p, x: jnp.argmax(forward(model_params(p), x),
                                            axis=-1).astype(np.int32))

    def step(state, x, y):
        params, opt, loss = compiled(*state, x, y)
        return (params, opt), loss
    return Trainer(J, init, step, lambda state, x: predict(state[0], x),
                   stages["trace_lower_s"] + stages["compile_s"])


def nnx_trainer(s) -> Trainer:
    """The chapter 20 NNX model and Optax AdamW (`addition.nnx_runner`). Each seed gets a
    fresh model and optimizer state, built around the first seed's Optax transformation: the
    optimizer's graph then hashes the same, and `nnx.jit` compiles the step once for all
    seeds (a new `optax.chain` per seed would compile it again each time)."""
    import jax
    from flax import nnx

    from compare import _gpt_nnx as gpt_nnx, addition, gpt

    _, prog, first = addition.nnx_runner(s, gpt.init_params(s.model, 0))

    def init(seed):
        model = gpt_nnx.GPT(s.model, gpt.init_params(s.model, seed))
        return model, nnx.Optimizer(model, first[1].tx, wrt=nnx.Param)

    def step(state, x, y):
        return state, prog["train_step"](*state, x, y)
    return Trainer(jax, init, step, lambda state, x: prog["predict"](state[0], x))


def predict_all(tr: Trainer, state, x: np.ndarray, chunk: int) -> np.ndarray:
    """Predictions for every row of x, in fixed-size chunks (one compile per shape)."""
    out = []
    for i in range(0, len(x), chunk):
        part = x[i:i + chunk]
        pad = np.zeros((chunk - len(part), x.shape[1]), np.int32)
        out.append(np.asarray(tr.predict(state, np.concatenate([part, pad])))[:len(part)])
    return np.concatenate(out)


def exact_match(pred: np.ndarray, y: np.ndarray) -> float:
    from compare.addition import IGNORE
    return float(((pred == y) | (y == IGNORE)).all(axis=1).mean())


# ---------------------------------------------------------------------------------------------
# A run, under a clock
# ---------------------------------------------------------------------------------------------

class Clock:
    def __init__(self, budget_s: float):
        self.deadline = START + budget_s

    def left(self) -> float:
        return self.deadline - time.perf_counter()


class Batches:
    """The training batches of one (task, seed), drawn once and shared by the modules."""

    def __init__(self, stream):
        self.stream, self.seen = stream, []

    def __getitem__(self, i):
        while len(self.seen) <= i:
            self.seen.append(next(self.stream))
        return self.seen[i]


def train_run(tr: Trainer, seed: int, batches: Batches, val, test, *, max_steps: int,
              eval_every: int, stop_at: float, clock: Clock, chunk: int,
              extra: Callable | None = None) -> dict:
    """Train from `tr.init(seed)` until the validation exact match reaches `stop_at`, the
    step count or the deadline; val and test are (x, y) pairs. `extra(state)`, when given,
    returns more entries for the row, from the trained state."""
    J = tr.J
    t_run = time.perf_counter()
    state = tr.init(seed)
    pending, losses, curve, val_curve = [], [], [], []
    train_s, first_s, steps_to_99, cut, step = 0.0, 0.0, None, False, 0
    for step in range(1, max_steps + 1):
        x, y = batches[step - 1]
        t0 = time.perf_counter()
        state, loss = tr.step(state, x, y)
        pending.append(loss)
        if step == 1:  # NNX compiles its step here; the raw steps are compiled already
            losses.append(float(J.block_until_ready(pending.pop())))
            first_s = time.perf_counter() - t0
            continue
        if step % eval_every and step < max_steps:
            train_s += time.perf_counter() - t0
            continue
        losses += [float(v) for v in J.block_until_ready(pending)]
        pending = []
        train_s += time.perf_counter() - t0
        em = exact_match(predict_all(tr, state, val[0], chunk), val[1])
        val_curve.append([step, em])
        if steps_to_99 is None and em >= 0.99:
            steps_to_99 = step
        cut = clock.left() < 0
        if em >= stop_at or cut:
            break
    curve = [[min(i + CURVE_EVERY, len(losses)), float(np.mean(losses[i:i + CURVE_EVERY]))]
             for i in range(0, len(losses), CURVE_EVERY)]
    out = {"seed": seed, "steps_to_99": steps_to_99,
           "test_exact_match": exact_match(predict_all(tr, state, test[0], chunk), test[1]),
           "train_s": round(train_s, 3), "first_step_s": round(first_s, 3),
           "ms_per_step": round(1e3 * train_s / max(step - 1, 1), 3),
           "steps": step, "cut": cut, "curve": curve, "val": val_curve,
           "final_loss": losses[-1], "first_losses": losses[:FIRST_LOSSES]}
    if extra is not None:
        out.update(extra(state))
    out["wall_s"] = round(time.perf_counter() - t_run, 3)
    return out


# ---------------------------------------------------------------------------------------------
# Length generalisation: Abacus places on unpadded, reversed sums
# ---------------------------------------------------------------------------------------------

def abacus_encode(a: list[int], b: list[int], length: int, offsets: np.ndarray):
    """Sums a+b (Python ints, any size), each number written least significant digit first
    and unpadded, the answer closed by '.', the row filled with '.' to `length` tokens ->
    (x, places, y), int32[N, length-1] each: the tokens, each token's place (1 for units, 2
    for tens, ..., plus the row's offset; the offset itself for '=', which is where the
    answer's units are written from; 0 for '+' and '.'), and the targets (the answer and its
    '.'; IGNORE elsewhere)."""
    width = max(len(str(v)) for v in list(a) + list(b))
    return encode_digits(*digits_of(a, width), *digits_of(b, width), length, offsets)


def digits_of(nums: list[int], width: int) -> tuple[np.ndarray, np.ndarray]:
    """(int32[N, width], int[N]): each number's digits, least significant first and zero
    past its length, and its length."""
    text = [str(v)[::-1] for v in nums]
    out = np.zeros((len(text), width), np.int32)
    for i, s in enumerate(text):
        out[i, :len(s)] = np.frombuffer(s.encode(), np.uint8) - ord("0")
    return out, np.array([len(s) for s in text])


def encode_digits(da, la, db, lb, length: int, offsets: np.ndarray):
    """`abacus_encode` from digit arrays (`digits_of`'s form), without a loop over rows."""
    from compare.addition import END, EQUALS, IGNORE, PLUS
    n, width = da.shape
    da = np.pad(da, ((0, 0), (0, 1)))
    db = np.pad(db, ((0, 0), (0, 1)))
    ds, carry = np.zeros_like(da), 0
    for j in range(width + 1):             # schoolbook addition, column by column
        total = da[:, j] + db[:, j] + carry
        ds[:, j], carry = total % 10, total // 10
    top = np.maximum(la, lb)
    ls = top + (ds[np.arange(n), top] > 0)
    la, lb, ls = la[:, None], lb[:, None], ls[:, None]
    j = np.arange(length)[None, :]
    kb, ks = j - la - 1, j - la - lb - 2  # the digit index within b and within the answer
    pick = lambda d, k: np.take_along_axis(d, np.clip(k, 0, width), axis=1)
    in_a, in_b, in_s = j < la, (kb >= 0) & (kb < lb), (ks >= 0) & (ks < ls)
    seq = np.select([in_a, j == la, in_b, j == la + lb + 1, in_s],
                    [pick(da, j), PLUS, pick(db, kb), EQUALS, pick(ds, ks)], END)
    place = np.select([in_a, in_b, in_s], [j + 1, kb + 1, ks + 1], 0)
    place = np.where(place > 0, place + offsets[:, None], 0)
    place = np.where(j == la + lb + 1, offsets[:, None], place)  # '=': the place below units
    scored = (ks[:, 1:] >= 0) & (ks[:, 1:] <= ls)   # the answer digits and the '.' after
    y = np.where(scored, seq[:, 1:], IGNORE)
    return (seq[:, :-1].astype(np.int32), place[:, :-1].astype(np.int32),
            y.astype(np.int32))


def abacus_tokens(x: np.ndarray, places: np.ndarray, n_places: int) -> np.ndarray:
    """The model's input for token and place: token * n_places + place."""
    return x * n_places + places


def random_digits(rng: np.random.RandomState, lengths: np.ndarray, width: int):
    """Numbers of the given digit counts, as `digits_of` writes them: uniform digits, the
    leading one nonzero (any digit for a 1-digit number)."""
    n = len(lengths)
    d = rng.randint(0, 10, size=(n, width)).astype(np.int32)
    d[np.arange(n), lengths - 1] = np.where(lengths > 1, rng.randint(1, 10, size=n),
                                            d[np.arange(n), lengths - 1])
    d[np.arange(width)[None, :] >= lengths[:, None]] = 0
    return d, lengths


def lengen_sets(train_digits: int, test_digits: int, n: int, seed: int = 0) -> dict:
    """Validation sums of two train_digits-digit numbers, test sums of two test_digits-digit
    ones (offset 1, the lowest trained: '=' at place 1, the digits at places
    2..test_digits+2), and `test_offsets`: the same test sums, each at a random offset in
    1..max_test_offset (every place of the sum trained)."""
    rng = np.random.RandomState(seed + 21)
    out = {}
    for name, k in (("val", train_digits), ("test", test_digits)):
        ks = np.full(n, k)
        digits = (*random_digits(rng, ks, k), *random_digits(rng, ks, k))
        out[name] = encode_digits(*digits, 3 * k + 4, np.ones(n, np.int64))
    offsets = rng.randint(1, max_test_offset(train_digits, test_digits) + 1, size=n)
    out["test_offsets"] = encode_digits(*digits, 3 * test_digits + 4, offsets)
    return out


def max_test_offset(train_digits: int, test_digits: int) -> int:
    """The largest offset at which a test_digits-digit sum (its answer one digit longer)
    uses only places training reached (up to ABACUS_OFFSET + train_digits + 1)."""
    return ABACUS_OFFSET + train_digits - test_digits


def lengen_ladder(train_digits: int, test_digits: int, n: int, seed: int = 0) -> dict:
    """{k: (x, places, y)}: n sums of two k-digit numbers for k between the trained and the
    tested length (a quarter, half and three quarters of the way), each row as long as a
    test_digits-digit sum's, so that one compiled prediction serves every k."""
    rng = np.random.RandomState(seed + 22)
    span = test_digits - train_digits
    ks = sorted({train_digits + round(f * span) for f in (0.25, 0.5, 0.75)} - {test_digits})
    out = {}
    for k in ks:
        lens = np.full(n, k)
        out[k] = encode_digits(*random_digits(rng, lens, k), *random_digits(rng, lens, k),
                               3 * test_digits + 4, np.ones(n, np.int64))
    return out


def lengen_detail(tr: Trainer, state, test, ladder: dict, chunk: int,
                  shifted=None) -> dict:
    """Where length generalisation breaks: the exact match at each length of the ladder
    (`by_length`), and on the test sums the accuracy of each answer token, units first and
    the closing '.' last (`per_digit`, teacher-forced); with `shifted` (x, y), the exact
    match on the test sums at random offsets (`test_exact_match_offsets`)."""
    from compare.addition import IGNORE
    by_length = {str(k): exact_match(predict_all(tr, state, x, chunk), y)
                 for k, (x, y) in ladder.items()}
    more = {} if shifted is None else {
        "test_exact_match_offsets": exact_match(predict_all(tr, state, shifted[0], chunk),
                                                shifted[1])}
    x, y = test
    ok = predict_all(tr, state, x, chunk) == y
    first = np.argmax(y != IGNORE, axis=1)
    scored = (y != IGNORE).sum(axis=1)
    per_digit = []
    for j in range(int(scored.max())):
        rows = np.flatnonzero(scored > j)
        per_digit.append(round(float(ok[rows, first[rows] + j].mean()), 4))
    return {"by_length": by_length, "per_digit": per_digit, **more}


def lengen_batches(train_digits: int, batch: int, seed: int, abacus: bool, n_places: int):
    """Training batches: each operand's length drawn from 1..train_digits; with abacus, a
    random place offset in 1..ABACUS_OFFSET per sum (never 0: '=' sits at the offset, and
    place 0 is that of '+' and '.')."""
    rng = np.random.RandomState(seed + 1)
    k = train_digits
    while True:
        a = random_digits(rng, rng.randint(1, k + 1, size=batch), k)
        b = random_digits(rng, rng.randint(1, k + 1, size=batch), k)
        off = rng.randint(1, ABACUS_OFFSET + 1, size=batch)
        x, p, y = encode_digits(*a, *b, 3 * k + 4, off if abacus else np.zeros(batch, np.int64))
        yield (abacus_tokens(x, p, n_places) if abacus else x), y


# ---------------------------------------------------------------------------------------------
# The phases
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Plan:
    size: str
    digits: tuple
    seeds: tuple
    robust_seeds: tuple
    eval_every: int
    n_val: int
    n_test: int
    chunk: int
    lengen: tuple           # (train digits, test digits, n test sums, steps)
    stop_at: float
    budget_s: float
    variants: tuple = tuple(VARIANTS)
    ablation_size: str = "default"
    ablation_seeds: tuple = SEEDS
    phase_s: dict = dataclasses.field(default_factory=dict)  # phase -> seconds kept for it
    compile_s: float = 20.0  # a first guess at one compile, before any is measured


def make_plan(smoke: bool, budget_s: float, stop_at: float) -> Plan:
    """The sizes of every phase: the 10M model on the TPU, or (smoke) the quick model a few
    steps at a time, every phase and variant once, on any device. `phase_s` is what the
    phases before a phase leave for it (a guess from the TPU's measured 4-15 ms a step and
    15-45 s a compile): 250 s for length generalisation (three 10M trainers, LENGEN_STEPS
    steps each), 100 s for NNX (two compiles, six runs), 90 s for the ablations (four small
    trainers, twelve runs of 1,000 steps). The phases run in the order asked for."""
    if smoke:
        return Plan("quick", (3,), (0,), (0,), 10, 200, 200, 200, (3, 6, 200, 20), stop_at,
                    budget_s, ablation_size="quick", ablation_seeds=(0,), compile_s=5.0)
    return Plan("10M", (3, 6), SEEDS, ROBUST_SEEDS, 100, 1000, 5000, 1000,
                (10, 20, 1000, LENGEN_STEPS), stop_at, budget_s,
                phase_s={3: 250.0, 4: 100.0, 5: 90.0})


def setup_for(plan: Plan, digits: int, size: str | None = None, fmt=None, **changes):
    """`addition.setup(size or plan.size, digits, fmt)` with the plan's set sizes and
    evaluation period and the model's config changed by `changes`; 30 steps at the quick
    size."""
    from compare import addition
    size = size or plan.size
    s = addition.setup(size, digits, fmt or addition.Format())
    cfg = dataclasses.replace(s.model, **changes)
    if size == "quick":
        cfg = dataclasses.replace(cfg, steps=30)
    return dataclasses.replace(s, model=cfg, n_val=plan.n_val, n_test=plan.n_test,
                               eval_every=plan.eval_every)


def xy(split) -> tuple:
    return split.x, split.y


class Runner:
    """Runs the phases, keeping the results and writing them after every run. Started from a
    saved result (`run(..., merge_into=...)`), it keeps that result's rows, skips the runs it
    already has and starts its time estimates from their measured step times."""

    def __init__(self, plan: Plan, out: Path | None, save: Callable[[dict], None],
                 phases=(1, 2, 3, 4, 5), saved: dict | None = None):
        self.plan, self.out, self.save, self.phases = plan, out, save, tuple(phases)
        self.clock = Clock(plan.budget_s)
        self.trainers: dict = {}
        self.ms: dict = {}  # expected ms per step, by kind (the trainer's key)
        self.result: dict = saved if saved is not None else {}
        for r in self.result.get("runs", []):
            self.note_ms((r["impl"], r["digits"]), r)
        for r in self.result.get("robustness", []):
            self.note_ms((r["variant"], r["digits"]), r)
        for r in self.result.get(LENGEN_KEY, {}).get("runs", []):
            self.note_ms(("lengen", r["impl"], r["abacus"]), r)
        for r in self.result.get("ablations", []):
            self.note_ms(("ablation", r["format"]), r)

    def note_ms(self, kind, row: dict) -> None:
        if row["steps"]:  # evaluations and host time on top of the training step
            self.ms[kind] = max(self.ms.get(kind, 0.0), row["ms_per_step"] * 1.15 + 1.0)

    def keep_for_later(self, phase: int) -> float:
        """Seconds this phase leaves for the phases that follow it in this run's list."""
        later = self.phases[self.phases.index(phase) + 1:] if phase in self.phases else ()
        return sum(self.plan.phase_s.get(p, 0.0) for p in later)

    def trainer(self, key, build, *args, **kw) -> Trainer:
        """The trainer kept under `key`, built by build(*args, **kw) the first time."""
        if key not in self.trainers:
            self.trainers[key] = build(*args, **kw)
            compiles = self.result.setdefault("compile_s", {})
            compiles[" ".join(map(str, key))] = round(self.trainers[key].compile_s, 2)
        return self.trainers[key]

    def fits(self, kind, max_steps: int, reserve: float = 0.0, guess_ms: float = 20.0) -> bool:
        """Whether a run of `kind` up to max_steps fits the time left less `reserve`: its
        measured (else guessed) ms a step, plus a compile when its trainer is not built (the
        compile measured for it in a saved run, else the plan's guess)."""
        compile_s = 0.0 if kind in self.trainers else self.result.get("compile_s", {}).get(
            " ".join(map(str, kind)), self.plan.compile_s)
        est = max_steps * self.ms.get(kind, guess_ms) / 1e3 + compile_s
        ok = self.clock.left() - reserve >= est
        if not ok:
            print(f"  skipped ({kind}): {est:.0f} s estimated, {self.clock.left():.0f} s left"
                  + (f", {reserve:.0f} s kept for later phases" if reserve else ""))
        return ok

    def record(self, table: list, row: dict, kind) -> None:
        self.note_ms(kind, row)
        table.append(row)
        print(f"  {kind} seed {row['seed']}: 99% at {row['steps_to_99']}, test "
              f"{row['test_exact_match']:.4f}, {row['train_s']:.1f} s ({row['steps']} steps"
              f"{', cut' if row['cut'] else ''}), {self.clock.left():.0f} s left", flush=True)
        self.save(self.result)

    def seeds(self, impls=("minijax", "jax"), reserve: float = 0.0) -> None:
        import jax

        import minijax
        from compare import addition
        modules = {"minijax": minijax, "jax": jax}
        runs = self.result.setdefault("runs", [])
        for digits in self.plan.digits:
            s = setup_for(self.plan, digits)
            data = addition.splits(s)
            for seed in self.plan.seeds:
                batches = Batches(addition.train_batches(digits, s.model.batch, seed + 1, s.fmt,
                                                         s.seq_len + 1))
                for impl in impls:
                    kind = (impl, digits)
                    done = any((r["impl"], r["digits"], r["seed"]) == (impl, digits, seed)
                               for r in runs)
                    if done or not self.fits(kind, s.model.steps, reserve,
                                             self.ms.get(("jax", digits), 20.0)):
                        continue
                    tr = (self.trainer(kind, nnx_trainer, s) if impl == "nnx" else
                          self.trainer(kind, raw_trainer, modules[impl], s.model, s.seq_len))
                    row = train_run(tr, seed, batches, xy(data["val"]), xy(data["test"]),
                                    max_steps=s.model.steps, eval_every=s.eval_every,
                                    stop_at=self.plan.stop_at, clock=self.clock,
                                    chunk=self.plan.chunk)
                    self.record(runs, {"impl": impl, "digits": digits, **row}, kind)

    def robustness(self) -> None:
        """6-digit sums (the plan's most digits) under raw JAX with one change each, seed by
        seed (the seeds that missed 99% first), skipping the (change, seed) runs saved."""
        import jax

        from compare import addition
        digits = max(self.plan.digits)
        rows = self.result.setdefault("robustness", [])
        base = setup_for(self.plan, digits)
        data = addition.splits(base)
        missed = self.missed(digits)
        for seed in self.robust_seeds(digits):
            batches = Batches(addition.train_batches(digits, base.model.batch, seed + 1,
                                                     base.fmt, base.seq_len + 1))
            for name in self.plan.variants:
                changes, precision = VARIANTS[name]
                s = setup_for(self.plan, digits, **changes)
                kind = (name, digits)
                if any(r["variant"] == name and r["seed"] == seed for r in rows):
                    continue
                if precision and seed not in missed:  # a slower step: only where it can fix
                    continue
                if not self.fits(kind, s.model.steps, self.keep_for_later(2),
                                 self.ms.get(("jax", digits), 20.0)):
                    continue
                tr = self.trainer(kind, raw_trainer, jax, s.model, s.seq_len,
                                  precision=precision)
                row = train_run(tr, seed, batches, xy(data["val"]), xy(data["test"]),
                                max_steps=s.model.steps, eval_every=s.eval_every,
                                stop_at=self.plan.stop_at, clock=self.clock,
                                chunk=self.plan.chunk)
                self.record(rows, {"variant": name, "impl": "jax", "digits": digits, **row},
                            kind)

    def robust_seeds(self, digits: int) -> list[int]:
        """The seeds whose unchanged runs missed 99% first (where a fix can show), then the
        plan's robustness seeds, as many as the plan has."""
        seeds = list(dict.fromkeys(self.missed(digits) + list(self.plan.robust_seeds)))
        return seeds[:len(self.plan.robust_seeds)]

    def missed(self, digits: int) -> list[int]:
        """The seeds whose unchanged run (any module) on `digits`-digit sums missed 99%."""
        return list(dict.fromkeys(r["seed"] for r in self.result.get("runs", [])
                                  if r["digits"] == digits and r["steps_to_99"] is None))

    def length_generalisation(self) -> None:
        import jax

        import minijax
        train_d, test_d, n_test, max_steps = self.plan.lengen
        places = 1 + (train_d + 1) + ABACUS_OFFSET  # 0 .. the highest place trained
        s = setup_for(self.plan, 3)
        cfg = dataclasses.replace(s.model, block=3 * test_d + 3, steps=max_steps)
        sets = lengen_sets(train_d, test_d, n_test)
        ladder = lengen_ladder(train_d, test_d, max(n_test // 2, 1))
        old = self.result.get(LENGEN_KEY)
        if old is not None and not old.get("to_the_last_step"):  # the earlier plan's
            self.result["length_generalisation_early_stop"] = self.result.pop(LENGEN_KEY)
        res = self.result.setdefault(LENGEN_KEY, {
            "method": "abacus", "train_digits": train_d, "test_digits": test_d,
            "impl": {}, "baseline": None, "runs": [], "to_the_last_step": True,
            "places": places, "max_offset": ABACUS_OFFSET, "n_test": n_test,
            "max_test_offset": max_test_offset(train_d, test_d), "impl_offsets": {}})
        inputs = {True: {k: (abacus_tokens(x, p, places), y) for k, (x, p, y) in sets.items()},
                  False: {k: (x, y) for k, (x, _, y) in sets.items() if k != "test_offsets"}}
        rungs = {True: {k: (abacus_tokens(x, p, places), y) for k, (x, p, y) in ladder.items()},
                 False: {k: (x, y) for k, (x, _, y) in ladder.items()}}
        shared = {True: Batches(lengen_batches(train_d, cfg.batch, 0, True, places)),
                  False: Batches(lengen_batches(train_d, cfg.batch, 0, False, places))}
        for impl, J, abacus in (("jax", jax, True), ("jax", jax, False),
                                ("minijax", minijax, True)):
            kind = ("lengen", impl, abacus)
            if any((r["impl"], r["abacus"]) == (impl, abacus) for r in res["runs"]):
                continue
            guess = self.ms.get(("lengen", "jax", True), 2 * self.ms.get(("jax", 6), 10))
            if not self.fits(kind, max_steps, self.keep_for_later(3), guess):
                continue
            tr = self.trainer(kind, raw_trainer, J, cfg, 3 * train_d + 3,
                              abacus_places=places if abacus else 0)
            data = inputs[abacus]
            chunk = min(self.plan.chunk, n_test)
            row = train_run(tr, 0, shared[abacus], data["val"], data["test"],
                            max_steps=max_steps, eval_every=self.plan.eval_every,
                            stop_at=2.0, clock=self.clock, chunk=chunk,
                            extra=functools.partial(lengen_detail, tr, test=data["test"],
                                                    ladder=rungs[abacus], chunk=chunk,
                                                    shifted=data.get("test_offsets")))
            row = {"impl": impl, "abacus": abacus, "val_exact_match": row["val"][-1][1], **row}
            if abacus:
                res["impl"][impl] = row["test_exact_match"]
                res["impl_offsets"][impl] = row["test_exact_match_offsets"]
            else:
                res["baseline"] = row["test_exact_match"]
            self.record(res["runs"], row, kind)

    def nnx(self) -> None:
        try:
            import flax  # noqa: F401
            import optax  # noqa: F401
        except ImportError:
            print("  nnx: flax or optax is missing; skipped")
            return
        self.seeds(impls=("nnx",), reserve=self.keep_for_later(4))

    def ablations(self) -> None:
        """Chapter 26's tokenisation ablations over the plan's ablation seeds: raw JAX at the
        chapter's default size (2 layers, d=64, 1,000 steps) on 3-digit sums, each format on
        the same pairs, weights and steps as the default format's run of that seed, run to
        the last step (no early stop: the chapter compares the test exact match after the
        same steps). Seed by seed, so that a cut leaves every format with the same seeds."""
        import jax

        from compare import addition
        rows = self.result.setdefault("ablations", [])
        formats = {"default": addition.Format(), **addition.ABLATIONS}
        for seed in self.plan.ablation_seeds:
            for label, fmt in formats.items():
                if any(r["format"] == label and r["seed"] == seed for r in rows):
                    continue
                s = setup_for(self.plan, 3, self.plan.ablation_size, fmt)
                kind = ("ablation", label)
                if not self.fits(kind, s.model.steps, self.keep_for_later(5), 3.0):
                    continue
                data = addition.splits(s)
                batches = Batches(addition.train_batches(3, s.model.batch, seed + 1, fmt,
                                                         s.seq_len + 1))
                tr = self.trainer(kind, raw_trainer, jax, s.model, s.seq_len)
                row = train_run(tr, seed, batches, xy(data["val"]), xy(data["test"]),
                                max_steps=s.model.steps, eval_every=s.eval_every,
                                stop_at=2.0, clock=self.clock, chunk=self.plan.chunk)
                self.record(rows, {"format": label, "impl": "jax", "digits": 3, **row}, kind)


def device_info() -> dict:
    import jax
    return {"device_kind": jax.devices()[0].device_kind, "jax": jax.__version__,
            "date": datetime.date.today().isoformat()}


def run(out: Path | None, *, smoke: bool = False, budget_s: float = 450.0,
        stop_at: float = 0.995, phases=(1, 2, 3, 4, 5), merge_into: Path | None = None) -> dict:
    """Run the phases and return the results; write them to `out` after every run. With
    `merge_into`, start from the result saved there (its runs kept, the runs it has not
    redone) and write the merged whole to `out`; raises ValueError when that result is from
    another device kind, another stop level or the other (smoke or full) plan."""
    from compare import addition, gpt
    plan = make_plan(smoke, budget_s, stop_at)
    s = setup_for(plan, 3)
    info = device_info()
    saved = None
    if merge_into is not None:
        saved = load(merge_into)
        if saved is None:
            raise ValueError(f"addition_tpu.run: merge_into={merge_into} does not exist")
        mine = {"device_kind": info["device_kind"], "smoke": smoke, "stop_at": stop_at}
        theirs = {k: saved.get(k) for k in mine}
        if mine != theirs:
            raise ValueError(f"addition_tpu.run: cannot merge into {merge_into}: it was run "
                             f"with {theirs}, this run is {mine}")
        if "sessions" not in saved:  # written before sessions were kept: its own, phases unsaid
            saved["sessions"] = [{**{k: saved[k] for k in ("device_kind", "jax", "date",
                                                           "budget_s", "wall_s") if k in saved},
                                  "phases": None}]

    def save(result):
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps(result, indent=1) + "\n")
            tmp.replace(out)
    r = Runner(plan, out, save, phases, saved)
    if saved is None:
        r.result.update(info)
        r.result.update(params=addition.n_params(gpt.init_params(s.model)), smoke=smoke,
                        budget_s=budget_s, stop_at=stop_at,
                        config={k: getattr(s.model, k) for k in (
                            "n_layer", "d_model", "n_head", "batch", "steps", "warmup",
                            "peak_lr", "end_lr", "weight_decay")})
    session = {**info, "phases": list(phases), "budget_s": budget_s}
    r.result.setdefault("sessions", []).append(session)
    steps = {1: r.seeds, 2: r.robustness, 3: r.length_generalisation, 4: r.nnx,
             5: r.ablations}
    for p in phases:
        print(f"phase {p}: {steps[p].__name__} ({r.clock.left():.0f} s left)", flush=True)
        steps[p]()
    session["wall_s"] = round(time.perf_counter() - START, 1)
    r.result.setdefault("wall_s", session["wall_s"])
    save(r.result)
    return r.result


# ---------------------------------------------------------------------------------------------
# Reading a saved run back (chapter 26)
# ---------------------------------------------------------------------------------------------

def load(path: Path = PATH) -> dict | None:
    """The saved TPU run, or None when there is none."""
    return json.loads(Path(path).read_text()) if Path(path).exists() else None


def _none_saved(path: Path) -> bool:
    if Path(path).exists():
        return False
    where = Path(path).resolve()
    where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    print(f"No TPU run is committed ({where}): nothing here was measured on a TPU.")
    return True


def _band(rows: list[dict]) -> str:
    """Seeds reaching 99%, the steps they took and the spread of the test exact match."""
    hit = [r["steps_to_99"] for r in rows if r["steps_to_99"] is not None]
    em = [r["test_exact_match"] for r in rows]
    steps = f"steps {min(hit)}-{max(hit)}" if hit else "no seed"
    return (f"{len(hit)}/{len(rows)} seeds reach 99% ({steps}); test exact match "
            f"{min(em):.4f}-{max(em):.4f}")


def _seed_table(rows: list[dict], label: str) -> None:
    print(f"{label:18s} {'seed':>4} {'99% at step':>11} {'test exact':>10} {'train s':>8} "
          f"{'ms/step':>8} {'loss':>9}")
    for r in rows:
        name = r.get("variant") or r["impl"]
        hit = "-" if r["steps_to_99"] is None else str(r["steps_to_99"])
        print(f"{name:18s} {r['seed']:>4} {hit:>11} {r['test_exact_match']:>10.4f} "
              f"{r['train_s']:>8.1f} {r['ms_per_step']:>8.2f} {r['final_loss']:>9.2e}"
              + ("  (cut by the budget)" if r["cut"] else ""))


def show(path: Path = PATH) -> None:
    """Per digit count, each implementation's seeds: the first evaluated step at 99%
    validation, the test exact match, training seconds, ms per step and the last loss; then
    the band over seeds. Or say plainly that no TPU run is committed."""
    if _none_saved(path):
        return
    saved = load(path)
    cfg = saved["config"]
    print(f"{saved['device_kind']}, JAX {saved['jax']}, {saved['date']}: {saved['params']:,} "
          f"parameters ({cfg['n_layer']} layers, d={cfg['d_model']}), batch {cfg['batch']}, "
          f"up to {cfg['steps']} steps, stop at {saved['stop_at']:.1%} validation")
    for digits in sorted({r["digits"] for r in saved.get("runs", [])}):
        rows = [r for r in saved["runs"] if r["digits"] == digits]
        print(f"\n{digits}-digit sums")
        _seed_table(rows, "implementation")
        for impl in dict.fromkeys(r["impl"] for r in rows):
            print(f"  {impl}: {_band([r for r in rows if r['impl'] == impl])}")
        parts = [parting(rows, seed) for seed in sorted({r["seed"] for r in rows})]
        if any(p is not None for p in parts):
            print("  minijax's losses against JAX's, per seed: " + "; ".join(
                p for p in parts if p is not None))


def parting(rows: list[dict], seed: int) -> str | None:
    """Where minijax's and JAX's losses of one seed part: the first step whose losses differ
    by more than 1e-6 relative, among the first FIRST_LOSSES."""
    pair = {r["impl"]: r.get("first_losses") for r in rows if r["seed"] == seed}
    if not pair.get("minijax") or not pair.get("jax"):
        return None
    a, b = np.array(pair["minijax"]), np.array(pair["jax"])
    n = min(len(a), len(b))
    off = np.flatnonzero(np.abs(a[:n] - b[:n]) > 1e-6 * np.abs(b[:n]))
    return (f"seed {seed} parts at step {off[0] + 1}" if len(off) else
            f"seed {seed} the same for {n} steps")


def knife_edge(path: Path = PATH) -> None:
    """Per digit count, how many runs reached 99% validation, and for each run that did
    not, what the other modules' runs of the same seed (the same weights and batches) did."""
    if _none_saved(path):
        return
    runs = load(path).get("runs", [])
    for digits in sorted({r["digits"] for r in runs}):
        rows = [r for r in runs if r["digits"] == digits]
        missed = [r for r in rows if r["steps_to_99"] is None]
        print(f"{digits}-digit sums: {len(rows) - len(missed)} of {len(rows)} runs reached 99%")
        for r in missed:
            same = [o for o in rows if o["seed"] == r["seed"] and o is not r]
            said = ", ".join(f"{o['impl']} " + ("missed too" if o["steps_to_99"] is None else
                                                f"reached it at step {o['steps_to_99']}")
                             for o in same)
            print(f"  {r['impl']} seed {r['seed']} missed it (test exact match "
                  f"{r['test_exact_match']:.4f}, last loss {r['final_loss']:.3f}); "
                  f"from the same weights and batches: {said or 'no other run'}")


def show_robustness(path: Path = PATH) -> None:
    """The 6-digit runs under raw JAX with one change each, beside the unchanged runs of the
    same seeds; a change fixes the knife edge when every seed it ran reaches 99%."""
    if _none_saved(path):
        return
    saved = load(path)
    rows = saved.get("robustness", [])
    if not rows:
        print("The saved run has no robustness runs (its budget ran out first).")
        return
    digits, seeds = rows[0]["digits"], sorted({r["seed"] for r in rows})
    base = [dict(r, variant="unchanged") for r in saved.get("runs", [])
            if r["impl"] == "jax" and r["digits"] == digits and r["seed"] in seeds]
    _seed_table(base + rows, "raw JAX, change")
    every, cost = {}, {}
    base_ms = float(np.median([r["ms_per_step"] for r in base])) if base else None
    for name in dict.fromkeys(r["variant"] for r in base + rows):
        group = [r for r in base + rows if r["variant"] == name]
        every[name] = all(r["steps_to_99"] is not None for r in group)
        cost[name] = (float(np.median([r["ms_per_step"] for r in group])) / base_ms
                      if base_ms else float("nan"))
        print(f"  {name}: {_band(group)}; a step {cost[name]:.1f}x the unchanged one"
              + ("  <- every seed" if every[name] else ""))
    fixes = [name for name, ok in every.items() if ok and name != "unchanged"]
    if every.get("unchanged", False):
        print("Every unchanged seed reached 99% here: this run did not land on the edge.")
    else:
        print("Every seed past 99% with: " + (", ".join(fixes) or "none of the changes tried"))
        free = [name for name in fixes if cost[name] < 1.2]
        print("... of which at no extra cost a step: " + (", ".join(free) or "none"))


def show_ablations(path: Path = PATH) -> None:
    """Chapter 26's tokenisation ablations over seeds (raw JAX, the default size, every run
    to its last step): per format, each seed's test exact match, their mean and range, and
    the steps at which the seeds first reached 99% validation ('-': never)."""
    if _none_saved(path):
        return
    rows = load(path).get("ablations", [])
    if not rows:
        print("The saved run has no ablation runs (phase 5 of tools/addition_tpu.py).")
        return
    seeds = sorted({r["seed"] for r in rows})
    print(f"{'format':20s} " + " ".join(f"{f'seed {s}':>7}" for s in seeds)
          + f" {'mean':>7} {'range':>7}  99% at step")
    for name in dict.fromkeys(r["format"] for r in rows):
        by_seed = {r["seed"]: r for r in rows if r["format"] == name}
        em = [r["test_exact_match"] for r in by_seed.values()]
        cells = " ".join(f"{by_seed[s]['test_exact_match']:>7.4f}" if s in by_seed else
                         f"{'-':>7}" for s in seeds)
        hit = ", ".join("-" if by_seed[s]["steps_to_99"] is None else
                        str(by_seed[s]["steps_to_99"]) for s in seeds if s in by_seed)
        print(f"{name:20s} {cells} {np.mean(em):>7.4f} {max(em) - min(em):>7.4f}  {hit}")


def plot_seeds(png: str | Path, path: Path = PATH) -> None:
    """One panel per digit count: per implementation (a colour each), the band between the
    lowest and the highest validation exact match of its seeds at each evaluated step (a run
    stopped early keeps its last value), and each seed's curve as a thin line (solid minijax,
    dashed JAX, dotted NNX). Draws nothing when no TPU run is committed."""
    if _none_saved(path):
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load(path).get("runs", [])
    digits = sorted({r["digits"] for r in runs})
    fig, axes = plt.subplots(1, max(len(digits), 1), figsize=(5 * max(len(digits), 1), 3.6),
                             squeeze=False)
    style = {"minijax": ("-", "C0"), "jax": ("--", "C1"), "nnx": (":", "C2")}
    for ax, d in zip(axes[0], digits):
        for impl in dict.fromkeys(r["impl"] for r in runs if r["digits"] == d):
            group = [r for r in runs if r["digits"] == d and r["impl"] == impl]
            line, colour = style.get(impl, ("-", "C3"))
            steps = sorted({s for r in group for s, _ in r["val"]})
            grid = np.array([[last_at(r["val"], s) for s in steps] for r in group])
            ax.fill_between(steps, grid.min(0), grid.max(0), color=colour, alpha=0.2,
                            label=f"{impl}, {len(group)} seeds")
            for r in group:
                ax.plot(*zip(*r["val"]), line, color=colour, lw=0.9)
        ax.axhline(0.99, color="grey", lw=0.6)
        ax.set(title=f"{d}-digit sums", xlabel="step", ylabel="validation exact match",
               ylim=(-0.02, 1.02))
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    print(f"{len(runs)} runs drawn: {png}")


def last_at(val: list, step: int) -> float:
    """A run's validation exact match at `step`: its last evaluation at or before it."""
    before = [v for s, v in val if s <= step]
    return before[-1] if before else 0.0


def show_length_generalisation(path: Path = PATH) -> None:
    """Exact match on sums longer than any trained, with Abacus places and without: on the
    ladder of lengths, on the test sums at offset 1 and at random offsets; then the runs of
    the earlier plan that stopped at 99.5% validation, when saved."""
    if _none_saved(path):
        return
    saved = load(path)
    lg = saved.get(LENGEN_KEY)
    if not lg or not lg["runs"]:
        print("The saved run has no length-generalisation runs (its budget ran out first).")
        return
    print(f"trained on 1- to {lg['train_digits']}-digit operands, tested on "
          f"{lg['test_digits']}-digit sums ({lg['n_test']} of them)")
    _lengen_table(lg["runs"])
    for r in lg["runs"]:
        if r.get("per_digit"):
            print(f"{r['impl']}, {'Abacus' if r['abacus'] else 'absolute'}: each answer token "
                  f"right on the test sums, units first: "
                  + " ".join(f"{v:.2f}" for v in r["per_digit"]))
    early = saved.get("length_generalisation_early_stop")
    if early and early["runs"]:
        print(f"\nthe same, stopped when validation reached {saved['stop_at']:.1%}:")
        _lengen_table(early["runs"])


def _lengen_table(runs: list[dict]) -> None:
    rungs = list(runs[0].get("by_length", {}))
    offsets = any("test_exact_match_offsets" in r for r in runs)
    print(f"{'model':28s} {'val exact':>9} " + "".join(f"{f'{k} digits':>10}" for k in rungs)
          + f"{'test exact':>11}" + (f"{'at offsets':>11}" if offsets else "")
          + f" {'steps':>6} {'train s':>8}")
    for r in runs:
        name = f"{r['impl']}, " + ("Abacus places" if r["abacus"] else "absolute positions")
        ladder = "".join(f"{r['by_length'][k]:>10.4f}" for k in rungs if k in r.get(
            "by_length", {}))
        shifted = r.get("test_exact_match_offsets")
        col = "" if not offsets else (f"{shifted:>11.4f}" if shifted is not None else
                                      f"{'-':>11}")
        print(f"{name:28s} {r['val_exact_match']:>9.4f} {ladder}{r['test_exact_match']:>11.4f}"
              f"{col} {r['steps']:>6} {r['train_s']:>8.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=PATH)
    p.add_argument("--smoke", action="store_true", help="a tiny model on any device")
    p.add_argument("--budget-s", type=float, default=450.0)
    p.add_argument("--stop-at", type=float, default=0.995)
    p.add_argument("--phases", default="1,2,3,4,5")
    p.add_argument("--merge-into", type=Path, default=None,
                   help="a saved result to extend: its runs are kept and not redone, and the "
                        "whole is written to --out")
    args = p.parse_args(argv)
    from tools._chip import no_accelerator
    if no_accelerator(f"nothing trained, {args.out} not written (--smoke trains a tiny model "
                      "here)", allow=args.smoke):
        return 0
    run(args.out, smoke=args.smoke, budget_s=args.budget_s, stop_at=args.stop_at,
        phases=tuple(int(x) for x in args.phases.split(",")), merge_into=args.merge_into)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
