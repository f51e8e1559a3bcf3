"""tools/accelerator_eager.py on the CPU: its no-TPU path, a smoke run with the CPU standing in
for the chip (the file's shape and the agreement with JAX, never a time), and its reader."""

from __future__ import annotations

import json

import jax
import pytest

from tools import accelerator_eager as E

pytestmark = pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                reason="the CPU path; on a TPU, run the script itself")


def test_without_a_tpu_nothing_is_measured(tmp_path, capsys):
    out = tmp_path / "eager.json"
    assert E.main(["--out", str(out)]) == 0
    assert not out.exists() and "no accelerator" in capsys.readouterr().out


def test_smoke_run_writes_the_documented_shape(tmp_path, monkeypatch):
    from minijax import dispatch
    monkeypatch.setattr(dispatch, "_default_platform", ["tpu"])
    saved = E.run(tmp_path / "eager.json", n=32, dtype="float32", reps=2)
    on_disk = json.loads((tmp_path / "eager.json").read_text())
    assert on_disk == json.loads(json.dumps(saved))
    assert {"device_kind", "platform", "jax", "date", "ops"} <= set(on_disk)
    assert [r["name"] for r in on_disk["ops"]] == list(E.OPS)
    for r in on_disk["ops"]:
        assert r["max_diff"] < 1e-5, r
        assert (r["minijax_host_ms"] is None) == (not E.OPS[r["name"]][1])
    assert dispatch._default_platform == ["tpu"]  # the host-path timing restored it


def test_the_committed_run_has_the_documented_shape(capsys):
    saved = E.load()
    if saved is None:
        E.show()
        assert "No accelerator was used" in capsys.readouterr().out
        return
    assert saved["platform"] == "tpu" and {r["name"] for r in saved["ops"]} == set(E.OPS)
