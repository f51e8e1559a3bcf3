"""A small CPU analogue of `tools/addition_tpu.py`'s length-generalisation phase, to choose
what the next TPU session tries: a 3-layer d=64 model trained on sums of 1..5-digit operands
(lengths drawn independently) with Abacus places (McLeish et al. 2024, "Transformers Can Do
Arithmetic with the Right Embeddings", arXiv 2405.17399), tested on sums of two 10-digit
numbers: the TPU's 10 -> 20 digits at half the length and about a 600th of the parameters.

    nice -n 10 python tools/abacus_small.py --variants baseline,inject --seeds 0,1,2
                                             [--out chapters/data/abacus-small-cpu.json]
    python tools/abacus_small.py --show

With `--scale tpu` the same variants run at the TPU's own size (the 10M model of
`compare/addition.py: SIZES["10M"]`, trained on 1..10 digits, tested on 20, each run stopped at
99.5% validation or 4,000 steps, unless the variant sets its own: the `+8k` ones train all
8,000) into `chapters/data/abacus-tpu.json`, under `--impls jax`,
`minijax` or both (the same weights, batches and bits). On the TPU machine, from the
repository root:

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/abacus_small.py --scale tpu \
        --variants offsets-100 --impls jax,minijax --seeds 0 --out $OUT/abacus-tpu.json

`--summarise-into chapters/data/26-addition-tpu.json` then writes the best variant's (`BEST`)
runs as that file's "length_generalisation" (chapter 26 prints the sweep with `show_tpu`).
The place schemes (`reschemed`): "below" (`encode_digits`'s own), "zero" (McLeish et al.'s:
'=' has no place) and "coupled" (every answer token one place up, at the place of the digit
it predicts: position coupling, Cho et al. 2024).

Each variant changes one thing against `BASE` (see `VARIANTS`): the model's config, the
offset range, input injection (`raw_trainer(inject=True)`), the operand lengths, filler
tokens before each training sum (`left_padded`), stopping at a validation level.
Every run uses `addition_tpu`'s encoders (`encode_digits`,
`random_digits`, `abacus_tokens`), trainer (`raw_trainer`, raw JAX: the CPU's faster module;
the same code runs under minijax), training loop (`train_run`) and measures (`lengen_sets`,
`lengen_ladder`, `lengen_detail`): the exact match on 10-digit sums at offset 1 and at random
offsets, at 6, 7 and 9 digits, and each answer token's accuracy, units first; with attention
sharpened after training (`sharpened`); and sums one digit longer than trained and of the
test's length at every trained offset (`by_offset`: 6 and 10 digits on the CPU, 11 and 20 on
the TPU).

The file: `{"config": BASE, "train_digits", "test_digits", "n_test", "runs": [{"variant",
"changes", "seed", "val_exact_match", "test_exact_match", "test_exact_match_offsets",
"by_length", "per_digit", "steps", "train_s", "ms_per_step", "val", "sharpened": {tau:
{"test", "6"}}, "by_offset": {digits: {offset: [exact match, per token]}}}]}` (the last
two on the runs made after they were added); a (variant, seed)
already in the file is not run again.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from tools import addition_tpu as T  # noqa: E402

PATH = ROOT / "chapters" / "data" / "abacus-small-cpu.json"
TRAIN_DIGITS, TEST_DIGITS, N_TEST = 5, 10, 1000
BASE = dict(n_layer=3, d_model=64, n_head=4, batch=64, steps=2400, warmup=100,
            peak_lr=2e-3, end_lr=2e-4, weight_decay=0.1, max_offset=10, inject=False,
            abacus=True, lengths="uniform", stop_at=2.0, left_pad=0, places="below",
            eval_every=250)
# `--scale tpu`: the TPU's own experiment (addition_tpu's phase 3: the 10M model, 10 -> 20
# digits), each run stopped at 99.5% validation, to compare the variants there.
SCALES = {
    "cpu": dict(train=5, test=10, path=PATH, base=BASE),
    "tpu": dict(train=10, test=20, path=ROOT / "chapters" / "data" / "abacus-tpu.json",
                base={**BASE, "n_layer": 6, "d_model": 384, "n_head": 6, "batch": 256,
                      "steps": 4000, "warmup": 200, "peak_lr": 1e-3, "end_lr": 1e-4,
                      "max_offset": 20, "stop_at": 0.995, "eval_every": 200}),
}


def use_scale(name: str) -> None:
    """Set the module's digit counts, base config and output file to those of `name` ("cpu"
    or "tpu"; KeyError for another): every function here reads them."""
    global TRAIN_DIGITS, TEST_DIGITS, BASE, PATH
    s = SCALES[name]
    TRAIN_DIGITS, TEST_DIGITS, BASE, PATH = s["train"], s["test"], s["base"], s["path"]


@contextlib.contextmanager
def at_scale(name: str):
    """`use_scale(name)` inside the block; the scale in use before comes back after it."""
    before = next(k for k, v in SCALES.items() if v["path"] == PATH)
    use_scale(name)
    try:
        yield
    finally:
        use_scale(before)


VARIANTS = {  # name -> changes to BASE
    "baseline": {},
    "absolute": {"abacus": False},                 # learned absolute positions, no places
    "early-stop": {"stop_at": 0.995},
    "offsets-25": {"max_offset": 25},               # McLeish et al.: 100 with 20 digits
    "inject": {"inject": True},
    "depth-1": {"n_layer": 1},
    "depth-2": {"n_layer": 2},
    "depth-6": {"n_layer": 6},
    "steps-2x": {"steps": 4800},
    "wd-0": {"weight_decay": 0.0},
    "wd-1": {"weight_decay": 1.0},
    "long-operands": {"lengths": "long"},
    "equal-lengths": {"lengths": "equal"},
    "left-pad": {"left_pad": 3 * (10 - 5)},  # the CPU scale's test length (not the TPU's)
    "depth-2+offsets-25": {"n_layer": 2, "max_offset": 25},
    "inject+offsets-25": {"inject": True, "max_offset": 25},
    "offsets-60": {"max_offset": 60},
    "eq-zero": {"places": "zero"},
    "coupled": {"places": "coupled"},
    "coupled+equal": {"places": "coupled", "lengths": "equal"},
    "coupled+offsets-60": {"places": "coupled", "max_offset": 60},
    "coupled+offsets-100": {"places": "coupled", "max_offset": 100},
    "coupled+offsets-100+8k": {"places": "coupled", "max_offset": 100, "steps": 8000,
                               "stop_at": 2.0},
    "offsets-100": {"max_offset": 100},
    "offsets-100+8k": {"max_offset": 100, "steps": 8000, "stop_at": 2.0},
    "offsets-60+8k": {"max_offset": 60, "steps": 8000, "stop_at": 2.0},
}
PLACES = ("below", "zero", "coupled")


def reschemed(x: np.ndarray, p: np.ndarray, scheme: str) -> np.ndarray:
    """The places int32[N, T] of `encode_digits` (for its tokens `x`, int32[N, T]: '=' at the
    offset, the place just below the units; each answer digit at its own significance) under
    another scheme, as int32[N, T]: "zero" gives '=' place
    0, as McLeish et al. do (only digits have places); "coupled" moves '=' and every answer
    digit up one place, so that each token sits at the place of the digit it predicts, the
    place of the operand digits it must read (position coupling, Cho et al. 2024). ValueError
    for another scheme."""
    from compare.addition import EQUALS
    if scheme == "below":
        return p
    if scheme == "zero":
        return np.where(x == EQUALS, 0, p).astype(np.int32)
    if scheme == "coupled":
        after = np.cumsum(x == EQUALS, axis=1) > 0
        return np.where(after & (p > 0), p + 1, p).astype(np.int32)
    raise ValueError(f"abacus_small.reschemed: unknown place scheme {scheme!r}; one of {PLACES}")


def n_places(c: dict) -> int:
    """Rows of the place table for config `c`: 0, the places of a trained number (up to
    TRAIN_DIGITS + 1 for the answer's carry) at every offset, one more when coupled."""
    return 1 + (TRAIN_DIGITS + 1) + c["max_offset"] + (c["places"] == "coupled")


def batches(c: dict, seed: int):
    """Training batches: operand lengths drawn from 1..TRAIN_DIGITS, uniformly ("uniform") or
    with probability growing with the length ("long": weights 1..TRAIN_DIGITS), or both of
    one drawn length ("equal", as the test sums are; Cho et al. 2024 pad to equal length), a place
    offset in 1..max_offset per sum (0 everywhere without Abacus places)."""
    rng = np.random.RandomState(seed + 1)
    k, b = TRAIN_DIGITS, c["batch"]
    w = np.arange(1, k + 1) if c["lengths"] == "long" else np.ones(k)
    w = w / w.sum()
    while True:
        da = T.random_digits(rng, rng.choice(np.arange(1, k + 1), size=b, p=w), k)
        lb = rng.choice(np.arange(1, k + 1), size=b, p=w)
        db = T.random_digits(rng, da[1] if c["lengths"] == "equal" else lb, k)
        off = rng.randint(1, c["max_offset"] + 1, size=b)
        x, p, y = T.encode_digits(*da, *db, 3 * k + 4,
                                  off if c["abacus"] else np.zeros(b, np.int64))
        p = reschemed(x, p, c["places"])
        if c["left_pad"]:
            x, p, y = left_padded(rng, x, p, y, c["left_pad"])
        yield (T.abacus_tokens(x, p, n_places(c)) if c["abacus"] else x), y


def left_padded(rng, x, p, y, most: int):
    """Each row shifted right by its own 0..most filler tokens ('.' at place 0, not scored)
    and filled with them on the right: the sums then sit at token positions up to those of
    longer test sums, the numbers no longer than before."""
    from compare.addition import END, IGNORE
    n, t = x.shape
    shift = rng.randint(0, most + 1, size=n)
    col = np.arange(t + most)[None, :] - shift[:, None]
    inside = (col >= 0) & (col < t)
    take = lambda a, fill: np.where(
        inside, np.take_along_axis(a, np.clip(col, 0, t - 1), axis=1), fill).astype(np.int32)
    return take(x, END), take(p, 0), take(y, IGNORE)


def eval_sets(c: dict) -> tuple[dict, dict]:
    """`lengen_sets` and `lengen_ladder` for this offset range, as model inputs."""
    saved, T.ABACUS_OFFSET = T.ABACUS_OFFSET, c["max_offset"]  # read by max_test_offset
    try:
        sets = T.lengen_sets(TRAIN_DIGITS, TEST_DIGITS, N_TEST)
        ladder = T.lengen_ladder(TRAIN_DIGITS, TEST_DIGITS, N_TEST // 2)
    finally:
        T.ABACUS_OFFSET = saved
    inp = (lambda x, p: T.abacus_tokens(x, reschemed(x, p, c["places"]), n_places(c))
           ) if c["abacus"] else (lambda x, p: x)
    return ({k: (inp(x, p), y) for k, (x, p, y) in sets.items()},
            {k: (inp(x, p), y) for k, (x, p, y) in ladder.items()})


TEMPERATURES = (1.5, 2.0, 3.0)


def sharpened(params, tau: float, d: int):
    """The parameters with every attention's logits multiplied by tau (the query columns of
    w_qkv and b_qkv scaled): a test-time attention temperature of 1/tau."""
    blocks = []
    for blk in params["blocks"]:
        w, b = np.array(blk["w_qkv"]), np.array(blk["b_qkv"])
        w[:, :d] *= tau
        b[:d] *= tau
        blocks.append({**blk, "w_qkv": w, "b_qkv": b})
    return {**params, "blocks": blocks}


def by_offset(tr, state, c: dict, k: int, n: int = 500) -> dict:
    """{offset: (exact match, accuracy of each answer token)} on n sums of two k-digit
    numbers written at each offset from 1 to the highest whose places were all trained."""
    from compare.addition import IGNORE
    rng = np.random.RandomState(k + 31)
    lens = np.full(n, k)
    digits = (*T.random_digits(rng, lens, k), *T.random_digits(rng, lens, k))
    out = {}
    for off in range(1, c["max_offset"] + TRAIN_DIGITS - k + 1):
        x, p, y = T.encode_digits(*digits, 3 * k + 4, np.full(n, off))
        tokens = T.abacus_tokens(x, reschemed(x, p, c["places"]), n_places(c))
        ok = T.predict_all(tr, state, tokens, 500) == y
        per = [ok[:, j][y[:, j] != IGNORE].mean() for j in range(y.shape[1])
               if (y[:, j] != IGNORE).any()]
        out[str(off)] = (float((ok | (y == IGNORE)).all(axis=1).mean()),
                         [round(float(v), 3) for v in per])
    return out


def detail(tr, state, *, test, ladder, shifted, c: dict) -> dict:
    """`lengen_detail`; the exact match on the test sums and the shortest ladder rung with
    attention sharpened post hoc by each of TEMPERATURES (`sharpened`); with Abacus places,
    `by_offset` for 6- and 10-digit sums (where along the places generalisation breaks)."""
    d = c["d_model"]
    out = T.lengen_detail(tr, state, test, ladder, 500, shifted)
    if c["abacus"]:
        out["by_offset"] = {str(k): by_offset(tr, state, c, k)
                            for k in (TRAIN_DIGITS + 1, TEST_DIGITS)}
    k = min(ladder)
    out["sharpened"] = {}
    for tau in TEMPERATURES:
        st = (sharpened(state[0], tau, d), None)
        out["sharpened"][str(tau)] = {
            "test": T.exact_match(T.predict_all(tr, st, test[0], 500), test[1]),
            str(k): T.exact_match(T.predict_all(tr, st, ladder[k][0], 500), ladder[k][1])}
    return out


def run_one(name: str, seed: int, impl: str = "jax") -> dict:
    import importlib

    from compare import addition, gpt
    J = importlib.import_module(impl)
    c = {**BASE, **VARIANTS[name]}
    cfg = gpt.Config(vocab=addition.VOCAB, block=3 * TEST_DIGITS + 3,
                     **{k: c[k] for k in ("n_layer", "d_model", "n_head", "batch", "steps",
                                          "warmup", "peak_lr", "end_lr", "weight_decay")})
    tr = T.raw_trainer(J, cfg, 3 * TRAIN_DIGITS + 3 + c["left_pad"], inject=c["inject"],
                       abacus_places=n_places(c) if c["abacus"] else 0)
    data, ladder = eval_sets(c)
    val = (data["val"][0][:500], data["val"][1][:500])
    row = T.train_run(tr, seed, T.Batches(batches(c, seed)), val, data["test"],
                      max_steps=c["steps"], eval_every=c["eval_every"], stop_at=c["stop_at"],
                      clock=T.Clock(1e9), chunk=500,
                      extra=functools.partial(detail, tr, test=data["test"], ladder=ladder,
                                              shifted=data.get("test_offsets"),
                                              c=c))
    keep = ("seed", "test_exact_match", "test_exact_match_offsets", "by_length", "per_digit",
            "steps", "train_s", "ms_per_step", "val", "sharpened", "by_offset")
    return {"variant": name, "changes": VARIANTS[name], "impl": impl,
            "val_exact_match": row["val"][-1][1], **{k: row.get(k) for k in keep}}


def load(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"config": BASE, "train_digits": TRAIN_DIGITS, "test_digits": TEST_DIGITS,
            "n_test": N_TEST, "runs": []}


def show(path: Path) -> None:
    res = load(path)
    by = {}
    for r in res["runs"]:
        impl = r.get("impl", "jax")
        by.setdefault(r["variant"] + ("" if impl == "jax" else f" ({impl})"), []).append(r)
    if not res["runs"]:
        return print(f"abacus_small: no runs in {path}")
    print(f"{'variant':22s} seeds  {TEST_DIGITS}-digit exact (each seed)        mean   "
          f"offsets  " + "  ".join(f"{k}d" for k in sorted(res["runs"][0]["by_length"])))
    for name, rows in by.items():
        em = [r["test_exact_match"] for r in rows]
        offs = [r["test_exact_match_offsets"] for r in rows
                if r.get("test_exact_match_offsets") is not None]
        ladder = {k: np.mean([r["by_length"][k] for r in rows]) for k in rows[0]["by_length"]}
        print(f"{name:22s} {len(rows):5d}  {' '.join(f'{v:.3f}' for v in em):30s} "
              f"{np.mean(em):.3f}  " + (f"{np.mean(offs):.3f}" if offs else "    -")
              + "    "
              + "  ".join(f"{ladder[k]:.2f}" for k in sorted(ladder)))
        pd = np.mean([r["per_digit"] for r in rows], axis=0)
        print(f"{'':22s} per token: {' '.join(f'{v:.2f}' for v in pd)}")


BEST = "offsets-100"   # the variant whose summary --summarise-into writes


def summarise_into(path: Path, variant: str = BEST) -> dict:
    """Write `variant`'s TPU runs as chapter 26's "length_generalisation" summary in `path`
    (`tools/addition_tpu.py`'s file; its own phase-3 runs stay under `LENGEN_KEY`): the seed-0
    exact match on 20-digit sums under each module, every seed's under each, and the
    baseline (learned absolute positions, phase 3's run). Returns the summary; SystemExit
    when the sweep has no run of `variant`."""
    with at_scale("tpu"):
        return _summarise_into(path, variant)


def _summarise_into(path: Path, variant: str) -> dict:
    runs = [r for r in load(PATH)["runs"] if r["variant"] == variant]
    if not runs:
        raise SystemExit(f"abacus_small: no {variant!r} runs in {PATH}")
    saved = json.loads(path.read_text())
    old = saved.get(T.LENGEN_KEY) or {}
    seeds = {}
    for r in runs:
        seeds.setdefault(r.get("impl", "jax"), {})[str(r["seed"])] = r["test_exact_match"]
    c = {**BASE, **VARIANTS[variant]}
    summary = {
        "method": "abacus", "variant": variant, "train_digits": TRAIN_DIGITS,
        "test_digits": TEST_DIGITS, "n_test": N_TEST, "max_offset": c["max_offset"],
        "places": c["places"], "stop_at": c["stop_at"], "max_steps": c["steps"],
        "impl": {impl: by_seed["0"] for impl, by_seed in seeds.items() if "0" in by_seed},
        "seeds": seeds, "baseline": old.get("baseline"),
        "source": f"{PATH.relative_to(ROOT)} (tools/abacus_small.py --scale tpu); the "
                  f"baseline (learned absolute positions, 8,000 steps) from {T.LENGEN_KEY}"}
    saved["length_generalisation"] = summary
    path.write_text(json.dumps(saved, indent=1) + "\n")
    return summary


def show_tpu() -> None:
    """The TPU sweep (chapters/data/abacus-tpu.json) as `show` prints it."""
    with at_scale("tpu"):
        show(PATH)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="baseline")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    ap.add_argument("--impls", default="jax", help="jax, minijax or both: jax,minijax")
    ap.add_argument("--budget-s", type=float, default=1e9,
                    help="start no run after this many seconds from the process's start")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--summarise-into", type=Path, default=None, metavar="ADDITION_JSON",
                    help=f"write the {BEST!r} TPU runs as that file's length_generalisation")
    a = ap.parse_args(argv)
    if a.summarise_into:
        return print(json.dumps(summarise_into(a.summarise_into)))
    use_scale(a.scale)
    out = a.out or PATH
    if a.show:
        return show(out)
    for name in a.variants.split(","):
        if name not in VARIANTS:
            raise SystemExit(f"abacus_small: unknown variant {name!r}; one of {list(VARIANTS)}")
    t_start = time.perf_counter()
    for name in a.variants.split(","):
        for impl in a.impls.split(","):
            for seed in (int(s) for s in a.seeds.split(",")):
                res = load(out)
                if any((r["variant"], r["seed"], r.get("impl", "jax")) == (name, seed, impl)
                       for r in res["runs"]):
                    continue
                if time.perf_counter() - t_start > a.budget_s:
                    print(f"{name} {impl} seed {seed}: not started, past --budget-s", flush=True)
                    continue
                t0 = time.perf_counter()
                row = run_one(name, seed, impl)
                row["wall_s"] = round(time.perf_counter() - t0, 1)
                res = load(out)
                res.setdefault("device_kind", _device_kind())
                res["runs"].append(row)
                out.write_text(json.dumps(res, indent=1) + "\n")
                print(f"{name} {impl} seed {seed}: val {row['val_exact_match']:.3f} "
                      f"test {row['test_exact_match']:.3f} "
                      f"offsets {row['test_exact_match_offsets'] or 0:.3f} "
                      f"ladder {row['by_length']} steps {row['steps']} {row['wall_s']} s\n"
                      f"  per token {row['per_digit']}", flush=True)


def _device_kind() -> str:
    import jax
    return jax.devices()[0].device_kind


if __name__ == "__main__":
    main()
