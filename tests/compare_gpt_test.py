"""The `gpt` comparison topic (`compare/gpt.py`, `compare/_gpt_nnx.py`) at quick sizes: a tiny
character GPT trained through minijax, JAX and Flax NNX from the same weights on the same
batches; per-step losses agree, gradients match finite differences and each other, and greedy
decoding with the KV cache gives the tokens of decoding without it."""

import numpy as np
import pytest
from model_checks import assert_grads_checked_and_profiled

from compare import gpt


@pytest.mark.slow
def test_gpt_topic_quick():
    res = gpt.run(quick=True)
    assert_grads_checked_and_profiled(res)
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert len(res.checks) >= 10 and not failing, failing
    for name in ("minijax", "jax", "nnx"):
        rec = res.extra[name]
        assert {"losses", "eval", "step_ms", "kv_cache_equal"} <= set(rec)
        assert rec["step_ms"] > 0 and rec["eval"]["val_loss"] > 0
    assert res.extra["kv_cache_equal"] == {"jax": True, "minijax": True, "nnx": True}
    jx = res.extra["jax"]["losses"]
    assert res.extra["minijax"]["losses"] == pytest.approx(jx, rel=1e-4)
    assert res.extra["nnx"]["losses"] == pytest.approx(jx, rel=1e-4)
    assert res.extra["minijax"]["flops"] == pytest.approx(res.extra["jax"]["flops"], rel=0.01)


def test_char_data_split_and_batches(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("abcabcabd" * 20)
    raw, desc = gpt.load_text(text)
    data = gpt.CharData.from_text(raw)
    assert data.chars == ["a", "b", "c", "d"] and str(text) in desc
    assert len(data.train) + len(data.val) == len(raw) and len(data.val) == len(raw) // 10
    assert data.decode(data.train[:9]) == raw[:9]
    x, y = gpt.batches(data.train, 3, 2, 5, seed=0)
    assert x.shape == y.shape == (3, 2, 5)
    np.testing.assert_array_equal(x[..., 1:], y[..., :-1])  # y is x shifted by one
