"""addition: a small transformer that learns n-digit addition, trained three ways from the same
initial weights (chapter 26): the chapter 19 GPT under raw minijax, the same code under real
JAX, and the chapter 20 Flax NNX model with an Optax optimizer.

The task is made by code. A sum is written as characters, `047+385=2340`: both operands zero
padded to n digits, a `+` and an `=` as separators, and the answer's n+1 digits written least
significant first (432 reversed and padded). The model is trained only on the answer digits
(the other targets are `IGNORE`, left out of the loss by `gpt.program(ignore_id=...)`), and a
sum counts as right when every answer digit is (exact match). Pairs are split between train,
validation and test by a hash of the unordered pair, so no pair (nor its mirror b+a) is shared
between splits; a length-generalisation set has n+1 digits, which training never shows.

The model and the hand-written AdamW are `compare/gpt.py: program` (causal attention, learned
absolute positions); the NNX version is `compare/_gpt_nnx.py: GPT`. The three runs see the same
batches in the same order. Trained weights and curves are cached under
`compare/out/addition/`, keyed by the configuration, so a second run of the report does not
retrain. `python -m compare.addition --size 10M` trains the ~10M-parameter configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

import minijax
from compare import gpt
from compare._model_checks import finite_differences
from compare._modules import MODULES
from compare._report import OUT_DIR, TopicResult, code, interleaved_ms

CHARS = "0123456789+=."   # '.' ends an unpadded answer
VOCAB = len(CHARS)
PLUS, EQUALS, END = 10, 11, 12
IGNORE = -1               # the target of a position that is not scored


# ---------------------------------------------------------------------------------------------
# Data: sums as tokens, splits by a hash of the pair
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Format:
    """How a sum is written. reverse: answer least significant digit first; pad: operands and
    answer zero padded to fixed width (else written plainly, the answer closed by '.', the
    sequence right-filled with '.'); sep: '+' and '=' between the numbers."""

    reverse: bool = True
    pad: bool = True
    sep: bool = True

    def length(self, n: int) -> int:
        """Tokens in the longest sum of two n-digit numbers."""
        return 3 * n + 1 + 2 * self.sep + (not self.pad)


def digits(v: np.ndarray, width: int) -> np.ndarray:
    """int64[N] -> int32[N, width], most significant digit first (zero padded)."""
    return ((v[:, None] // 10 ** np.arange(width - 1, -1, -1)) % 10).astype(np.int32)


def carries(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """int32[N, n+1]: the carry into each answer digit, least significant first (the first is
    always 0)."""
    da, db = digits(a, n)[:, ::-1], digits(b, n)[:, ::-1]
    out = np.zeros((len(a), n + 1), np.int32)
    for i in range(n):
        out[:, i + 1] = (da[:, i] + db[:, i] + out[:, i]) >= 10
    return out


def encode(a: np.ndarray, b: np.ndarray, n: int, fmt: Format = Format(),
           length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sums a+b of numbers below 10**n -> (x, y) int32[N, L-1]: the tokens and the next-token
    targets, IGNORE except at the answer digits (and the closing '.' when unpadded). L is
    `length`, default fmt.length(n)."""
    L = length or fmt.length(n)
    rows_x, rows_y = [], []
    for av, bv in zip(a.tolist(), b.tolist()):
        sa, sb, sc = (f"{av:0{n}d}", f"{bv:0{n}d}", f"{av + bv:0{n + 1}d}") if fmt.pad else (
            str(av), str(bv), str(av + bv))
        if fmt.reverse:
            sc = sc[::-1]
        prompt = sa + ("+" if fmt.sep else "") + sb + ("=" if fmt.sep else "")
        answer = sc + ("" if fmt.pad else ".")
        seq = [CHARS.index(ch) for ch in prompt + answer]
        seq += [END] * (L - len(seq))
        tgt = [IGNORE] * (len(prompt) - 1) + seq[len(prompt):len(prompt) + len(answer)]
        tgt += [IGNORE] * (L - 1 - len(tgt))
        rows_x.append(seq[:-1])
        rows_y.append(tgt)
    return np.array(rows_x, np.int32), np.array(rows_y, np.int32)


def split_of(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """int[N]: 0 test, 1 validation, 2 train, from a hash of the unordered pair {a, b} (2% test,
    1% validation), so that a+b and b+a always fall in the same split."""
    lo, hi = np.minimum(a, b).astype(np.uint64), np.maximum(a, b).astype(np.uint64)
    with np.errstate(over="ignore"):
        h = (lo * np.uint64(10 ** n) + hi) * np.uint64(0x9E3779B97F4A7C15)
    bucket = (h >> np.uint64(40)) % np.uint64(100)
    return np.where(bucket < 2, 0, np.where(bucket < 3, 1, 2))


def draw_pairs(n: int, count: int, split: int | None, rng: np.random.RandomState,
               distinct: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`count` pairs of n-digit numbers (0 <= a, b < 10**n) from one split (None: any pair),
    drawn by rejection; `distinct` makes the ordered pairs distinct."""
    got_a, got_b, seen = [], [], set()
    while len(got_a) < count:
        a = rng.randint(0, 10 ** n, size=4 * count + 64).astype(np.int64)
        b = rng.randint(0, 10 ** n, size=4 * count + 64).astype(np.int64)
        keep = np.ones(len(a), bool) if split is None else split_of(a, b, n) == split
        for av, bv in zip(a[keep].tolist(), b[keep].tolist()):
            if distinct and (av, bv) in seen:
                continue
            seen.add((av, bv))
            got_a.append(av)
            got_b.append(bv)
            if len(got_a) == count:
                break
    return np.array(got_a, np.int64), np.array(got_b, np.int64)


@dataclasses.dataclass
class Split:
    a: np.ndarray   # int64[N]
    b: np.ndarray
    x: np.ndarray   # int32[N, L-1]
    y: np.ndarray


def make_split(n: int, count: int, split: int | None, seed: int, fmt: Format,
               length: int | None = None) -> Split:
    a, b = draw_pairs(n, count, split, np.random.RandomState(seed), distinct=True)
    return Split(a, b, *encode(a, b, n, fmt, length))


def train_batches(n: int, batch: int, seed: int, fmt: Format, length: int):
    """An endless stream of training batches (x, y), int32[batch, length-1] each."""
    rng = np.random.RandomState(seed)
    while True:
        a, b = draw_pairs(n, batch, 2, rng)
        yield encode(a, b, n, fmt, length)


# ---------------------------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Setup:
    """One experiment: the digit count, the format, the model and optimizer (a gpt.Config
    whose `block` leaves room for the n+1-digit length-generalisation sums), the set sizes."""

    digits: int
    model: gpt.Config
    fmt: Format = Format()
    n_val: int = 1000
    n_test: int = 5000
    n_gen: int = 2000
    eval_every: int = 100
    seed: int = 0

    @property
    def seq_len(self) -> int:
        """Tokens the model reads per training sum (the last token is only a target)."""
        return self.fmt.length(self.digits) - 1


SIZES = {  # gpt.Config fields per size; the context length is set from the digit count
    "quick": dict(n_layer=1, d_model=32, n_head=2, batch=64, steps=60, warmup=5,
                  peak_lr=3e-3, end_lr=3e-4),
    "default": dict(n_layer=2, d_model=64, n_head=4, batch=256, steps=1000, warmup=100,
                    peak_lr=3e-3, end_lr=3e-4),
    "10M": dict(n_layer=6, d_model=384, n_head=6, batch=256, steps=3000, warmup=200,
                peak_lr=1e-3, end_lr=1e-4),
}


def setup(size: str = "default", digits: int = 3, fmt: Format = Format()) -> Setup:
    """The experiment of a size in SIZES ("quick", "default", "10M") on `digits`-digit sums.
    Raises ValueError for an unknown size or a digit count outside 1..9."""
    if size not in SIZES:
        raise ValueError(f"addition.setup: unknown size {size!r}; choose from {list(SIZES)}")
    if not 1 <= digits <= 9:
        raise ValueError(f"addition.setup: digits must be 1..9 (int64 sums), got {digits}")
    cfg = gpt.Config(vocab=VOCAB, block=fmt.length(digits + 1) - 1, **SIZES[size])
    small = dict(n_val=200, n_test=500, n_gen=200, eval_every=10) if size == "quick" else {}
    return Setup(digits, cfg, fmt, **small)


def n_params(params) -> int:
    return int(sum(np.size(p) for p in jax.tree_util.tree_leaves(params)))


# ---------------------------------------------------------------------------------------------
# The three implementations
# ---------------------------------------------------------------------------------------------

def raw_runner(J, s: Setup, params0):
    """(J, prog, state) for the hand-written model and AdamW of gpt.program under module J,
    its step compiled ahead of time for int32[batch, seq_len]; prog["predict"](params, x) is
    the argmax next token, int32[B, T]."""
    J, prog, state = gpt.raw_runner(J, s.model, params0, seq_len=s.seq_len, ignore_id=IGNORE)
    jnp = J.numpy
    prog["predict"] = J.jit(
        lambda p, x: jnp.argmax(prog["forward"](p, x)[0], axis=-1).astype(np.int32))
    return J, prog, state


def nnx_runner(s: Setup, params0):
    """(jax, prog, state) for the chapter 20 NNX model (`gpt_nnx.GPT`) and its Optax AdamW
    (`gpt_nnx.make_optimizer`), trained on the answer digits only; the state is (model,
    optimizer), updated in place."""
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from compare import _gpt_nnx as gpt_nnx

    def answer_loss(logits, y):
        keep = y != IGNORE
        nll = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.where(keep, y, 0))
        return jnp.sum(nll * keep) / jnp.maximum(jnp.sum(keep), 1)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(lambda m: answer_loss(m(x)[0], y))(model)
        optimizer.update(model, grads)
        return loss

    @nnx.jit
    def predict(model, x):
        return jnp.argmax(model(x)[0], axis=-1).astype(jnp.int32)

    model = gpt_nnx.GPT(s.model, params0)
    state = (model, gpt_nnx.make_optimizer(model, s.model))

    def run_step(state, x, y):
        return state, train_step(*state, x, y)
    prog = {"run_step": run_step, "params": lambda st: st[0], "predict": predict,
            "train_step": train_step}
    return jax, prog, state


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------

def predict(J, prog, params, x: np.ndarray, chunk: int = 1000) -> np.ndarray:
    """Teacher-forced argmax predictions int32[N, T] in fixed-size chunks (one compile)."""
    out = []
    for i in range(0, len(x), chunk):
        part = x[i:i + chunk]
        pad = np.zeros((chunk - len(part), x.shape[1]), np.int32)
        out.append(np.asarray(prog["predict"](params, np.concatenate([part, pad])))[:len(part)])
    return np.concatenate(out)


def score(pred: np.ndarray, data: Split, n: int) -> dict:
    """Exact match (every scored target right), accuracy per answer digit and exact match per
    number of carries. With teacher forcing a sum is exact exactly when greedy decoding
    writes it right: each digit is then predicted from a correct prefix either way."""
    keep = data.y != IGNORE
    right = (pred == data.y) | ~keep
    exact = right.all(axis=1)
    out = {"exact_match": float(exact.mean())}
    if keep.all(axis=0).sum() == keep[0].sum():  # the answer sits in fixed columns
        out["per_position"] = [float(right[:, c].mean()) for c in np.flatnonzero(keep[0])]
    if data.a.max() < 10 ** n:
        count = carries(data.a, data.b, n).sum(axis=1)
        out["by_carries"] = {str(k): float(exact[count == k].mean())
                             for k in range(n + 1) if (count == k).any()}
        out["carry_counts"] = {str(k): int((count == k).sum()) for k in range(n + 1)}
    return out


# ---------------------------------------------------------------------------------------------
# Training in lockstep
# ---------------------------------------------------------------------------------------------

def train(runners: dict, s: Setup, val: Split, *, quiet: bool = False, desc: str = "addition"):
    """Train every runner on the same batches; {name: {"losses", "val": [(step, exact)],
    "state", "seconds"}} (seconds: that runner's wall time, its losses fetched at each eval)."""
    from compare._report import progress
    cfg = s.model
    batches = train_batches(s.digits, cfg.batch, s.seed + 1, s.fmt, s.seq_len + 1)
    state = {n: r[2] for n, r in runners.items()}
    out = {n: {"losses": [], "val": [], "seconds": 0.0} for n in runners}
    pending = {n: [] for n in runners}
    bar = range(cfg.steps) if quiet else progress(range(cfg.steps), desc, unit="step")
    for step in bar:
        x, y = next(batches)
        for n, (J, prog, _) in runners.items():
            t0 = time.perf_counter()
            state[n], loss = prog["run_step"](state[n], x, y)
            pending[n].append(loss)
            if (step + 1) % s.eval_every == 0 or step + 1 == cfg.steps:
                out[n]["losses"] += [float(v) for v in J.block_until_ready(pending[n])]
                pending[n] = []
                out[n]["seconds"] += time.perf_counter() - t0
                em = score(predict(J, prog, prog["params"](state[n]), val.x), val,
                           s.digits)["exact_match"]
                out[n]["val"].append((step + 1, em))
            else:
                out[n]["seconds"] += time.perf_counter() - t0
        if hasattr(bar, "set_postfix") and out[next(iter(runners))]["val"]:
            bar.set_postfix({n: f"{o['val'][-1][1]:.3f}" for n, o in out.items()})
    for n in runners:
        out[n]["state"] = state[n]
    return out


def step_times(runners: dict, s: Setup, reps: int) -> dict:
    """Median ms of each runner's training step, interleaved call by call, blocked, on one
    batch: the raw steps from their initial state (they are functions of it), the NNX step on
    its model as training left it (it updates the model in place, so call this after
    training)."""
    x, y = encode(*draw_pairs(s.digits, s.model.batch, 2, np.random.RandomState(5)),
                  s.digits, s.fmt, s.seq_len + 1)
    calls = {n: lambda J=J, f=prog["train_step" if n == "nnx" else "compiled_step"], st=st:
             J.block_until_ready(f(*st, x, y)) for n, (J, prog, st) in runners.items()}
    return {n: float(t) for n, t in interleaved_ms(calls, repeat=reps, warmup=3).items()}


# ---------------------------------------------------------------------------------------------
# Looking inside: attention maps and a carry probe
# ---------------------------------------------------------------------------------------------

class Recorder:
    """The `jax` module as gpt.program sees it, except that `nn.softmax` also keeps what it
    returns: a forward pass run eagerly (not under jit) through `gpt.program(Recorder(), cfg)`
    leaves each layer's attention weights, f32[B,H,Tq,Tk], in `maps`."""

    def __init__(self):
        self.maps: list[np.ndarray] = []
        maps = self.maps

        class NN:
            def __getattr__(self, name):
                return getattr(jax.nn, name)

            @staticmethod
            def softmax(x, axis=-1):
                p = jax.nn.softmax(x, axis=axis)
                maps.append(np.asarray(p))
                return p
        self.nn = NN()

    def __getattr__(self, name):
        return getattr(jax, name)


def attention_maps(s: Setup, params, a, b) -> list[np.ndarray]:
    """Per layer, f32[N, H, T, T]: the attention weights of the trained model on the sums a+b."""
    rec = Recorder()
    x, _ = encode(np.asarray(a, np.int64), np.asarray(b, np.int64), s.digits, s.fmt,
                  s.seq_len + 1)
    gpt.program(rec, s.model)["forward"](params, x)
    return rec.maps


def operand_attention(s: Setup, maps: list[np.ndarray]) -> np.ndarray:
    """f32[n+1, 2]: for each answer digit j (least significant first), the largest attention
    weight any head of any layer gives to the operand digits of column j (a_j + b_j), and to
    those of column j-1 (the column whose carry reaches j), averaged over the sums. The
    positions are those of the default format."""
    default_format_only("operand_attention", s)
    n = s.digits
    out = np.zeros((n + 1, 2), np.float32)
    for j in range(n + 1):
        q = 2 * n + 1 + j  # the position whose next token is answer digit j
        for col, k in ((0, j), (1, j - 1)):
            if not 0 <= k < n:
                continue
            cols = [n - 1 - k, 2 * n - k]  # a_k and b_k (operands are written msd first)
            out[j, col] = max(float(m[:, :, q, cols].sum(-1).mean(0).max()) for m in maps)
    return out


def default_format_only(name: str, s: Setup) -> None:
    if s.fmt != Format():
        raise ValueError(f"addition.{name}: reads the answer positions of the default format "
                         f"(reversed, padded, separators), got {s.fmt}")


def residual_stream(s: Setup, params, x: np.ndarray, layer: int) -> np.ndarray:
    """f32[N, T, d]: the layer-normed residual stream after `layer` blocks (0: embeddings),
    read out by running the model's own forward with the first `layer` blocks and an identity
    head."""
    d = s.model.d_model
    cut = {**params, "blocks": params["blocks"][:layer], "w_head": np.eye(d, dtype=np.float32),
           "lnf_g": np.ones(d, np.float32), "lnf_b": np.zeros(d, np.float32)}
    fwd = jax.jit(lambda p, x: gpt.program(jax, s.model)["forward"](p, x)[0])
    return np.asarray(fwd(cut, x))


def carry_probe(s: Setup, params, train: Split, test: Split) -> list[dict]:
    """A linear probe (logistic regression) per layer: from the residual stream at the
    position that predicts answer digit j, is there a carry into column j? Trained on `train`
    sums, scored on `test` ones, pooled over j = 1..n; with the majority-class baseline."""
    default_format_only("carry_probe", s)
    from sklearn.linear_model import LogisticRegression
    n = s.digits
    pos = 2 * n + 1 + np.arange(1, n + 1)
    x = np.concatenate([train.x, test.x])
    c = np.concatenate([carries(train.a, train.b, n), carries(test.a, test.b, n)])[:, 1:]
    is_train = np.arange(len(x)) < len(train.x)
    out = []
    for layer in range(s.model.n_layer + 1):
        h = residual_stream(s, params, x, layer)[:, pos]   # [N, n, d]
        feats = {k: (h[m].reshape(-1, h.shape[-1]), c[m].reshape(-1))
                 for k, m in (("train", is_train), ("test", ~is_train))}
        clf = LogisticRegression(max_iter=2000).fit(*feats["train"])
        yte = feats["test"][1]
        out.append({"layer": layer, "accuracy": float(clf.score(*feats["test"])),
                    "baseline": float(max(yte.mean(), 1 - yte.mean()))})
    return out


# ---------------------------------------------------------------------------------------------
# The experiment, cached
# ---------------------------------------------------------------------------------------------

CACHE_DIR = OUT_DIR / "addition"
ABLATIONS = {"answer not reversed": Format(reverse=False), "no zero padding": Format(pad=False),
             "no separators": Format(sep=False)}
CACHE_VERSION = 1  # raise it when a change to this file or to gpt.py changes the results


def cache_path(s: Setup) -> Path:
    """Where the results of `s` are kept, named by a hash of the setup and CACHE_VERSION."""
    key = json.dumps(dataclasses.asdict(s), sort_keys=True) + f"v{CACHE_VERSION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return CACHE_DIR / f"{s.digits}digits-d{s.model.d_model}-L{s.model.n_layer}-{digest}.pkl"


def splits(s: Setup) -> dict[str, Split]:
    n, fmt = s.digits, s.fmt
    return {"val": make_split(n, s.n_val, 1, s.seed + 11, fmt),
            "test": make_split(n, s.n_test, 0, s.seed + 12, fmt),
            "probe": make_split(n, 2000, 2, s.seed + 14, fmt),
            "gen": make_split(n + 1, s.n_gen, None, s.seed + 13, fmt,
                              length=fmt.length(n + 1))}


def train_format(s: Setup, fmt: Format, quiet: bool, label: str) -> dict:
    """Train the raw JAX model on sums written in `fmt` (same steps, same pairs): its test
    exact match and final validation curve."""
    cfg = dataclasses.replace(s.model, block=fmt.length(s.digits + 1) - 1)
    v = dataclasses.replace(s, fmt=fmt, model=cfg)
    data = splits(v)
    runners = {"jax": raw_runner(jax, v, gpt.init_params(cfg, v.seed))}
    run_ = train(runners, v, data["val"], quiet=quiet, desc=f"addition: {label}")["jax"]
    test = score(predict(jax, runners["jax"][1], run_["state"][0], data["test"].x), data["test"],
                 s.digits)
    return {"test_exact_match": test["exact_match"], "val": run_["val"],
            "final_loss": run_["losses"][-1], "example": decode_row(data["test"].x[0])}


def decode_row(x: np.ndarray) -> str:
    return "".join(CHARS[int(t)] for t in x)


def big_model_step(digits: int, reps: int) -> dict:
    """The 10M configuration, raw JAX: parameter count, FLOPs of one step (XLA's cost
    analysis), and the median of `reps` measured steps on this machine."""
    s = setup("10M", digits)
    params0 = gpt.init_params(s.model, s.seed)
    J, prog, state = raw_runner(jax, s, params0)
    x, y = encode(*draw_pairs(digits, s.model.batch, 2, np.random.RandomState(5)), digits,
                  s.fmt, s.seq_len + 1)
    times = []
    for i in range(1 + reps):
        t0 = time.perf_counter()
        jax.block_until_ready(prog["compiled_step"](*state, x, y))
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    return {"params": n_params(params0), "flops": prog["stages"]["flops"],
            "step_ms": statistics.median(times), "compile_s": prog["stages"]["compile_s"],
            "tokens_per_step": s.model.batch * s.seq_len,
            "config": {k: getattr(s.model, k) for k in ("n_layer", "d_model", "n_head",
                                                         "batch", "steps")}}


def experiment(s: Setup, *, quiet: bool = False, formats: dict | None = None,
               big: bool = True) -> dict:
    """Train the three implementations in lockstep and measure everything the report shows:
    a dict of plain numbers and numpy arrays (what the cache keeps). `formats` ({label:
    Format}, default ABLATIONS) are each trained once more, raw JAX only; `big` measures the
    10M configuration's step."""
    t0 = time.perf_counter()
    n = s.digits
    data = splits(s)
    params0 = gpt.init_params(s.model, s.seed)
    runners = {"minijax": raw_runner(minijax, s, params0), "jax": raw_runner(jax, s, params0),
               "nnx": nnx_runner(s, params0)}
    runs = train(runners, s, data["val"], quiet=quiet)
    out = {"setup": dataclasses.asdict(s), "params": n_params(params0), "impl": {}}
    for name, (J, prog, _) in runners.items():
        params = prog["params"](runs[name]["state"])
        out["impl"][name] = {
            "losses": runs[name]["losses"], "val": runs[name]["val"],
            "train_s": runs[name]["seconds"],
            "test": score(predict(J, prog, params, data["test"].x), data["test"], n),
            "gen": score(predict(J, prog, params, data["gen"].x), data["gen"], n + 1)}
    trained = jax.tree_util.tree_map(np.asarray, runs["jax"]["state"][0])
    out["trained_jax"] = trained
    out["final_params_max_diff"] = max(
        float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(
            jax.tree_util.tree_leaves(runs["minijax"]["state"][0]),
            jax.tree_util.tree_leaves(trained)))
    reps = 5 if quiet else 20
    ms = step_times(runners, s, reps)
    for name in runners:
        out["impl"][name]["step_ms"] = ms[name]
    out["stages"] = {n_: runners[n_][1]["stages"] for n_ in ("minijax", "jax")}
    first = data["test"]
    out["examples"] = [(int(first.a[i]), int(first.b[i]), decode_row(first.x[i]))
                       for i in range(3)]
    out["no_shared_pair"] = no_shared_pair(data, n)
    # Looking inside, on the JAX-trained weights.
    a_ex, b_ex = np.array([123, 456, 999, 505]) % 10 ** n, np.array([456, 567, 1, 495]) % 10 ** n
    out["attention_sums"] = (a_ex, b_ex)
    maps = attention_maps(s, trained, np.concatenate([a_ex, data["test"].a[:200]]),
                          np.concatenate([b_ex, data["test"].b[:200]]))  # one eager pass
    out["attention_maps"] = [m[:len(a_ex)] for m in maps]
    out["operand_attention"] = operand_attention(s, [m[len(a_ex):] for m in maps])
    out["probe"] = carry_probe(s, trained, data["probe"], data["test"])
    out["formats"] = {label: train_format(s, fmt, quiet, label)
                      for label, fmt in (ABLATIONS if formats is None else formats).items()}
    if big:
        out["size_10M"] = big_model_step(n, reps=2 if quiet else 3)
    out["seconds"] = time.perf_counter() - t0
    return out


def no_shared_pair(data: dict[str, Split], n: int) -> bool:
    """No unordered pair {a, b} in two of the train/validation/test splits (the training
    pairs are the probe's split here, drawn as training batches are)."""
    keys = {k: set(zip(np.minimum(v.a, v.b).tolist(), np.maximum(v.a, v.b).tolist()))
            for k, v in data.items() if k != "gen"}
    train_ok = bool((split_of(data["probe"].a, data["probe"].b, n) == 2).all())
    return train_ok and not (keys["val"] & keys["test"] or keys["val"] & keys["probe"]
                             or keys["test"] & keys["probe"])


def cached_experiment(s: Setup, *, quiet: bool = False, fresh: bool = False,
                      **kw) -> tuple[dict, bool]:
    """(results, from_cache): the cached results of `s` when there are any, else a new run,
    stored."""
    path = cache_path(s)
    if path.exists() and not fresh:
        return pickle.loads(path.read_bytes()), True
    out = experiment(s, quiet=quiet, **kw)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(out))
    return out, False


# ---------------------------------------------------------------------------------------------
# Pictures
# ---------------------------------------------------------------------------------------------

def draw_curves(out: dict):
    def draw(fig):
        ax1, ax2, ax3 = fig.subplots(1, 3)
        for (name, r), style in zip(out["impl"].items(), ["-", "--", ":"]):
            ax1.plot(np.arange(1, len(r["losses"]) + 1), r["losses"], style, lw=1, label=name)
            steps, em = zip(*r["val"])
            ax2.plot(steps, em, style, marker="o", ms=2, lw=1, label=name)
        for label, r in out.get("formats", {}).items():
            steps, em = zip(*r["val"])
            ax2.plot(steps, em, lw=1, alpha=0.6, label=f"jax, {label}")
        ax1.set(yscale="log", xlabel="step", ylabel="loss on the answer digits (nats)",
                title="training loss")
        ax2.set(xlabel="step", ylabel="exact match", title="validation sums exactly right")
        ref = np.array(out["impl"]["jax"]["losses"])
        for name in ("minijax", "nnx"):
            diff = np.abs(np.array(out["impl"][name]["losses"]) - ref) / np.abs(ref)
            ax3.plot(np.maximum(diff, 1e-12), lw=1, label=f"{name} vs jax")
        ax3.set(yscale="log", xlabel="step", title="relative loss difference (0 at 1e-12)")
        for ax in (ax1, ax2, ax3):
            ax.legend(fontsize=7)
    return draw


def draw_attention(s: Setup, out: dict, examples: int = 2):
    """One row per (sum, layer), one column per head: the attention of the positions that
    write the answer digits (rows c0 = units first) over the tokens of the sum."""
    n = s.digits
    maps, (a, b) = out["attention_maps"], out["attention_sums"]
    x, _ = encode(np.asarray(a), np.asarray(b), n, s.fmt, s.seq_len + 1)
    q = 2 * n + 1 + np.arange(n + 1)
    L, H = len(maps), maps[0].shape[1]

    def draw(fig):
        axes = fig.subplots(examples * L, H, squeeze=False)
        for e in range(examples):
            labels = [CHARS[t] for t in x[e]]
            for li in range(L):
                for h in range(H):
                    ax = axes[e * L + li, h]
                    ax.imshow(maps[li][e, h][q], cmap="viridis", vmin=0, vmax=1)
                    ax.set_xticks(range(len(labels)), labels, fontsize=7)
                    ax.set_yticks(range(n + 1), [f"c{j}" for j in range(n + 1)], fontsize=7)
                    ax.set_title(f"{a[e]}+{b[e]}: layer {li}, head {h}", fontsize=8)
    return draw


def pictures(s: Setup, out: dict, tag: str, quick: bool = False) -> list[str]:
    from compare._report import plot
    L, H = len(out["attention_maps"]), out["attention_maps"][0].shape[1]
    return [plot(f"addition_{tag}_curves", draw_curves(out), figsize=(14, 4), quick=quick),
            plot(f"addition_{tag}_attention", draw_attention(s, out),
                 figsize=(2.6 * H, 1.5 * 2 * L + 0.5), quick=quick)]


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

GPUS = {  # dense peak FLOP/s from the vendors' data sheets: (float32 or TF32, bf16 or fp16)
    "NVIDIA T4": (8.1e12, 65e12), "NVIDIA A100": (156e12, 312e12),
    "NVIDIA H100 SXM": (495e12, 989e12), "TPU v5e": (197e12, 197e12)}


def estimates(big: dict, steps: int, mfu: float = 0.3) -> dict:
    """Milliseconds per step and seconds for `steps` steps of a configuration whose step costs
    big["flops"], at `mfu` of each accelerator's 16-bit peak (small matmuls rarely reach
    more)."""
    return {name: {"step_ms": 1e3 * big["flops"] / (mfu * bf16),
                   "run_s": steps * big["flops"] / (mfu * bf16)}
            for name, (_, bf16) in GPUS.items()}


NNX_STEPS = 20


def first_departure(losses, ref, rtol: float) -> int | None:
    """The first step (1-based) at which `losses` differs from `ref` by more than rtol."""
    rel = np.abs(np.asarray(losses) - np.asarray(ref)) / np.abs(np.asarray(ref))
    return int(np.argmax(rel > rtol)) + 1 if (rel > rtol).any() else None


def steps_to(val: list, target: float = 0.99) -> int | None:
    """The first evaluated step whose validation exact match reaches `target`."""
    return next((int(step) for step, em in val if em >= target), None)


def run(quick: bool = False, size: str | None = None, digits: int = 3,
        fresh: bool = False) -> TopicResult:
    size = size or ("quick" if quick else "default")
    s = setup(size, digits)
    res = TopicResult(f"A transformer that learns {digits}-digit addition: minijax vs JAX vs "
                      "Flax NNX")
    res.chapter = "chapters/26-addition-transformer.md"
    if size == "quick":
        out = experiment(s, quiet=True, formats={}, big=False)
        from_cache = False
    else:
        out, from_cache = cached_experiment(s, fresh=fresh, big=size == "default",
                                            formats=None if size == "default" else {})
    imp, mj, jx, nx = _checks(res, out, size)

    cfg, by_carries, gen = _record(res, s, jx, digits, out, from_cache, imp)

    _describe_setup(res, digits, out, cfg, s, from_cache, imp, mj, jx, nx)
    _describe_findings(res, jx, by_carries, digits, gen, out)
    res.sections += pictures(s, out, size, quick=size == "quick")
    res.sections += [gradient_check(res, s), profile(res, out, mj, jx)]
    return res


def _checks(res, out, size):
    """The three implementations' runs checked: losses (NNX over its first steps only),
    validation exact match, disjoint splits, the loss falling, test exact match at full size;
    the step times."""
    imp = out["impl"]
    mj, jx, nx = imp["minijax"], imp["jax"], imp["nnx"]
    res.check("per-step losses agree, minijax vs JAX (1e-4 relative)", mj["losses"],
              jx["losses"], rtol=1e-4, atol=0)
    # NNX computes the same step with its operations in another order (Optax, Flax's layers):
    # last-bit differences, which the plateau before the model learns to carry amplifies, so
    # the curves agree to 1e-4 over the first steps only, and then part (the report says where).
    res.check(f"per-step losses agree, NNX vs raw JAX, first {NNX_STEPS} steps (1e-4 relative)",
              nx["losses"][:NNX_STEPS], jx["losses"][:NNX_STEPS], rtol=1e-4, atol=0)
    res.check("validation exact match agrees, minijax vs JAX (within 0.5%)",
              [v for _, v in mj["val"]], [v for _, v in jx["val"]], rtol=0, atol=5e-3)
    res.check_true("no pair shared between train, validation and test", out["no_shared_pair"])
    res.check_true("the loss fell by a fifth (all three)", all(
        r["losses"][-1] < 0.8 * r["losses"][0] for r in imp.values()))
    if size != "quick":
        res.check_true("test exact match >= 0.99 (minijax, JAX and NNX)", all(
            r["test"]["exact_match"] >= 0.99 for r in imp.values()))
    res.timings_ms = {"step: minijax": mj["step_ms"], "step: jax": jx["step_ms"],
                      "step: nnx": nx["step_ms"]}
    return imp, mj, jx, nx


def _record(res, s, jx, digits, out, from_cache, imp):
    """The numbers kept in the result's extras."""
    cfg = s.model
    by_carries = jx["test"]["by_carries"]
    gen = {"digits": digits + 1, "exact_match": jx["gen"]["exact_match"],
           "per_position": jx["gen"].get("per_position")}
    res.extra = {"digits": digits, "params": out["params"],
                 "by_carries": by_carries, "length_generalisation": gen,
                 "per_position": jx["test"].get("per_position"),
                 "from_cache": from_cache, "seconds": out["seconds"],
                 "probe": out["probe"]}
    for name, r in imp.items():
        res.extra[name] = {"losses": [float(v) for v in r["losses"]],
                           "test_exact_match": r["test"]["exact_match"],
                           "step_ms": float(r["step_ms"]),
                           "val_curve": [[int(a), float(b)] for a, b in r["val"]],
                           "train_s": r["train_s"], "steps_to_99": steps_to(r["val"])}
    if out["formats"]:
        res.extra["formats"] = {k: v["test_exact_match"] for k, v in out["formats"].items()}
    if "size_10M" in out:
        res.extra["size_10M"] = out["size_10M"]
    return cfg, by_carries, gen


def _describe_setup(res, digits, out, cfg, s, from_cache, imp, mj, jx, nx):
    """The setup section: the format, the model, and the three runs side by side."""
    ex = "\n".join(f"{a} + {b}: `{t}` + target `{str(a + b).zfill(digits + 1)[::-1]}`"
                   for a, b, t in out["examples"])
    res.sections.append(
        "### Setup\n\n"
        f"Sums of two {digits}-digit numbers, written `a+b=` with zero padding and the answer "
        f"reversed ({ex.count(chr(10)) + 1} test examples):\n\n{ex}\n\n"
        f"Model: {cfg.n_layer} layers, d={cfg.d_model}, {cfg.n_head} heads, "
        f"{out['params']:,} parameters; AdamW peak lr {cfg.peak_lr}, batch {cfg.batch}, "
        f"{cfg.steps} steps; test {s.n_test} sums, validation {s.n_val}. Whole experiment "
        f"{out['seconds']:.0f} s" + (" (read from the cache)" if from_cache else "") + ".\n\n"
        "| implementation | final loss | test exact match | step ms | training s | "
        "first step at 99% (validation) |\n|---|---|---|---|---|---|\n" + "\n".join(
            f"| {n} | {r['losses'][-1]:.2e} | {r['test']['exact_match']:.4f} | "
            f"{r['step_ms']:.1f} | {r['train_s']:.0f} | {steps_to(r['val'])} |"
            for n, r in imp.items())
        + "\n\nLargest relative per-step loss difference, minijax vs JAX: "
        f"**{gpt.max_rel(mj, jx):.3g}**. NNX vs JAX: {gpt.max_rel(nx, jx):.3g} over the run; "
        f"first above 1e-4 at step {first_departure(nx['losses'], jx['losses'], 1e-4)}, above "
        f"1e-3 at step {first_departure(nx['losses'], jx['losses'], 1e-3)}.")


def _describe_findings(res, jx, by_carries, digits, gen, out):
    """The sections on where the errors are, the attention and the carry probe, the tokenisation
    choices and the 10M configuration (where run)."""
    pos = jx["test"].get("per_position") or []
    res.sections.append(
        "### Where the errors are (JAX-trained model)\n\n"
        "Per answer digit (least significant first, teacher forced): "
        + ", ".join(f"{a:.4f}" for a in pos) + ".\n\nExact match by number of carries: "
        + ", ".join(f"{k}: {v:.4f} ({jx['test']['carry_counts'][k]} sums)"
                    for k, v in by_carries.items())
        + f".\n\nLength generalisation, {digits + 1}-digit sums: exact match "
        f"**{gen['exact_match']:.4f}**, per answer digit " + ", ".join(
            f"{v:.3f}" for v in gen["per_position"] or [])
        + ": every column of a longer sum sits at positions the model never saw it at.")
    att = out["operand_attention"]
    res.sections.append(
        "### Looking inside\n\n| answer digit | max attention on a_j + b_j | on a_(j-1) + "
        "b_(j-1) |\n|---|---|---|\n" + "\n".join(
            f"| {j} | {att[j, 0]:.2f} | {att[j, 1]:.2f} |" for j in range(digits + 1))
        + "\n\nCarry probe (logistic regression on the residual stream): " + ", ".join(
            f"after {p['layer']} blocks {p['accuracy']:.3f}" for p in out["probe"])
        + f" (majority class {out['probe'][0]['baseline']:.3f}).")
    if out["formats"]:
        res.sections.append(
            "### Tokenisation choices (raw JAX, same steps)\n\n| format | test exact match |\n"
            "|---|---|\n" + f"| reversed, padded, separators | {jx['test']['exact_match']:.4f}"
            " |\n" + "\n".join(f"| {k} | {v['test_exact_match']:.4f} |"
                               for k, v in out["formats"].items()))
    if "size_10M" in out:
        big = out["size_10M"]
        est = estimates(big, big["config"]["steps"])
        res.sections.append(
            f"### The 10M configuration\n\n{big['params']:,} parameters, "
            f"{big['flops'] / 1e9:.0f} GFLOP per step (XLA's cost analysis), measured "
            f"{big['step_ms']:.0f} ms per step here. At 30% of 16-bit peak: " + ", ".join(
                f"{k} {v['step_ms']:.1f} ms/step" for k, v in est.items()))


def gradient_check(res: TopicResult, s: Setup) -> str:
    """Both modules' gradients of the training loss (answer digits only) at the initial
    parameters, on a batch of 8 sums, against float64 central differences."""
    x, y = next(train_batches(s.digits, 8, s.seed + 7, s.fmt, s.seq_len + 1))
    params0 = gpt.init_params(s.model, s.seed)
    grads = {name: J.jit(J.grad(gpt.program(J, s.model, ignore_id=IGNORE)["loss"]))(
        J.device_put(params0), x, y) for name, J in MODULES}
    return finite_differences(res, "addition loss", gpt.program(
        jax, s.model, ignore_id=IGNORE)["loss"], params0, (x, y), grads)


def profile(res: TopicResult, out: dict, mj: dict, jx: dict) -> str:
    """Where a training step's time goes, per module: trace and lower, compile (measured once,
    when each module's step was compiled ahead of time), and the compiled step."""
    rows = []
    for name, r in (("jax", jx), ("minijax", mj)):
        st = out["stages"][name]
        res.timings_ms[f"step trace+lower: {name}"] = st["trace_lower_s"] * 1e3
        res.timings_ms[f"step compile: {name}"] = st["compile_s"] * 1e3
        rows.append(f"{name:8s} trace+lower {st['trace_lower_s'] * 1e3:8.1f} ms  compile "
                    f"{st['compile_s'] * 1e3:8.1f} ms  step {r['step_ms']:7.2f} ms  "
                    f"(XLA's cost model: {st['flops'] / 1e6:.1f} MFLOP, "
                    f"{st['bytes_accessed'] / 1e6:.1f} MB accessed per step)")
    return ("### Profile: where a step's time goes\n\n"
            "Each module's training step was traced and lowered, then compiled, once, ahead "
            "of time (`jit(step).trace(...).lower()`, `.compile()`); each stage was timed "
            "then. The step time is the median of the interleaved steps in the timings "
            "table.\n\n" + code("\n".join(rows)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m compare.addition",
                                description=__doc__.split("\n")[0])
    p.add_argument("--size", choices=list(SIZES), default=None)
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="the tests' sizes (--size quick)")
    p.add_argument("--fresh", action="store_true", help="retrain even when cached")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    from compare._report import write_json
    if args.size == "10M":
        big = big_model_step(args.digits, reps=3)
        print(f"--size 10M: {big['params']:,} parameters, {big['flops'] / 1e9:.0f} GFLOP per "
              f"step, measured {big['step_ms']:.0f} ms per step on {jax.devices()[0]}")
    res = run(quick=args.quick, size=args.size, digits=args.digits, fresh=args.fresh)
    print(f"parameters: {res.extra['params']:,}")
    for name in ("minijax", "jax", "nnx"):
        r = res.extra[name]
        print(f"{name}: test exact match {r['test_exact_match']:.4f}, step {r['step_ms']:.1f} ms")
    print("\n\n".join(res.sections))
    if args.json:
        write_json({"addition": res}, args.json)
    bad = [c.name for c in res.checks if not c.ok]
    print(f"{len(res.checks) - len(bad)}/{len(res.checks)} checks passed" +
          (f"; failed: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
