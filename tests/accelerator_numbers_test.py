"""tools/accelerator_numbers.py on the CPU: the script's no-accelerator path, its measurements at
tiny sizes in interpret mode (the code a GPU run executes, checked for its arithmetic and for
agreement with `jax.nn.dot_product_attention`), and the reader the chapters call, on a saved
file whose numbers the test computes."""

from __future__ import annotations

import json
import warnings

import jax
import numpy as np
import pytest
from jax.experimental import pallas as jpl
from jax.experimental.pallas import triton as jplgpu

from compare import _pallas_kernels
from tools import accelerator_numbers as A

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the interpret-mode run) is computed once, not once per worker.
pytestmark = [pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                 reason="the CPU path; on a GPU, run the script itself"),
              pytest.mark.xdist_group("accelerator_numbers_test"),
              pytest.mark.slow]  # the GPU script's run in interpret mode


def test_without_an_accelerator_the_script_measures_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "accelerator.json"
    assert A.main(["--out", str(out)]) == 0
    assert not out.exists()
    said = capsys.readouterr().out
    assert "no accelerator" in said and "'cpu'" in said and "not written" in said


def test_interpret_reaches_every_pallas_call():
    # interpret=False goes down to JAX's pallas_call, which has no CPU compiler
    J = _pallas_kernels.build(jax, jpl, jplgpu, interpret=False)
    x = np.ones(16, np.float32)
    with pytest.raises(ValueError, match="Only interpret mode is supported on CPU"):
        J.vector_add(x, x, block=8)
    message = A.minijax_pallas_compiled()
    # minijax compiles Pallas kernels for a TPU only (Mosaic): elsewhere its compile says so
    assert message.startswith("ValueError: pallas_call of fa_fwd_kernel") and \
        "compiled by Mosaic for a TPU" in message


@pytest.mark.parametrize("seq,d", [(512, 64), (8192, 128)])
def test_the_gpu_kernels_lower_to_triton_for_cuda(seq, d):
    # Lowering needs no GPU: the script's FlashAttention, bf16 with its blocks and compiler
    # parameters, becomes Triton calls (forward: 1; with the backward's two kernels: 3), and
    # Triton is not the deprecated Mosaic GPU path of pl.pallas_call.
    K = _pallas_kernels.build(jax, jpl, jplgpu, interpret=False,
                             compiler_params=A.gpu_compiler_params())
    sds = jax.ShapeDtypeStruct((4, seq, d), jax.numpy.bfloat16)

    def flash(q, k, v):
        return K.flash_attention(q, k, v, A.GPU_BLOCK, A.GPU_BLOCK, True)

    def flash_fwd_bwd(q, k, v, do):
        return jax.vjp(flash, q, k, v)[1](do)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for f, n_args, n_calls in ((flash, 3, 1), (flash_fwd_bwd, 4, 3)):
            text = jax.jit(f).trace(*[sds] * n_args).lower(lowering_platforms=("cuda",)).as_text()
            assert text.count("custom_call @__gpu$xla.gpu.triton") == n_calls
            assert "mosaic_gpu" not in text


def test_without_triton_parameters_pallas_call_takes_the_deprecated_mosaic_gpu_path():
    K = _pallas_kernels.build(jax, jpl, jplgpu, interpret=False)
    sds = jax.ShapeDtypeStruct((1024,), np.float32)
    with pytest.warns(DeprecationWarning, match="Please migrate to ``plgpu.kernel``"):
        text = jax.jit(K.vector_add).trace(sds, sds).lower(lowering_platforms=("cuda",)).as_text()
    assert "custom_call @mosaic_gpu" in text


SEQ, D, TOKENS, HIDDEN = 16, 8, 32, 16


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """What the GPU run does, on the CPU at tiny sizes in interpret mode: (results, file)."""
    out = tmp_path_factory.mktemp("accelerator") / "accelerator.json"
    results = A.run(out, seqs=[SEQ], dims=[D], reps=1, tokens=TOKENS, hidden=HIDDEN, block=8,
                    dtype=np.float32, interpret=True, compiler_params=None, offload_mib=[1],
                    oom_bytes=2**44)
    return results, out


def test_a_run_saves_what_it_returns(cpu_run):
    results, out = cpu_run
    assert json.loads(out.read_text()) == json.loads(json.dumps(results, default=float))
    assert (results["device_kind"], results["jax_version"]) == (
        jax.devices()[0].device_kind, jax.__version__)
    assert results["peak_bf16_tflops"] is None  # a CPU is not in the table


def test_flash_measurement_in_interpret_mode(cpu_run):
    got = cpu_run[0]["flash_attention"]
    rows = {r["impl"]: r for r in got["rows"]}
    assert set(rows) == {"pallas", "dot_product_attention xla", "dot_product_attention cudnn"}
    assert "error" in rows["dot_product_attention cudnn"]  # no cuDNN on a CPU
    batch_heads = (TOKENS // SEQ) * (HIDDEN // D)
    causal_fwd = 4 * batch_heads * SEQ * SEQ * D / 2  # two matmuls, half the scores masked
    for impl in ("pallas", "dot_product_attention xla"):
        r = rows[impl]
        assert (r["batch"], r["heads"], r["causal"]) == (TOKENS // SEQ, HIDDEN // D, True)
        assert r["max_abs_diff_vs_xla"] < 1e-5
        assert np.isclose(r["fwd_tflops"], causal_fwd / (r["fwd_ms"] / 1e3) / 1e12)
        assert np.isclose(r["fwd_bwd_tflops"], 3.5 * causal_fwd / (r["fwd_bwd_ms"] / 1e3) / 1e12)
    assert "compiled by Mosaic for a TPU" in got["minijax"]


def test_memory_report_on_cpu(cpu_run):
    got = cpu_run[0]["memory"]
    # the CPU client keeps no statistics: what the device itself says
    assert got["before_first_op"] is None and jax.devices()[0].memory_stats() is None
    for name in ("minijax", "jax"):
        first = got["oom"][name].splitlines()[0]
        assert first.startswith("JaxRuntimeError: RESOURCE_EXHAUSTED") and str(2**44) in first


def test_offload_timing_on_cpu(cpu_run):
    got = cpu_run[0]["offload"]
    assert [r["module"] for r in got["rows"]] == ["minijax", "jax"]
    for r in got["rows"]:
        assert r["round_trip_equal"] and r["host_kind"] == "pinned_host"
        for key in ("to_host", "to_device"):
            assert np.isclose(r[f"{key}_gbs"], 2**20 / (r[f"{key}_ms"] / 1e3) / 1e9)


def test_chapters_reader_prints_the_run(cpu_run, capsys):
    results, out = cpu_run
    A.show("flash_attention", out)
    said = capsys.readouterr().out
    assert "is not in PEAK_BF16_TFLOPS" in said
    pallas = results["flash_attention"]["rows"][0]
    assert f"{pallas['fwd_ms']:9.3f}{pallas['fwd_tflops']:9.1f}{'-':>8}" in said
    A.show("offload", out)
    said = capsys.readouterr().out
    for r in results["offload"]["rows"]:
        assert f"{r['to_host_gbs']:20.1f} {r['to_device_gbs']:15.1f}" in said
    A.show("memory", out)
    assert f"{2**44 / 2**30:.1f} GiB" in capsys.readouterr().out


def test_a_section_that_failed_is_saved_as_its_error(tmp_path, capsys):
    out = tmp_path / "accelerator.json"
    results = A.run(out, seqs=[], dims=[], reps=1, tokens=TOKENS, hidden=HIDDEN, block=8,
                    dtype=np.float32, interpret=True, compiler_params=None, offload_mib=[],
                    oom_bytes=None)  # on a CPU there is no bytes_limit to go past
    assert results["memory"] == {"error": "ValueError: measure_memory: cpu keeps no "
                                 "memory_stats(), so there is no pool to go past; pass oom_bytes"}
    assert results["flash_attention"]["rows"] == [] and results["offload"] == {"rows": []}
    capsys.readouterr()
    A.show("memory", out)
    assert "memory: ValueError: measure_memory" in capsys.readouterr().out


def test_peak_table_matches_the_most_specific_name_first():
    peaks = dict(A.PEAK_BF16_TFLOPS)
    assert A.peak_tflops("NVIDIA H200") == peaks["H200"]
    assert A.peak_tflops("NVIDIA H100 PCIe") == peaks["H100 PCIe"] != peaks["H100"]
    assert A.peak_tflops("NVIDIA H100 80GB HBM3") == peaks["H100"]
    assert A.peak_tflops("cpu") is None


def _fake_run(device_kind="NVIDIA H200"):
    """A saved run whose numbers follow from times chosen here."""
    seq, d, batch, heads = 2048, 64, 8, 32
    rows = []
    for impl, fwd_s in (("pallas", 2.0e-3), ("dot_product_attention xla", 5.0e-3)):
        row = {"seq": seq, "d": d, "batch": batch, "heads": heads, "impl": impl,
               "fwd_ms": 1e3 * fwd_s, "fwd_bwd_ms": 3e3 * fwd_s}
        for key, s, bwd in (("fwd", fwd_s, False), ("fwd_bwd", 3 * fwd_s, True)):
            row[f"{key}_tflops"] = A.attention_flops(batch * heads, seq, d, causal=True,
                                                     backward=bwd) / s / 1e12
        rows.append(row)
    rows.append({"seq": seq, "d": d, "impl": "dot_product_attention cudnn",
                 "error": "RuntimeError: cuDNN is not detected."})
    limit = 3 * 2**35
    return {"device_kind": device_kind, "jax_version": jax.__version__, "date": "2026-01-01",
            "peak_bf16_tflops": A.peak_tflops(device_kind), "peak_source": A.PEAK_SOURCE,
            "flash_attention": {"rows": rows, "minijax": "ValueError: interpret mode only"},
            "memory": {"before_first_op": {"bytes_in_use": 0, "bytes_limit": limit},
                       "after_first_op": {"bytes_in_use": 2 * 2**22, "bytes_limit": limit},
                       "oom_requested_bytes": limit + 2**30,
                       "oom": {"jax": f"RESOURCE_EXHAUSTED: Out of memory allocating "
                                      f"{limit + 2**30} bytes.\nBFC allocator state"}},
            "offload": {"rows": [{"module": "jax", "mib": 256,
                                  "to_host_gbs": 2**28 / 0.01 / 1e9,
                                  "to_device_gbs": 2**28 / 0.005 / 1e9}]}}


def test_chapters_reader_prints_a_saved_run(tmp_path, capsys):
    path = tmp_path / "accelerator.json"
    run = _fake_run()
    path.write_text(json.dumps(run))
    A.show("flash_attention", path)
    said = capsys.readouterr().out
    peak = A.peak_tflops("NVIDIA H200")
    assert said.startswith(f"NVIDIA H200, JAX {jax.__version__}")
    for row in run["flash_attention"]["rows"][:2]:
        for key in ("fwd", "fwd_bwd"):
            tflops = row[f"{key}_tflops"]
            assert f"{tflops:9.1f}{tflops / peak:8.1%}" in said
    assert "cuDNN is not detected" in said and "interpret mode only" in said

    A.show("memory", path)
    said = capsys.readouterr().out
    assert f"'bytes_in_use': {2 * 2**22}" in said and f"'bytes_limit': {3 * 2**35}" in said
    assert f"{(3 * 2**35 + 2**30) / 2**30:.1f} GiB" in said and "BFC allocator state" in said

    A.show("offload", path)
    said = capsys.readouterr().out
    assert f"{2**28 / 0.01 / 1e9:20.1f} {2**28 / 0.005 / 1e9:15.1f}" in said

    with pytest.raises(ValueError, match="no section 'roofline'"):
        A.show("roofline", path)


def test_chapters_reader_without_a_saved_run(tmp_path, capsys):
    A.show("memory", tmp_path / "accelerator.json")
    assert capsys.readouterr().out.startswith("No accelerator was used")


def test_an_unknown_device_has_no_fraction_of_peak(tmp_path, capsys):
    path = tmp_path / "accelerator.json"
    path.write_text(json.dumps(_fake_run("Some GPU")))
    A.show("flash_attention", path)
    said = capsys.readouterr().out
    assert "Some GPU is not in PEAK_BF16_TFLOPS" in said and "%" not in said
