"""tools/abacus_small.py and the option it adds to addition_tpu.raw_trainer: input injection
(the same model as without it at one block, another from the second block on), test-time
attention sharpening (the logits scaled by tau, the output unchanged where attention is
one-hot), and the operand lengths each training variant draws."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from compare import addition, gpt
from tools import abacus_small as A, addition_tpu as T

pytestmark = pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                reason="the CPU path; on a TPU, run the script itself")


def test_input_injection_changes_the_model_only_from_its_second_block():
    cfg = gpt.Config(vocab=addition.VOCAB, n_layer=1, d_model=16, n_head=2, block=12, batch=4)
    x = np.random.RandomState(0).randint(0, 6 * 12, size=(4, 11)).astype(np.int32)
    for layers, same in ((1, True), (2, False)):
        c = dataclasses.replace(cfg, n_layer=layers)
        outs = []
        for inject in (False, True):
            tr = T.raw_trainer(jax, c, 11, abacus_places=6, inject=inject)
            state = tr.init(0)
            for _ in range(3):   # trained a little, so that the blocks are not near identity
                state, _ = tr.step(state, x, x % addition.VOCAB)
            outs.append(np.asarray(tr.step(state, x, x % addition.VOCAB)[1]))
        assert np.allclose(outs[0], outs[1], rtol=1e-5) == same, (layers, outs)


def test_sharpening_scales_the_query_projection_only():
    params = gpt.init_params(gpt.Config(vocab=13, n_layer=2, d_model=8, n_head=2), 0)
    got = A.sharpened(params, 2.0, 8)
    for old, new in zip(params["blocks"], got["blocks"]):
        np.testing.assert_allclose(new["w_qkv"][:, :8], 2.0 * old["w_qkv"][:, :8])
        np.testing.assert_array_equal(new["w_qkv"][:, 8:], old["w_qkv"][:, 8:])
        np.testing.assert_array_equal(new["w_o"], old["w_o"])
    np.testing.assert_array_equal(params["blocks"][0]["w_qkv"],   # the input is not changed
                                  gpt.init_params(gpt.Config(vocab=13, n_layer=2, d_model=8,
                                                             n_head=2), 0)["blocks"][0]["w_qkv"])


@pytest.mark.parametrize("lengths", ["uniform", "long", "equal"])
def test_training_batches_draw_the_operand_lengths_of_their_variant(lengths):
    c = {**A.BASE, "lengths": lengths, "batch": 2000}
    tokens, y = next(A.batches(c, 0))
    x = tokens // A.n_places(c)
    la = np.argmax(x == addition.PLUS, axis=1)
    lb = np.argmax(x == addition.EQUALS, axis=1) - la - 1
    assert la.min() == lb.min() == 1 and la.max() == lb.max() == A.TRAIN_DIGITS
    assert ((la == lb).all()) == (lengths == "equal")
    mean = {"uniform": 3.0, "long": 55 / 15, "equal": 3.0}[lengths]  # E[length] over 1..5
    assert abs(la.mean() - mean) < 0.1
    places = tokens % A.n_places(c)
    assert places.max() <= A.n_places(c) - 1 and y.shape == x.shape


def test_left_padding_moves_each_sum_right_and_keeps_its_targets_aligned():
    c = {**A.BASE, **A.VARIANTS["left-pad"], "batch": 200}
    plain = {**c, "left_pad": 0}
    (t0, y0), (t1, y1) = next(A.batches(plain, 3)), next(A.batches(c, 3))
    assert t1.shape == (200, t0.shape[1] + c["left_pad"])
    # the same rng draws the same sums first; the shift is drawn after them
    for i in range(200):
        start = np.argmax(t1[i] != addition.END * A.n_places(c))
        np.testing.assert_array_equal(t1[i, start:start + t0.shape[1]], t0[i])
        np.testing.assert_array_equal(y1[i, start:start + t0.shape[1]], y0[i])
        assert (y1[i, :start] == addition.IGNORE).all()
    starts = np.argmax(t1 != addition.END * A.n_places(c), axis=1)
    assert starts.min() == 0 and starts.max() == c["left_pad"]


def test_place_schemes_move_only_the_equals_sign_and_the_answer():
    # 47 + 385 = 432 at offset 2: operands at places 3.., '=' just below the units ("below"),
    # at 0 ("zero", as McLeish et al.), or every answer token one place up ("coupled": each
    # token at the place of the digit it predicts)
    x, p, y = T.abacus_encode([47], [385], 14, np.array([2]))
    eq = int(np.argmax(x[0] == addition.EQUALS))
    below, zero, coupled = (A.reschemed(x, p, s)[0] for s in A.PLACES)
    assert below[:eq].tolist() == [3, 4, 0, 3, 4, 5] and below[eq] == 2
    assert zero[eq] == 0 and (np.delete(zero, eq) == np.delete(below, eq)).all()
    answer = np.arange(len(below)) >= eq
    moved = answer & (below > 0)
    assert (coupled[moved] == below[moved] + 1).all()
    assert (coupled[~moved] == below[~moved]).all()
    # the token that predicts the units digit of the answer sits at the units' place
    assert coupled[eq] == below[0]
    with pytest.raises(ValueError, match="unknown place scheme"):
        A.reschemed(x, p, "rotary")


def test_the_tpu_summary_is_the_best_variant_of_the_saved_sweep(tmp_path):
    import json
    target = tmp_path / "26.json"
    target.write_text(json.dumps({T.LENGEN_KEY: {"baseline": 0.0}}))
    try:
        got = A.summarise_into(target)
    finally:
        A.use_scale("cpu")
    runs = [r for r in json.loads(A.SCALES["tpu"]["path"].read_text())["runs"]
            if r["variant"] == A.BEST]
    for impl, by_seed in got["seeds"].items():
        assert by_seed == {str(r["seed"]): r["test_exact_match"] for r in runs
                           if r.get("impl", "jax") == impl}
    assert got["impl"] == {i: s["0"] for i, s in got["seeds"].items()}
    assert got["baseline"] == 0.0 and got["max_offset"] == A.VARIANTS[A.BEST]["max_offset"]
    assert json.loads(target.read_text())["length_generalisation"] == got
