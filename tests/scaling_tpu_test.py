"""Chapter 27's accelerator sweep (`tools/scaling_tpu.py`) and its fits
(`compare/scaling_fits.py`): the smoke sweep writes the file the chapter reads, its refit
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

from compare import scaling_fits as sf  # noqa: E402

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
