"""The Scaling Book's exercises (compare/_scaling_exercises.py) against its published answers,
and the models of compare/_scaling_models.py against hand mathematics.

Each exercise part is one test: our number, computed from the question's inputs, must equal the
book's published number within the book's rounding, except for the rows listed in
DISAGREEMENTS, which must really disagree and carry a note saying why.
The book's numbers are facts copied from github.com/jax-ml/scaling-book (chapter and question in
each row's id)."""

import math

import pytest

from compare import _scaling_models as sm
from compare._scaling_exercises import EXERCISES, all_answers

ANSWERS = all_answers()


# The rows where our number and the book's differ beyond its rounding, each with its reason
# in the row's note: the book's 16 GiB read as 16e9 bytes (tpus Q6), an all-reduce priced on
# the whole array instead of one block (sharding Q2.c), 128 (3/4)^2 printed as 81 (inference
# Q7), and a chain of HBM slips in the serving tables (applied-inference).
DISAGREEMENTS = {
    ("tpus", "Q6.pcie"), ("tpus", "Q6.ici"), ("tpus", "Q6.hbm"), ("sharding", "Q2.c"),
    ("inference", "Q7.N"),
    *(("applied-inference", i) for i in (
        "min.int8.free", "min.int8.batch", "min.int4.params", "min.int4.free", "min.int4.batch",
        "qps2x.bf16", "qps.int8", "qps2x.int8", "qps.int4", "qps2x.int4")),
}


@pytest.mark.parametrize("ans", ANSWERS, ids=[f"{a.chapter}:{a.id}" for a in ANSWERS])
def test_exercise_matches_book_or_explains(ans):
    if ans.book is None:
        assert ans.note.startswith("the book publishes no answer"), ans
        assert ans.ours is not None
    elif (ans.chapter, ans.id) in DISAGREEMENTS:
        assert not ans.ok and ans.note, ans
    else:
        assert ans.ok, f"{ans.chapter} {ans.id}: ours {ans.ours} vs book {ans.book} " \
            f"(rtol {ans.rtol})"


def test_every_chapter_with_exercises_is_answered():
    chapters = {a.chapter for a in ANSWERS}
    assert chapters >= {"roofline", "tpus", "sharding", "transformers", "training",
                        "applied-training", "inference", "applied-inference", "profiling"}
    ids = [(a.chapter, a.id) for a in ANSWERS]
    assert len(ids) == len(set(ids)), "duplicate exercise ids"
    assert len(EXERCISES) >= 50


def test_known_book_slips_are_flagged_as_disagreements():
    rows = {(a.chapter, a.id): a for a in ANSWERS}
    # inference.md Q7: 128 (3/4)^2 = 72, the book prints 81
    q7 = rows["inference", "Q7.N"]
    assert not q7.ok and math.isclose(q7.ours, 72, rel_tol=1e-6)
    # sharding.md Q2.c: the book reduces the whole array instead of one [B_X, D_Y] block
    assert not rows["sharding", "Q2.c"].ok
    assert math.isclose(rows["sharding", "Q2.c"].book / rows["sharding", "Q2.c"].ours, 16,
                        rel_tol=0.05)


def test_roofline_and_critical_batch():
    r = sm.roofline(2e12, 1e9, peak=1e12, bw=1e9)
    assert r["t_math"] == 2.0 and r["t_comms"] == 1.0 and r["bound"] == "compute"
    assert r["lower"] == 2.0 and r["upper"] == 3.0
    v5e = sm.CHIPS["v5e"]
    b = sm.matmul_critical_batch(v5e.peak(), v5e.hbm_bw, D=8192, F=32768)
    flops, nbytes = sm.matmul_cost(math.ceil(b), 8192, 32768)
    assert flops / v5e.peak() >= nbytes / v5e.hbm_bw  # compute-bound just above it
    flops, nbytes = sm.matmul_cost(math.floor(b), 8192, 32768)
    assert flops / v5e.peak() < nbytes / v5e.hbm_bw


def test_collective_costs():
    v4p = sm.CHIPS["v4p"]
    ag = sm.collective_time("all-gather", 1e9, v4p)
    assert ag == 1e9 / 9e10
    assert sm.collective_time("all-reduce", 1e9, v4p) == 2 * ag
    assert sm.collective_time("all-to-all", 1e9, v4p) == ag / 4
    assert sm.collective_time("all-gather", 1e9, v4p, n=4, exact=True) == 0.75 * ag
    line = sm.collective_time("all-gather", 1e9, v4p, n=4, wraparound=False)
    assert line == 0.75 * 1e9 / 4.5e10
    assert sm.switched_collective_time("all-reduce", 8e9, 8, 4.5e11) == 2 * 7e9 / 4.5e11
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        sm.collective_time("gather", 1.0, v4p)


def test_ring_link_load_small_ring_by_hand():
    # 4 devices, one-way: a strip of N^2/4 crosses each link 3 times; all-to-all blocks of
    # N^2/16 travel 1 + 2 + 3 hops from each source, 6 blocks on the busiest link
    assert sm.ring_link_load("all-gather", 4, 4, False) == 3 * 4
    assert sm.ring_link_load("all-to-all", 4, 4, False) == 6 * 1


def test_matmul_collective_cases():
    assert sm.matmul_collective(("X", None), (None, "Y")) == "none"
    assert sm.matmul_collective((None, "X"), (None, None)) == "all-gather A over X"
    assert sm.matmul_collective((None, "X"), ("X", None)) == "all-reduce over X"
    with pytest.raises(ValueError, match="two different axes"):
        sm.matmul_collective((None, "X"), ("Y", None))


def test_transformer_counts_by_hand():
    m = sm.Transformer(L=2, D=4, F=8, N=2, K=1, H=2, V=10)
    assert m.attn_params() == 2 * (2 * 4 * 2 * 2 + 2 * 4 * 1 * 2)
    assert m.ffw_params() == 2 * 3 * 4 * 8
    assert m.params() == m.attn_params() + m.ffw_params() + 2 * 10 * 4
    assert m.kv_bytes_per_token(2) == 2 * 2 * 1 * 2 * 2
    moe = sm.Transformer(L=2, D=4, F=8, N=2, K=1, H=2, V=10, E=4, k=2)
    assert moe.params() - m.params() == 3 * m.ffw_params()
    assert moe.params(active=True) - m.params() == m.ffw_params()
    assert m.train_flops(5) == 6 * m.params() * 5


def test_bad_chip_dtype_names_the_chip():
    with pytest.raises(ValueError, match="TPU v5e: no peak FLOP/s for dtype 'fp8'"):
        sm.CHIPS["v5e"].peak("fp8")


def test_pipeline_bubble_and_dcn_threshold():
    # GPipe: 4 stages, 12 microbatches -> 3 idle slots out of 15
    assert sm.pipeline_bubble(4, 12) == 3 / 15
    # training.md, "To go larger than one pod": data parallelism over DCN is compute-bound
    # above C_pod / W_dcn ~ 76,000 tokens per pod (the book rounds 8960 chips to 8k, 4.59e14
    # to 4.5e14 and 2240 hosts to 2000)
    v5p = sm.CHIPS["v5p"]
    assert math.isclose(sm.dcn_min_batch_per_pod(8960, v5p), 76_000, rel_tol=0.05)
