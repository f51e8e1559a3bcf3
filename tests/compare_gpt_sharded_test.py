"""The `gpt_sharded` comparison topic (`compare/gpt_sharded.py`) at quick sizes: one strategy of
each style (tensor parallel by hand with shard_map, FSDP through the partitioner) trains the
GPT on 8 CPU devices in minijax and JAX with the losses of one device, the same shardings and
compiled collectives, and the bytes of the chapter's formula; KV-cache sampling under the tp
layout gives one device's tokens; the NNX version reaches the same losses. The topic runs in a
child process: XLA reads the device count once, when JAX is imported."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt_sharded") / "out.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        " --xla_force_host_platform_device_count=8").strip()
    proc = subprocess.run([sys.executable, "-m", "compare.gpt_sharded", "--quick", "--json",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc


def test_every_check_passes(quick):
    doc, proc = quick
    topic = doc["topics"]["gpt_sharded"]
    failing = [c["name"] for c in topic["checks"] if not c["ok"]]
    assert len(topic["checks"]) >= 15 and not failing, failing
    assert proc.returncode == 0


def test_json_layout(quick):
    doc, _ = quick
    topic = doc["topics"]["gpt_sharded"]
    ref = topic["single_device"]["losses"]
    assert set(topic["strategies"]) == {"tp_manual", "fsdp_auto"}
    for entry in topic["strategies"].values():
        for module in ("minijax", "jax"):
            rec = entry[module]
            assert {"losses", "step_ms", "collectives", "bytes_per_step",
                    "param_bytes_per_device"} <= set(rec)
            np.testing.assert_allclose(rec["losses"], ref, rtol=1e-4)
            assert rec["step_ms"] > 0 and rec["bytes_per_step"] > 0
        assert entry["minijax"]["collectives"] == entry["jax"]["collectives"]
    np.testing.assert_allclose(topic["nnx"]["losses"], ref, rtol=1e-4)
    assert topic["kv_cache_equal"] is True
