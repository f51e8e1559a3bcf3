"""The `ragged` comparison topic (`compare/ragged.py`) at quick sizes, through
`python -m compare ragged --quick --json PATH`: every check passes (ragged_dot against JAX;
gmm, its grad and the fused MLP under both Pallas implementations) and the JSON has the
layout `topics.ragged = {ragged_dot, gmm, fused_mlp, roofline, gpu}`."""

import json

import numpy as np
import pytest

from compare import __main__ as cmain


@pytest.mark.slow
def test_ragged_topic_quick_writes_its_json(tmp_path):
    path = tmp_path / "out.json"
    assert cmain.main(["ragged", "--quick", "--json", str(path)], out_dir=tmp_path) == 0
    doc = json.loads(path.read_text())["topics"]["ragged"]
    assert all(c["ok"] for c in doc["checks"]) and len(doc["checks"]) >= 11
    assert doc["ragged_dot"]["cases"] >= 6
    assert doc["ragged_dot"]["max_err"] < 1e-5 and doc["ragged_dot"]["grad_max_err"] < 1e-5
    assert doc["ragged_dot"]["max_abs_past_the_groups"] == 0.0  # XLA's CPU expansion: zeros
    for kernel in ("gmm", "fused_mlp"):
        assert set(doc[kernel]) == {"minijax", "jax"}
        for errs in doc[kernel].values():
            assert errs["max_err"] < 1e-4 and errs["grad_max_err"] < 1e-4
    rows = doc["roofline"]
    assert sorted({r["F"] // r["D"] for r in rows}) == [1, 2, 4, 8]
    for r in rows:
        assert {"G", "M", "D", "F", "flops", "bytes_fused", "bytes_unfused"} <= set(r)
        assert r["flops"] == 4 * r["M"] * r["D"] * r["F"] + r["M"] * r["F"]
        # the fused kernel saves the hidden layer's traffic, re-reads weights per row tile
        assert r["bytes_unfused"] - r["bytes_fused"] == 2 * (
            2 * r["M"] * r["F"] - 2 * r["D"] * r["F"] * (r["row_tiles"] - r["G"]))
    bench = doc["cpu_interpret_benchmark"]  # correctness of the fused kernel over F/D
    assert bench and all(r["max_err_minijax"] < 1e-4 for r in bench)
    assert doc["gpu"] is None


def test_a_case_jax_cannot_compile_on_the_device_takes_jax_on_the_cpu(monkeypatch):
    # on a TPU v5e XLA's compiler refused one tiny case of jit(grad(ragged_dot)) with an
    # INTERNAL RET_CHECK; the topic then takes that case's reference grads from JAX on the CPU
    import jax

    from compare import ragged
    from compare._report import TopicResult
    real_jit = jax.jit

    def refusing_jit(f, **kw):
        compiled = real_jit(f, **kw)

        def call(*args):
            if jax.config.jax_default_device is None:  # the default device: refused
                raise jax.errors.JaxRuntimeError("INTERNAL: RET_CHECK failure (a stand-in)")
            return compiled(*args)
        return call
    monkeypatch.setattr(ragged.jax, "jit", refusing_jit)
    res = TopicResult("ragged")
    out = ragged.ragged_dot_cases(res, 3)
    assert len(out["jax_compile_refused"]) == 3 and out["grad_max_err"] < 1e-5
    assert all(c.ok for c in res.checks)
    assert "refused 3 of them" in res.checks[-1].name


def test_rows_past_the_groups_are_left_out_of_the_comparison_and_recorded():
    # a TPU's ragged_dot leaves rows past sum(group_sizes) unspecified (the chip gave 1e31
    # there): outputs and the first operand's gradient are compared on the covered rows
    from compare import ragged
    rng = np.random.RandomState(0)
    out = rng.randn(6, 3).astype(np.float32)
    dx, dw = rng.randn(6, 4).astype(np.float32), rng.randn(2, 4, 3).astype(np.float32)
    junk_out, junk_dx = out.copy(), dx.copy()
    junk_out[4:], junk_dx[4:] = 1e31, -7.0
    covered, tail = ragged._split(junk_out, 4)
    assert covered.shape == (4, 3) and tail == np.float32(1e31)
    assert ragged._covered_errors(junk_out, out, (junk_dx, dw), (dx, dw), 4) == (0.0, 0.0)
    # a wrong covered row, or a wrong weight gradient anywhere, still counts
    junk_out[3, 0] += 1.0
    dw2 = dw.copy()
    dw2[1, 3, 2] += 2.0
    err, gerr = ragged._covered_errors(junk_out, out, (junk_dx, dw2), (dx, dw), 4)
    assert err == np.float32(out[3, 0] + 1.0) - out[3, 0]
    assert gerr == np.float32(dw[1, 3, 2] + 2.0) - dw[1, 3, 2]
