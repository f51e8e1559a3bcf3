"""tools/tpu_ops.py on the CPU: a few operations run end to end into a file of the shape the
chip's run writes, the operation list covers every family, and docs/conformance.md carries the
summary of the committed data (or says plainly that there is none). Numbers are never required
here: the chip's run is data, checked for its shape only."""

from __future__ import annotations

import json

import pytest

from tools import tpu_ops

FEW = ["jnp.sin", "jnp.sum", "scatter_add", "cond", "cholesky", "conv_precision_highest_default",
       "ragged_dot", "pure_callback", "debug.print", "random.normal"]
ENTRY_KEYS = {"name", "minijax", "jax", "max_diff", "eager", "eager_max_diff"}


def _check_shape(data: dict) -> None:
    assert {"device_kind", "platform", "jax", "date", "ops"} <= set(data)
    for op in data["ops"]:
        assert set(op) == ENTRY_KEYS, op
        assert isinstance(op["name"], str) and op["name"] in tpu_ops.OPS
        for key in ("minijax", "jax", "eager"):
            assert op[key] == "ok" or (isinstance(op[key], str) and ": " in op[key]), op
        for key in ("max_diff", "eager_max_diff"):
            assert op[key] is None or op[key] >= 0.0


def test_a_few_operations_end_to_end(tmp_path):
    out = tmp_path / "tpu-ops.json"
    data = tpu_ops.main(["--out", str(out), "--only", ",".join(FEW)])
    assert json.loads(out.read_text()) == data
    _check_shape(data)
    assert [o["name"] for o in data["ops"]] == FEW
    assert data["platform"] == "cpu"
    assert all(o["minijax"] == o["jax"] == "ok" for o in data["ops"]), data["ops"]
    assert all(o["max_diff"] <= tpu_ops.TOLERANCE for o in data["ops"]), data["ops"]
    assert "a CPU, not the chip" in tpu_ops.summary(data)


def test_a_failure_is_recorded_as_data_not_raised():
    class Broken:  # a module whose jit raises, standing in for a backend that refuses an op
        def __getattr__(self, name):
            raise RuntimeError(f"no {name} here")
    import jax
    entry = tpu_ops.run_op("jnp.sin", jax, Broken())
    assert entry["jax"] == "ok" and entry["minijax"] == "RuntimeError: no numpy here"
    assert entry["max_diff"] is None


def test_the_operations_cover_every_family():
    names = list(tpu_ops.OPS)
    assert len(names) >= 100
    for family in ["jnp.sin", "jnp.sum", "jnp.cumsum", "gather_take", "scatter_add", "cond",
                   "while_loop", "scan", "cholesky", "qr", "eigh", "svd", "lu", "fft",
                   "random.normal", "conv_precision_highest_default", "dot_precision_high_default",
                   "ragged_dot", "pure_callback", "io_callback_ordered", "debug.print", "jnp.sort",
                   "lax.top_k", "grad_matmul"]:
        assert family in names


def test_summary_says_when_there_is_no_data(tmp_path):
    assert tpu_ops.summary(path=tmp_path / "missing.json").startswith("No chip data")


def test_docs_carry_the_summary_of_the_committed_data():
    text = tpu_ops.DOCS.read_text()
    assert tpu_ops.docs_with_summary(text, tpu_ops.summary()) == text, (
        "docs/conformance.md is stale: run `python tools/tpu_ops.py --write-docs`")


@pytest.mark.skipif(not tpu_ops.DEFAULT_OUT.exists(), reason="no chip data committed yet")
def test_committed_data_has_the_shape():
    _check_shape(json.loads(tpu_ops.DEFAULT_OUT.read_text()))


def test_without_a_tpu_the_chips_record_is_not_overwritten(capsys):
    import jax
    if jax.devices()[0].platform == "tpu":
        pytest.skip("on a TPU the default --out is the one to write")
    before = tpu_ops.DEFAULT_OUT.read_bytes() if tpu_ops.DEFAULT_OUT.exists() else None
    assert tpu_ops.main(["--only", "jnp.sin"]) == {}
    said = capsys.readouterr().out
    assert "no accelerator" in said and "'cpu'" in said and "not written" in said
    after = tpu_ops.DEFAULT_OUT.read_bytes() if tpu_ops.DEFAULT_OUT.exists() else None
    assert after == before
