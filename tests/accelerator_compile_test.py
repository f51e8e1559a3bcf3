"""tools/accelerator_compile.py on the CPU: its no-TPU path, and a smoke run with the CPU
standing in for the chip (the file's shape, never a time)."""

from __future__ import annotations

import json

import jax
import pytest

from tools import accelerator_compile as C

pytestmark = pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                reason="the CPU path; on a TPU, run the script itself")


def test_without_a_tpu_the_chips_record_is_not_written(capsys, monkeypatch, tmp_path):
    out = tmp_path / "compile-tpu.json"
    monkeypatch.setattr(C, "OUT", out)
    assert C.main(["--out", str(out)]) == 0
    assert not out.exists() and "no accelerator" in capsys.readouterr().out


@pytest.mark.slow
def test_smoke_run_writes_the_documented_shape(tmp_path):
    out = tmp_path / "compile.json"
    assert C.main(["--smoke", "--rounds", "2", "--topics", "gpt", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert {"device_kind", "platform", "jax", "date", "rounds", "topics"} <= set(doc)
    topic = doc["topics"]["gpt"]
    for part in ("builds", "same_path"):
        assert sorted(r["module"] for r in topic[part]) == ["jax", "jax", "minijax", "minijax"]
        assert [r["module"] for r in topic[part]][:2] == ["minijax", "jax"]  # then JAX first
    for part in ("lower", "compile", "same_path_compile"):
        s = topic[part]
        assert s["ratio_median"] == pytest.approx(s["minijax"]["median"] / s["jax"]["median"])
        assert all(s[m]["min"] <= s[m]["median"] <= s[m]["max"] for m in ("minijax", "jax"))
