"""tools/accelerator_tpu.py on the CPU: the script's no-TPU path, every measurement at tiny
sizes in interpret mode (`--smoke`: the code a TPU run executes, its arithmetic and its
agreement with the references), the shape of the committed TPU run (never its numbers), and
the reader the chapters call."""

from __future__ import annotations

import json

import jax
import pytest

from tools import accelerator_tpu as A

pytestmark = pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                reason="the CPU path; on a TPU, run the script itself")

ROW_KEYS = {"name", "shape", "dtype", "ms", "tflops", "ref", "ref_ms", "max_err"}
PREFIXES = ("flash_fwd", "flash_fwdbwd", "matmul", "gmm", "tgmm", "fused_mlp_fwd",
            "fused_mlp_fwdbwd", "fused_mlp_bwd")
# every committed run has these families (fused_mlp_bwd: an earlier backward-only measure)
REQUIRED = ("flash_fwd", "flash_fwdbwd", "matmul", "gmm", "tgmm", "fused_mlp_fwd",
            "fused_mlp_fwdbwd")
REFS = {"jax_flash_attention", "xla_attention", "xla_dot", "ragged_dot", "two_ragged_dots",
        "jax_pallas"}


def check_shape(saved: dict) -> None:
    assert {"device_kind", "jax", "date", "peak_tflops", "rows"} <= set(saved)
    assert saved["rows"], "a saved run has rows"
    for r in saved["rows"]:
        assert ROW_KEYS <= set(r), r["name"]
        assert r["name"].startswith(PREFIXES), r["name"]
        assert r["ref"] in REFS, r["ref"]
        for key in ("ms", "tflops", "ref_ms", "max_err"):
            assert r[key] is None or isinstance(r[key], (int, float)), (r["name"], key)


def test_without_a_tpu_the_script_measures_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "accelerator-tpu.json"
    assert A.main(["--out", str(out)]) == 0
    assert not out.exists()
    said = capsys.readouterr().out
    assert "no accelerator" in said and "'cpu'" in said and "not written" in said


@pytest.mark.slow
@pytest.mark.parametrize("family", ["flash", "matmul", "gmm", "mlp", "minijax"])
def test_smoke_run_measures_each_family_in_interpret_mode(tmp_path, family):
    out = tmp_path / "accelerator-tpu.json"
    saved = A.run(out, smoke=True, only=(family,))
    assert saved["errors"] == {}, saved["errors"]
    on_disk = json.loads(out.read_text())
    check_shape(on_disk)
    for r in on_disk["rows"]:
        assert r.get("error") is None, (r["name"], r["error"])
        # in interpret mode, float32 accumulation of bf16 inputs: bf16's tolerance
        assert r["max_err"] < 2e-2, (r["name"], r["max_err"])
        if r["ref_ms"] is not None:
            assert r["speedup"] == pytest.approx(r["ref_ms"] / r["ms"])
        if r.get("impl") == "minijax_pallas":  # the same kernel source under both modules
            assert r["ref"] == "jax_pallas" and r["max_err"] < 1e-2, r


def test_the_committed_tpu_run_has_the_documented_shape():
    saved = A.load()
    if saved is None:
        pytest.skip("no TPU run committed (chapters/data/accelerator-tpu.json)")
    check_shape(saved)
    assert saved["platform"] == "tpu"
    assert any(r.get("impl") == "minijax_pallas" for r in saved["rows"])
    names = {r["name"] for r in saved["rows"]}
    for prefix in REQUIRED:
        assert any(n.startswith(prefix) for n in names), prefix


def test_show_says_when_no_tpu_was_used(tmp_path, capsys):
    A.show(path=tmp_path / "absent.json")
    A.crossover_plot(tmp_path / "x.png", path=tmp_path / "absent.json")
    said = capsys.readouterr().out
    assert said.count("No accelerator was used") == 2 and not (tmp_path / "x.png").exists()


def test_crossover_plot_reads_the_fused_rows(tmp_path, capsys):
    rows = [{"name": f"fused_mlp_{k}_d{d}_f{f}", "speedup": s} for k, d, f, s in (
        ("fwd", 512, 1024, 1.5), ("fwd", 512, 2048, 2.0), ("fwdbwd", 512, 1024, 1.25))]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"device_kind": "TPU", "rows": rows}))
    A.crossover_plot(tmp_path / "x.png", path=path)
    said = capsys.readouterr().out.splitlines()
    assert said[1].split() == ["fwd", "512", "2:", "1.50x", "4:", "2.00x"]
    assert said[2].split() == ["fwdbwd", "512", "2:", "1.25x"]
    assert (tmp_path / "x.png").stat().st_size > 0


def test_show_prints_the_rows_it_is_asked_for(tmp_path, capsys):
    rows = [{"name": "gmm_m8_g2", "shape": [8, 8, 8, 2], "dtype": "bfloat16", "ms": 2.0,
             "tflops": 1.5, "ref": "ragged_dot", "ref_ms": 3.0, "ref_tflops": 1.0,
             "speedup": 1.5, "max_err": 1e-3},
            {"name": "matmul_8", "shape": [8, 8, 8], "dtype": "bfloat16", "ms": None,
             "tflops": None, "ref": "xla_dot", "ref_ms": 1.0, "max_err": None,
             "error": "ValueError: refused"}]
    path = tmp_path / "saved.json"
    path.write_text(json.dumps({"device_kind": "TPU v5 lite", "jax": "0.10.2",
                                "date": "2026-12-05", "peak_tflops": 197.0, "rows": rows}))
    A.show(("gmm",), path=path)
    said = capsys.readouterr().out
    assert "TPU v5 lite" in said and "gmm_m8_g2" in said and "matmul_8" not in said
    assert "1.50x" in said
    A.show(path=path)
    said = capsys.readouterr().out
    assert "matmul_8" in said and "refused" in said


def test_roofline_plot_draws_the_saved_kernels(tmp_path, capsys):
    rows = [{"name": "matmul_8", "shape": [8, 8, 8], "dtype": "bfloat16", "ms": 1.0,
             "tflops": 100.0, "ref": "xla_dot", "ref_ms": 1.1, "ref_tflops": 91.0,
             "max_err": 1e-3, "flops": 2e12, "bytes": 1e9}]
    path = tmp_path / "saved.json"
    path.write_text(json.dumps({"device_kind": "TPU v5 lite", "jax": "0.10.2",
                                "date": "2026-12-05", "peak_tflops": 197.0, "hbm_gbs": 819.0,
                                "rows": rows}))
    png = tmp_path / "roofline.png"
    A.roofline_plot(png, path=path)
    assert png.stat().st_size > 0
    # 197 TFLOP/s over 819 GB/s
    assert f"ridge point {197e3 / 819:.0f} FLOP/byte" in capsys.readouterr().out
    A.roofline_plot(tmp_path / "none.png", path=tmp_path / "absent.json")
    assert "No accelerator was used" in capsys.readouterr().out
    assert not (tmp_path / "none.png").exists()
