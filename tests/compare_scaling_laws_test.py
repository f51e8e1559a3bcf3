"""The `scaling_laws` comparison topic (`compare/scaling_laws.py`) at quick sizes: the sweep's
JSON has the layout the report and chapter 27 read, every run spends its budget, the points
trained through both modules agree, a stopped sweep resumes from its cache, and the fits
recover exponents that are known in closed form."""

import json
import shutil

import numpy as np
import pytest

from compare import scaling_laws as sl
from compare._report import write_json

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the quick sweep) is computed once, not once per worker.
pytestmark = pytest.mark.xdist_group("compare_scaling_laws_test")

RUN_KEYS = {"budget", "params", "tokens", "seed", "kind", "val_loss", "flops_6nd", "flops_xla"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick topic, on the shared run cache (chapter 27 reads the same runs; the resume
    test below retrains one of them and checks that it matches what the cache holds)."""
    res = sl.run(quick=True)
    path = tmp_path_factory.mktemp("scaling") / "scaling_laws.json"
    write_json({"scaling_laws": res}, path)
    return res, json.loads(path.read_text())["topics"]["scaling_laws"]


@pytest.mark.slow
def test_quick_sweep_json_layout(quick):
    res, doc = quick
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert not failing, failing
    q = sl.QUICK
    assert doc["budgets"] == sorted(q.budgets)
    runs = doc["runs"]
    assert all(RUN_KEYS <= set(r) for r in runs)
    for kind, seeds in (("dense", q.seeds), ("moe", q.moe_seeds)):
        mine = [r for r in runs if r["kind"] == kind]
        assert len(mine) == len(q.budgets) * q.window * len(seeds)
        assert {(r["budget"], r["seed"]) for r in mine} == {
            (c, s) for c in q.budgets for s in seeds}
    for r in runs:
        assert r["flops_6nd"] == 6 * r["params"] * r["tokens"]
        assert r["tokens"] == r["steps"] * q.batch * q.block
        assert abs(r["flops_6nd"] / r["budget"] - 1) < 0.02
        assert r["flops_xla"] > r["flops_6nd"]  # attention, the optimizer, elementwise ops
        assert np.isfinite(r["val_loss"]) and r["val_loss"] < np.log(70)
    fit = doc["fit"]
    for k in ("a", "b"):
        assert isinstance(fit[k], float) and len(fit[f"{k}_ci"]) == 2
    assert {"E", "A", "B", "alpha", "beta", "a", "b", "alpha_ci", "beta_ci", "a_ci"} <= set(
        fit["approach3"])
    md = doc["moe_vs_dense"]
    assert len(md["delta_loss_opt"]) == len(md["delta_loss_opt_ci"]) == len(q.budgets)
    assert len(md["delta_at_same_size"]) == len(q.budgets)


@pytest.mark.slow
def test_quick_sweep_cross_check_through_jax(quick):
    _, doc = quick
    xc = doc["cross_check"]
    assert len(xc["minijax_losses"]) == len(xc["jax_losses"]) == len(sl.QUICK.budgets)
    assert xc["minijax_losses"] == pytest.approx(xc["jax_losses"], rel=1e-4)
    assert max(xc["max_rel_step_loss_diff"]) <= 1e-4
    terms = doc["flops"]["dense"]
    assert terms["six_nd"] + terms["attention"] + terms["rest"] == pytest.approx(
        terms["xla_forward_backward"])
    assert terms["optimizer"] > 0


@pytest.mark.slow
def test_a_stopped_sweep_resumes_from_its_cache(quick, tmp_path):
    _, doc = quick
    data, source = sl.load_data(sl.QUICK)
    files = [sl.cache_path(sl.QUICK, data, source, spec, sl.DEFAULT_CACHE)
             for spec in sl.plan(sl.QUICK)]
    assert all(f.exists() for f in files)
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    dense = [f for f in files if f.name.startswith("dense-") and "-minijax-" in f.name]
    (tmp_path / dense[0].name).unlink()  # as if the sweep had stopped before this run
    runs, stats = sl.run_sweep(sl.QUICK, data, source, tmp_path)
    assert (stats["trained"], stats["cached"]) == (1, len(files) - 1)
    got = sorted((r["kind"], r["budget"], r["params"], r["seed"], r["val_loss"])
                 for r in runs if r["module"] == "minijax")
    want = sorted((r["kind"], r["budget"], r["params"], r["seed"], r["val_loss"])
                  for r in doc["runs"])
    assert got == want  # the retrained run gives the loss the cache held, to the bit


def _synthetic(alpha=0.34, beta=0.28, E=1.69, A=406.4, B=410.7, seeds=3, sd=0.0):
    """An isoFLOP grid whose losses follow L(N, D) = E + A/N^α + B/D^β (plus seed noise)."""
    rng = np.random.default_rng(0)
    runs = []
    budgets = np.geomspace(1e18, 1e21, 4)
    for c in budgets:
        n_opt = sl.n_opt_approach3({"E": E, "A": A, "B": B, "alpha": alpha, "beta": beta}, c)
        for n in n_opt * np.geomspace(0.25, 4, 5):
            d = c / (6 * n)
            for s in range(seeds):
                loss = E + A / n ** alpha + B / d ** beta + sd * rng.standard_normal()
                runs.append({"kind": "dense", "module": "minijax", "budget": float(c),
                             "params": float(n), "tokens": float(d), "seed": s,
                             "val_loss": float(loss)})
    return runs


def test_fits_recover_known_exponents():
    runs = _synthetic()
    g = sl.grid(runs, "dense")
    fit = sl.exponents(g, n_boot=50)
    want = 0.28 / (0.34 + 0.28)
    assert fit["a"] == pytest.approx(want, abs=0.01)
    assert fit["a"] + fit["b"] == pytest.approx(1.0)  # D_opt = C / (6 N_opt)
    a3 = sl.fit_approach3(g["N"].ravel(), g["D"].ravel(), g["L"][:, :, 0].ravel())
    assert (a3["alpha"], a3["beta"], a3["E"]) == pytest.approx((0.34, 0.28, 1.69), rel=0.02)


def test_bootstrap_intervals_widen_with_seed_noise():
    quiet = sl.exponents(sl.grid(_synthetic(sd=0.002), "dense"), n_boot=300)
    noisy = sl.exponents(sl.grid(_synthetic(sd=0.02), "dense"), n_boot=300)
    width = lambda f: f["a_ci"][1] - f["a_ci"][0]
    assert quiet["a_ci"][0] <= quiet["a"] <= quiet["a_ci"][1]
    assert width(noisy) > 3 * width(quiet)
