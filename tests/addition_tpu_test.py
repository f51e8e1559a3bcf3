"""tools/addition_tpu.py on the CPU: the no-TPU path, every phase at a tiny size (`--smoke`: the
code a TPU run executes) and the shape of what it writes, the Abacus encoding of long sums,
the readers chapter 26 calls, and the shape of a committed TPU run (never its numbers)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from compare import addition
from tools import addition_tpu as T

pytestmark = [pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                 reason="the CPU path; on a TPU, run the script itself"),
              pytest.mark.slow]  # smoke runs of whole scripts: tens of CPU-seconds

RUN_KEYS = {"impl", "digits", "seed", "steps_to_99", "test_exact_match", "train_s", "curve",
            "val", "steps", "ms_per_step", "cut", "final_loss"}


def check_shape(saved: dict) -> None:
    assert {"device_kind", "jax", "date", "params", "config", "runs"} <= set(saved)
    for r in saved["runs"] + saved.get("robustness", []) + saved.get("ablations", []):
        assert RUN_KEYS <= set(r), sorted(r)
        assert r["steps_to_99"] is None or 0 < r["steps_to_99"] <= r["steps"]
        assert all(len(p) == 2 for p in r["curve"] + r["val"])
    for r in saved.get("robustness", []):
        assert r["variant"] in T.VARIANTS and r["impl"] == "jax"
    for r in saved.get("ablations", []):
        assert r["format"] in {"default", *addition.ABLATIONS} and r["impl"] == "jax"
    for key in ("length_generalisation", T.LENGEN_KEY):
        lg = saved.get(key)
        if lg:
            assert {"method", "train_digits", "test_digits", "impl", "baseline"} <= set(lg)
            assert lg["method"] == "abacus" and set(lg["impl"]) <= {"minijax", "jax"}


def test_without_a_tpu_the_script_trains_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "26-addition-tpu.json"
    assert T.main(["--out", str(out)]) == 0
    assert not out.exists()
    said = capsys.readouterr().out
    assert "no accelerator" in said and "'cpu'" in said and "not written" in said


def test_smoke_run_writes_every_phase_in_the_documented_shape(tmp_path, capsys):
    # phase 1 alone, then the other phases merged into its file, as the TPU runs were made
    first = tmp_path / "phase1.json"
    T.run(first, smoke=True, budget_s=1e6, phases=(1,))
    out = tmp_path / "26-addition-tpu.json"
    saved = T.run(out, smoke=True, budget_s=1e6, phases=(2, 3, 4, 5), merge_into=first)
    on_disk = json.loads(out.read_text())
    assert on_disk == json.loads(json.dumps(saved))
    check_shape(on_disk)
    assert on_disk["runs"][:2] == json.loads(first.read_text())["runs"]   # kept, not redone
    assert [s["phases"] for s in on_disk["sessions"]] == [[1], [2, 3, 4, 5]]
    assert {(r["impl"], r["digits"]) for r in on_disk["runs"]} == {
        ("minijax", 3), ("jax", 3), ("nnx", 3)}
    mj, jx = ([r for r in on_disk["runs"] if r["impl"] == name][0] for name in ("minijax", "jax"))
    # the same weights, batches and code under both modules: the same losses
    np.testing.assert_allclose([c[1] for c in mj["curve"]], [c[1] for c in jx["curve"]],
                               rtol=1e-4)
    assert mj["steps"] == 30 and mj["val"][-1][0] == 30 and not mj["cut"]
    assert [r["variant"] for r in on_disk["robustness"]] == list(T.VARIANTS)
    lg = on_disk[T.LENGEN_KEY]
    assert set(lg["impl"]) == {"minijax", "jax"} and lg["baseline"] is not None
    assert [(r["impl"], r["abacus"]) for r in lg["runs"]] == [
        ("jax", True), ("jax", False), ("minijax", True)]
    for r in lg["runs"]:
        assert set(r["by_length"]) == {"4", "5"} and len(r["per_digit"]) == 6 + 2
    ab = on_disk["ablations"]
    assert [r["format"] for r in ab] == ["default", *addition.ABLATIONS]
    assert all(r["steps"] == 30 and r["seed"] == 0 for r in ab)   # no early stop
    again = T.run(tmp_path / "again.json", smoke=True, budget_s=1e6, phases=(1, 4, 5),
                  merge_into=out)     # every run of these phases is saved: none is redone
    assert again["runs"] == on_disk["runs"] and again["ablations"] == on_disk["ablations"]
    capsys.readouterr()
    T.show(out)
    T.show_robustness(out)
    T.show_length_generalisation(out)
    T.show_ablations(out)
    said = capsys.readouterr().out
    assert "3-digit sums" in said and "minijax: 0/1 seeds" in said and "nnx: 0/1 seeds" in said
    assert "minijax's losses against JAX's, per seed: seed 0 the same for 30 steps" in said
    assert "precision highest" in said and "warmup 1000" in said and "Abacus places" in said
    assert "no zero padding" in said


def test_a_merge_refuses_another_plan_and_a_missing_file(tmp_path):
    saved = tmp_path / "full.json"
    saved.write_text(json.dumps({"device_kind": jax.devices()[0].device_kind, "smoke": False,
                                 "stop_at": 0.995, "runs": []}))
    with pytest.raises(ValueError, match="cannot merge into .*'smoke': False"):
        T.run(tmp_path / "out.json", smoke=True, phases=(), merge_into=saved)
    with pytest.raises(ValueError, match="does not exist"):
        T.run(tmp_path / "out.json", smoke=True, phases=(), merge_into=tmp_path / "absent")
    assert not (tmp_path / "out.json").exists()


def test_a_run_past_its_budget_stops_and_says_so(tmp_path):
    saved = T.run(tmp_path / "cut.json", smoke=True, budget_s=0.0, phases=(1,))
    assert saved["runs"] == []


def test_abacus_writes_numbers_units_first_and_numbers_their_places():
    x, places, y = T.abacus_encode([47, 12345678901234567890], [385, 9], 3 * 20 + 4,
                                   np.array([0, 3]))
    text = lambda row: "".join(addition.CHARS[t] for t in row)
    assert text(x[0]).startswith("74+583=234.") and set(text(x[0])[11:]) == {"."}
    assert places[0, :11].tolist() == [1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 0]  # '=' at offset 0
    answer = "".join(addition.CHARS[t] for t in y[0] if t != addition.IGNORE)
    assert answer == "234."                        # 432 units first, then the closing '.'
    assert (y[0, :6] == addition.IGNORE).all()     # the model reads '=' and writes 2 next
    assert y[0, 6] == 2
    long = str(12345678901234567890 + 9)[::-1] + "."
    assert "".join(addition.CHARS[t] for t in y[1] if t != addition.IGNORE) == long
    assert places[1, 0] == 4 and places[1, 19] == 23 and places[1, 20] == 0  # offset 3
    assert places[1, 20 + 1 + 1] == 3                # '=' after 9: one place below the units
    tokens = T.abacus_tokens(x, places, 32)
    np.testing.assert_array_equal(tokens // 32, x)
    np.testing.assert_array_equal(tokens % 32, places)


def test_length_generalisation_sets_have_the_lengths_they_claim():
    sets = T.lengen_sets(3, 6, 50)
    for name, k in (("val", 3), ("test", 6)):
        x, places, y = sets[name]
        assert x.shape == (50, 3 * k + 3) and places.max() == k + 2   # offset 1
        assert (x[:, k] == addition.PLUS).all()     # every operand has exactly k digits
    (bx, by), = [next(T.lengen_batches(3, 64, 0, abacus=False, n_places=1))]
    assert bx.shape == by.shape == (64, 12) and bx.max() < addition.VOCAB


def test_lengen_detail_scores_each_length_and_each_answer_token():
    test = T.lengen_sets(3, 6, 40)["test"]
    ladder = T.lengen_ladder(3, 6, 30)
    assert sorted(ladder) == [4, 5] and all(x.shape == (30, 21) for x, _, _ in ladder.values())

    def next_token(x, units_wrong=False):   # the true next token: right wherever it is scored
        out = np.concatenate([x[:, 1:], np.full((len(x), 1), addition.END)], axis=1)
        if units_wrong:
            eq = np.argmax(x == addition.EQUALS, axis=1)
            out[np.arange(len(x)), eq] = (out[np.arange(len(x)), eq] + 1) % 10
        return out.astype(np.int32)
    for wrong in (False, True):
        tr = T.Trainer(jax, None, None, lambda state, x, w=wrong: next_token(np.asarray(x), w))
        got = T.lengen_detail(tr, None, (test[0], test[2]),
                              {k: (x, y) for k, (x, _, y) in ladder.items()}, chunk=16)
        assert got["by_length"] == ({"4": 0.0, "5": 0.0} if wrong else {"4": 1.0, "5": 1.0})
        assert got["per_digit"] == [0.0 if wrong else 1.0] + [1.0] * 7   # 6 or 7 digits, '.'


def test_show_says_when_no_tpu_run_is_committed(tmp_path, capsys):
    for reader in (T.show, T.show_robustness, T.show_length_generalisation, T.show_ablations):
        reader(tmp_path / "absent.json")
        assert "No TPU run is committed" in capsys.readouterr().out
    T.plot_seeds(tmp_path / "none.png", tmp_path / "absent.json")
    assert "No TPU run is committed" in capsys.readouterr().out
    assert not (tmp_path / "none.png").exists()


def test_plot_seeds_draws_every_run(tmp_path, capsys):
    run = {"impl": "jax", "digits": 3, "seed": 0, "val": [[100, 0.5], [200, 1.0]]}
    path = tmp_path / "saved.json"
    path.write_text(json.dumps({"runs": [run, {**run, "impl": "minijax", "seed": 1}]}))
    T.plot_seeds(tmp_path / "seeds.png", path)
    assert (tmp_path / "seeds.png").stat().st_size > 0
    assert "2 runs drawn" in capsys.readouterr().out


def test_the_committed_tpu_run_has_the_documented_shape():
    saved = T.load()
    if saved is None:
        pytest.skip("no TPU run committed (chapters/data/26-addition-tpu.json)")
    check_shape(saved)
    assert saved["device_kind"].startswith("TPU") and not saved["smoke"]
    assert {r["impl"] for r in saved["runs"]} >= {"minijax", "jax"}
