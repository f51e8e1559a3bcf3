"""The `addition` comparison topic (`compare/addition.py`) at quick sizes: the data made by code
(formats, carries, splits with no shared pair), a tiny model trained in lockstep through minijax,
JAX and Flax NNX from the same weights, the attention recorder and the carry probe."""

import dataclasses

import jax
import numpy as np
import pytest
from model_checks import assert_grads_checked_and_profiled

from compare import addition, gpt


def test_encode_writes_reversed_padded_sums_and_scores_only_the_answer():
    a, b = np.array([47, 999]), np.array([385, 1])
    x, y = addition.encode(a, b, 3)
    seq = lambda row: "".join(addition.CHARS[t] for t in row)
    assert seq(x[0]) == "047+385=234"          # 432 -> "0432" reversed; last digit is a target
    assert seq(x[1]) == "999+001=000"
    answer = [addition.CHARS[t] for t in y[0] if t != addition.IGNORE]
    assert "".join(answer) == str(47 + 385).zfill(4)[::-1]
    assert (y[:, :7] == addition.IGNORE).all()  # no loss on the prompt
    plain_x, plain_y = addition.encode(a, b, 3, addition.Format(reverse=False, pad=False))
    assert seq(plain_x[0]).startswith("47+385=432")
    assert "".join(addition.CHARS[t] for t in plain_y[1] if t != addition.IGNORE) == "1000."
    nosep, _ = addition.encode(a, b, 3, addition.Format(sep=False))
    assert seq(nosep[0]) == "047385234"


def test_carries_count_like_schoolbook_addition():
    rng = np.random.RandomState(0)
    a, b = rng.randint(0, 1000, 500), rng.randint(0, 1000, 500)
    c = addition.carries(a, b, 3)
    for av, bv, row in zip(a, b, c):
        carry, want = 0, [0]
        for i in range(3):
            carry = int((av // 10 ** i % 10) + (bv // 10 ** i % 10) + carry >= 10)
            want.append(carry)
        assert row.tolist() == want
    # The sum's digits follow from the operands' digits and the carries.
    da, db = addition.digits(a, 3)[:, ::-1], addition.digits(b, 3)[:, ::-1]
    ds = addition.digits(a + b, 4)[:, ::-1]
    np.testing.assert_array_equal(ds[:, :3], (da + db + c[:, :3]) % 10)


def test_splits_share_no_pair_and_mirror_pairs_stay_together():
    rng = np.random.RandomState(1)
    a, b = rng.randint(0, 10 ** 4, 20000), rng.randint(0, 10 ** 4, 20000)
    np.testing.assert_array_equal(addition.split_of(a, b, 4), addition.split_of(b, a, 4))
    share = np.bincount(addition.split_of(a, b, 4), minlength=3) / len(a)
    assert abs(share[0] - 0.02) < 0.005 and abs(share[1] - 0.01) < 0.004
    s = addition.setup("quick")
    assert addition.no_shared_pair(addition.splits(s), s.digits)


@pytest.mark.slow
def test_addition_topic_quick():
    res = addition.run(quick=True)
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert len(res.checks) >= 5 and not failing, failing
    jx = res.extra["jax"]["losses"]
    assert len(jx) == addition.SIZES["quick"]["steps"]
    assert res.extra["minijax"]["losses"] == pytest.approx(jx, rel=1e-4)
    assert res.extra["nnx"]["losses"] == pytest.approx(jx, rel=1e-3)
    assert {"digits", "params", "by_carries", "length_generalisation"} <= set(res.extra)
    assert set(res.extra["by_carries"]) <= {"0", "1", "2", "3"}
    assert res.extra["length_generalisation"]["digits"] == 4
    for name in ("minijax", "jax", "nnx"):
        assert res.extra[name]["step_ms"] > 0
    probe = res.extra["probe"]
    assert [p["layer"] for p in probe] == [0, 1] and all(0.5 <= p["baseline"] <= 1 for p in probe)
    assert_grads_checked_and_profiled(res, ["step trace+lower", "step compile"])


@pytest.mark.slow
def test_a_small_model_learns_two_digit_addition():
    """A seeded run that has to learn: 2-digit sums, 2 layers, d=64, 600 steps of 128 sums,
    under minijax and JAX in lockstep from the same weights; each must get at least 99% of
    250 held-out test sums (of the 280 in the test split) exactly right. Seeds 0, 1 and 2 of
    this setup reach a validation exact match of 1.0 between steps 400 and 500 on a CPU and
    score 0.996-1.0 on the test sums, so 600 steps leave a margin. About 50 CPU-seconds a
    seed. Where XLA:CPU rounds otherwise (seed 0 on an AVX-512 machine with eight host
    devices, 2026-12-07: both modules, bit-equal, stall at 0.1), the next seed is tried: one
    of the three must learn, and every seed tried must keep the modules in lockstep."""
    import minijax
    cfg = gpt.Config(vocab=addition.VOCAB, block=addition.Format().length(2) - 1, n_layer=2,
                     d_model=64, n_head=4, batch=128, steps=600, warmup=60, peak_lr=3e-3,
                     end_lr=3e-4)
    s = addition.Setup(2, cfg, eval_every=100)
    val = addition.make_split(2, 60, 1, 11, s.fmt)
    test = addition.make_split(2, 250, 0, 12, s.fmt)
    tried = []
    for seed in (0, 1, 2):
        runners = {name: addition.raw_runner(J, s, gpt.init_params(cfg, seed))
                   for name, J in (("minijax", minijax), ("jax", jax))}
        runs = addition.train(runners, s, val, quiet=True)
        assert runs["minijax"]["losses"] == pytest.approx(runs["jax"]["losses"], rel=1e-4)
        scores = {name: addition.score(addition.predict(J, prog, runs[name]["state"][0],
                                                        test.x, chunk=250), test, 2)
                  for name, (J, prog, _) in runners.items()}
        learned = {name: scores[name]["exact_match"] >= 0.99
                   and runs[name]["losses"][-1] < 0.05 * runs[name]["losses"][0]
                   for name in runners}
        assert learned["minijax"] == learned["jax"], (seed, scores)
        tried.append((seed, runs["minijax"]["val"]))
        if learned["minijax"]:
            return
    pytest.fail(f"no seed learned two-digit addition: {tried}")


@pytest.mark.slow
def test_an_unpadded_format_trains_and_scores_its_variable_answer_positions():
    s = addition.setup("quick")
    s = dataclasses.replace(s, model=dataclasses.replace(s.model, steps=10), eval_every=5)
    r = addition.train_format(s, addition.Format(pad=False), quiet=True, label="no padding")
    assert [step for step, _ in r["val"]] == [5, 10]
    assert r["example"].endswith(".") and "=" in r["example"] and np.isfinite(r["final_loss"])


def test_recorder_sees_the_attention_weights_jax_computes():
    s = addition.setup("quick")
    params = gpt.init_params(s.model, 3)
    params = jax.tree_util.tree_map(lambda p: p * 20 if p.ndim >= 2 else p, params)
    maps = addition.attention_maps(s, params, [12, 345], [678, 9])
    assert len(maps) == s.model.n_layer and maps[0].shape == (2, 2, s.seq_len, s.seq_len)
    np.testing.assert_allclose(maps[0].sum(-1), 1.0, rtol=1e-5)
    assert np.allclose(np.triu(maps[0], 1), 0)   # causal
    # Layer 0's weights from the embeddings by hand: softmax(q k^T / sqrt(dh)) under the mask.
    x, _ = addition.encode(np.array([12, 345]), np.array([678, 9]), s.digits, s.fmt,
                           s.seq_len + 1)
    blk, T, H = params["blocks"][0], s.seq_len, s.model.n_head
    h = params["wte"][x] + params["wpe"][:T]
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    qkv = (h @ blk["w_qkv"] + blk["b_qkv"]).reshape(2, T, 3, H, -1)
    sc = np.einsum("bqhd,bkhd->bhqk", qkv[:, :, 0], qkv[:, :, 1]) / np.sqrt(qkv.shape[-1])
    sc = np.where(np.tril(np.ones((T, T), bool)), sc, -np.inf)
    want = np.exp(sc - sc.max(-1, keepdims=True))
    np.testing.assert_allclose(maps[0], want / want.sum(-1, keepdims=True), rtol=1e-4,
                               atol=1e-6)


def test_10M_configuration_counts_about_ten_million_parameters():
    s = addition.setup("10M")
    p = addition.n_params(gpt.init_params(s.model))
    d, L, V, T = s.model.d_model, s.model.n_layer, addition.VOCAB, s.model.block
    assert p == L * (12 * d * d + 13 * d) + (V + T) * d + 2 * d + d * V
    assert 9e6 < p < 11e6


def test_bad_setup_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        addition.setup("huge")
    with pytest.raises(ValueError, match="digits must be 1..9"):
        addition.setup("default", digits=12)
    plain = addition.setup("quick", fmt=addition.Format(reverse=False))
    with pytest.raises(ValueError, match="operand_attention: reads the answer positions"):
        addition.operand_attention(plain, [])
