"""Chapter 27's accelerator sweep (`tools/scaling_tpu.py`) and its fits
(`compare/_scaling_fits.py`): the smoke sweep writes the file the chapter reads, its refit
fills every approach under both conventions, the n-gram baselines match what counting
gives, and approach 2's 95% interval covers a known law's exponent in simulated sweeps."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import scaling_tpu as st  # noqa: E402

from compare import _scaling_fits as sf  # noqa: E402

pytestmark = pytest.mark.slow  # a smoke sweep and coverage simulations: CPU-minutes

RUN_KEYS = {"budget", "params", "params_all", "seed", "tokens", "val_loss", "curve", "steps",
            "flops_6nd", "train_s"}
# a law with Chinchilla's exponents (Hoffmann et al. 2022, eq. 10), a smaller floor
LAW = {"E": 0.7, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def check_shape(doc: dict) -> None:
    assert {"device_kind", "jax", "date", "corpus", "runs", "baselines", "fits", "coverage",
            "moe", "settings", "sizes", "skipped"} <= set(doc)
    assert {"train_bytes", "val_bytes", "files"} <= set(doc["corpus"])
    assert set(doc["baselines"]) == {"unigram", "bigram", "trigram"}
    for r in doc["runs"]:
        assert RUN_KEYS <= set(r)
        assert r["params"] < r["params_mult"] < r["params_all"]
        assert r["flops_6nd"] == 6 * r["params_mult"] * r["tokens"]
        assert all(len(p) == 2 for p in r["curve"]) and r["curve"][-1][0] == r["tokens"]
        assert math.isfinite(r["val_loss"])


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("scaling_tpu") / "27-scaling-laws-tpu.json"
    st.main(["--smoke", "--out", str(out), "--budget-s", "900"])
    return json.loads(out.read_text())


def test_smoke_sweep_writes_every_run(smoke):
    check_shape(smoke)
    cfg = st.SMOKE
    assert not smoke["skipped"]
    assert len(smoke["runs"]) == sum(hi - lo for i, _ in cfg["order"]
                                     for lo, hi in [cfg["windows"][i]])
    for r in smoke["runs"]:
        assert r["tokens"] == r["steps"] * cfg["batch"] * cfg["block"]
        assert r["val_loss"] < math.log(256)    # better than a uniform guess over bytes


def test_smoke_refit_fills_every_approach(smoke):
    starts = [(5.0, 5.0, 0.0, 0.4, 0.4), (10.0, 10.0, 0.5, 0.3, 0.3)]
    fits = sf.fit_all(smoke, n_boot=50, n_sim=5, n_boot3=5, starts=starts)
    doc = {**smoke, **fits}
    check_shape(doc)
    for approach in ("approach1", "approach2", "approach3"):
        assert set(doc["fits"][approach]) == set(sf.CONVENTIONS)
        for f in doc["fits"][approach].values():
            assert isinstance(f["a"], float) and len(f["ci"]) == 2
    assert 0 <= doc["coverage"] <= 1


def test_ngram_baselines_count_a_periodic_text():
    """On a repeated three-byte cycle the unigram model pays log 3 nats a byte, the bigram
    and trigram models (nearly) nothing."""
    text = np.frombuffer(b"abc" * 4000, np.uint8)
    b = st.ngram_baselines(text, text[:300])
    assert b["unigram"]["loss"] == pytest.approx(math.log(3), abs=1e-3)
    assert b["bigram"]["loss"] < 1e-2 and b["trigram"]["loss"] < 1e-2


def _design(law: dict) -> list[dict]:
    """The accelerator sweep's design (its sizes, budgets, tokens and seeds), losses from
    `law` without noise."""
    runs = []
    for spec in st.plan(st.SIZES, st.BUDGETS, st.WINDOWS, st.ORDER, st.BATCH, st.BLOCK):
        c = st.count(*st.SIZES[spec["rung"]], st.BLOCK)
        D = spec["steps"] * st.BATCH * st.BLOCK
        runs.append({"budget": spec["budget"], **c, "seed": spec["seed"], "tokens": D,
                     "val_loss": float(sf.law(law, c["params"], D)), "curve": []})
    return sf.points(runs, "non_embedding")


def test_approach2_interval_covers_a_known_law():
    """Sweeps drawn from a known law with noise, analysed as a real one: the 95% interval
    of approach 2 contains the law's β / (α + β) in at least 90% of them, although the
    parabolas' vertices alone are biased (a valley is not a parabola)."""
    pts = _design(LAW)
    cov = sf.coverage(pts, LAW, sd=0.01, n_sim=60, n_boot=200)
    assert cov["a_true"] == pytest.approx(LAW["beta"] / (LAW["alpha"] + LAW["beta"]))
    assert cov["coverage"] >= 0.9
    free = sf.approach2_columns(pts, [sf.law(LAW, p["N"], p["D"])[:, None] for p in pts])
    assert abs(free["a"][0] - cov["a_true"]) > cov["a_sd"]   # the bias the interval absorbs


def test_committed_sweep_has_the_chapters_shape():
    path = ROOT / "chapters/data/27-scaling-laws-tpu.json"
    if not path.exists():
        pytest.skip("no accelerator sweep committed (chapters/data/27-scaling-laws-tpu.json)")
    check_shape(json.loads(path.read_text()))


def test_without_a_tpu_the_sweep_writes_nothing(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    assert st.main(["--out", str(out)]) == 0
    assert not out.exists() and "no accelerator" in capsys.readouterr().out


def test_moe_mlp_is_a_sum_over_each_tokens_two_experts():
    """The sorted, grouped `ragged_dot` form of the mixture equals its definition token by
    token: the router's softmax, its two largest probabilities renormalised, each chosen
    expert's GELU MLP weighted by its share; and the balancing loss is E * sum_e f_e P_e."""
    import jax
    import jax.numpy as jnp
    B, T, d, E = 2, 5, 8, 4
    ks = jax.random.split(jax.random.key(0), 4)
    a = jax.random.normal(ks[0], (B, T, d))
    p = {"router": jax.random.normal(ks[1], (d, E)),
         "w1": 0.3 * jax.random.normal(ks[2], (E, d, 2 * d)),
         "w2": 0.3 * jax.random.normal(ks[3], (E, 2 * d, d))}
    out, aux = st.moe_mlp(a, p)

    def bf(x):   # the kernel's operands are bf16, its sums f32
        return np.asarray(jnp.asarray(x, jnp.bfloat16).astype(jnp.float32), np.float64)
    x = np.asarray(a, np.float64).reshape(-1, d)
    logits = x @ np.asarray(p["router"], np.float64)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    want = np.zeros_like(x)
    picks = np.zeros(E)
    for n in range(x.shape[0]):
        top = np.argsort(-probs[n])[:st.TOP_K]
        share = probs[n, top] / probs[n, top].sum()
        for e, g in zip(top, share):
            h = np.asarray(jax.nn.gelu(jnp.asarray(bf(x[n]) @ bf(p["w1"][e]), jnp.float32)))
            want[n] += g * (bf(h) @ bf(p["w2"][e]))
            picks[e] += 1
    np.testing.assert_allclose(np.asarray(out).reshape(-1, d), want, rtol=2e-2, atol=2e-2)
    balance = E * np.sum(picks / picks.sum() * probs.mean(0))
    assert float(aux) == pytest.approx(balance, rel=1e-4)
    c = st.count(2, d, 16, experts=E)
    assert c["params_total"] - c["params"] == 2 * (E - st.TOP_K) * 4 * d * d


def test_moe_vs_dense_reads_matched_budgets():
    """The comparison per budget: the best seed mean of each kind, the difference at each
    shared size, and the step-time price, from runs whose numbers are chosen here."""
    def run(rung, seed, loss, params, experts=0):
        return {"budget": 1e15, "rung": rung, "seed": seed, "val_loss": loss, "params": params,
                "experts": experts}
    doc = {"runs": [run(2, 0, 1.10, 1e6), run(2, 1, 1.12, 1e6), run(3, 0, 1.00, 2e6),
                    run(4, 0, 1.05, 4e6)],
           "moe": [run(2, 0, 1.00, 1e6, 8), run(3, 0, 0.95, 2e6, 8), run(4, 0, 0.99, 4e6, 8)],
           "sizes": [{"rung": 3, "experts": 0, "step_s": 0.01},
                     {"rung": 3, "experts": 8, "step_s": 0.025}]}
    (row,) = sf.moe_vs_dense(doc)
    assert row["dense"]["loss"][0] == pytest.approx(1.11)
    assert row["delta_best"] == pytest.approx(0.95 - 1.00)
    assert row["delta_same_size"] == pytest.approx({2: 1.00 - 1.11, 3: -0.05, 4: -0.06})
    assert row["step_ratio"] == pytest.approx({3: 2.5})
    assert row["moe"]["N_best"] == 2e6
