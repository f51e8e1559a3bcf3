"""The `cnn_bn` comparison topic (`compare/cnn_bn.py`) at quick sizes: a CNN with batch norm
trains in lockstep under minijax and JAX (losses, parameters, running statistics, eval-mode
accuracy agree), passes gradient checks, and is profiled; plus the CIFAR-10 batch loader on a
tiny file set in the standard python-pickle format, written here."""

import json
import pickle

import numpy as np
import pytest
from model_checks import assert_grads_checked_and_profiled

from compare import cnn_bn
from compare._report import write_json


@pytest.mark.slow
def test_cnn_bn_topic_checks_pass_and_writes_the_json_entry(tmp_path):
    res = cnn_bn.run(quick=True)
    assert_grads_checked_and_profiled(res)
    failing = [c.name for c in res.checks if not c.ok]
    assert len(res.checks) >= 11 and not failing, failing
    write_json({"cnn_bn": res}, tmp_path / "out.json")
    doc = json.loads((tmp_path / "out.json").read_text())
    for name in ("minijax", "jax"):
        entry = doc["topics"]["cnn_bn"][name]
        assert len(entry["losses"]) == 20 and entry["step_ms"] > 0
        assert 0 <= entry["eval"]["test_accuracy"] <= 1
    assert doc["minijax"] == doc["topics"]["cnn_bn"]["minijax"]


def _write_cifar(folder, rng, counts):
    for name, n in counts.items():
        d = {b"batch_label": name.encode(), b"labels": list(rng.randint(0, 10, n)),
             b"data": rng.randint(0, 256, (n, 3072)).astype(np.uint8),
             b"filenames": [b"x.png"] * n}
        with open(folder / name, "wb") as f:
            pickle.dump(d, f, protocol=2)
    return d


def test_cifar10_loader_reads_the_python_pickle_batches(tmp_path):
    rng = np.random.RandomState(0)
    counts = {f"data_batch_{i}": 2 + i for i in range(1, 6)} | {"test_batch": 3}
    _write_cifar(tmp_path, rng, counts)
    x_tr, y_tr, x_te, y_te = cnn_bn.load_cifar10(tmp_path)
    assert x_tr.shape == (sum(2 + i for i in range(1, 6)), 3, 32, 32) and x_tr.dtype == np.float32
    assert y_tr.dtype == np.int32 and x_te.shape == (3, 3, 32, 32)
    # Each row is the red, then green, then blue 32x32 plane, row-major: check the layout
    # against the file's bytes for the test batch.
    with open(tmp_path / "test_batch", "rb") as f:
        raw = pickle.load(f, encoding="bytes")
    row = raw[b"data"][1]
    np.testing.assert_array_equal(x_te[1, 2, 0, :] * 255, row[2048:2080].astype(np.float32))
    np.testing.assert_array_equal(y_te, raw[b"labels"])
    (tmp_path / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        cnn_bn.load_cifar10(tmp_path)


def test_ladder_attributes_hlo_ops_to_jax_primitives():
    # compare/_ladder.py's HLO reading, on the optimized HLO of a real JAX executable: every
    # instruction JAX stamped keeps its op_name; fusions take the first op_name inside them.
    import jax
    import jax.numpy as jnp

    from compare import _ladder

    def f(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)
    args = (np.ones((8, 4), np.float32), np.ones((2, 8), np.float32))
    times, compiled = _ladder.stage_times(jax.jit(jax.grad(f)), *args)
    assert times["trace_lower_ms"] > 0 and times["compile_ms"] > 0
    names = _ladder.hlo_op_names(compiled.as_text())
    kinds = {_ladder.op_kind(op, name) for op, name in names.items()}
    assert "forward dot_general" in kinds, kinds
    assert any(k.startswith("backward ") for k in kinds), kinds  # ops under transpose(...)
    assert _ladder.op_kind("wrapped_iota.3", None) == "XLA iota"
    assert _ladder.cost(compiled)["flops"] >= 2 * (2 * 2 * 8 * 4)  # x @ w and its transpose
    entry = _ladder.module_entry(np.array([1.0, 0.5]), {"acc": np.float32(0.5)}, 1.25, x=1)
    assert entry == {"losses": [1.0, 0.5], "eval": {"acc": 0.5}, "step_ms": 1.25, "x": 1}
