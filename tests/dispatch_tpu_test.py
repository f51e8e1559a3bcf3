"""tools/dispatch_tpu.py on the CPU: its no-TPU path, a smoke run (the file's shape and the
outputs-ready-together check, never a time), and the committed chip record's shape."""

from __future__ import annotations

import json

import jax
import pytest

from tools import dispatch_tpu as D

pytestmark = pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                reason="the CPU path; on a TPU, run the script itself")


def test_without_a_tpu_nothing_is_measured(tmp_path, capsys):
    out = tmp_path / "dispatch.json"
    assert D.main(["--out", str(out)]) == 0
    assert not out.exists() and "no accelerator" in capsys.readouterr().out


def test_smoke_run_writes_the_documented_shape(tmp_path):
    assert D.main(["--smoke", "--out", str(tmp_path / "dispatch.json")]) == 0
    saved = json.loads((tmp_path / "dispatch.json").read_text())
    assert {"device_kind", "platform", "jax", "date", "calls",
            "outputs_ready_together"} <= set(saved)
    assert [c["name"] for c in saved["calls"]] == list(D.cases(jax))
    together = saved["outputs_ready_together"]
    assert together["heavy_ready_after_cheap_wait"] == together["checked"] > 0


def test_the_committed_run_is_the_chips():
    saved = json.loads(D.PATH.read_text())
    assert saved["platform"] == "tpu" and saved["device_kind"].startswith("TPU")
    assert [c["name"] for c in saved["calls"]] == list(D.cases(jax))
    together = saved["outputs_ready_together"]
    assert together["heavy_ready_after_cheap_wait"] == together["checked"] > 0
