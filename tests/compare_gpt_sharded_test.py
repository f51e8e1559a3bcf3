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

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the quick topic's child process) is computed once, not once per worker.
pytestmark = pytest.mark.xdist_group("compare_gpt_sharded_test")

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


@pytest.mark.slow
def test_every_check_passes(quick):
    doc, proc = quick
    topic = doc["topics"]["gpt_sharded"]
    failing = [c["name"] for c in topic["checks"] if not c["ok"]]
    assert len(topic["checks"]) >= 15 and not failing, failing
    assert proc.returncode == 0


@pytest.mark.slow
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


def test_hlo_bytes_reads_shapes_and_replica_groups():
    from compare.gpt_sharded import group_size, hlo_bytes
    hlo = "\n".join([
        "  %a = f32[8,16]{1,0} all-reduce(f32[8,16]{1,0} %p), replica_groups={{0,1,2,3},"
        "{4,5,6,7}}, to_apply=%add",
        "  %b = (f32[4]{0}, s32[2,2]{1,0}) all-reduce(%x, %y), replica_groups={}, to_apply=%add",
        "  %c = f32[64]{0} all-gather(f32[8]{0} %q), replica_groups=[1,8]<=[8], dimensions={0}",
        "  %d = f32[2]{0} reduce-scatter(f32[16]{0} %r), replica_groups=mesh['x'=2,'y'=4] "
        "{'y'}, dimensions={0}",
        "  %e = bf16[3,5]{1,0} collective-permute(%s), source_target_pairs={{0,1},{1,0}}",
        "  %f = f32[8,16]{1,0} add(%a, %a)",
    ])
    got = hlo_bytes(hlo, n_devices=8)
    assert got["all-reduce"] == 2 * 3 / 4 * 8 * 16 * 4 + 2 * 7 / 8 * (4 * 4 + 4 * 4)
    assert got["all-gather"] == 7 / 8 * 64 * 4
    assert got["reduce-scatter"] == 3 * 2 * 4  # groups of 4 along 'y': (n-1) x the result
    assert got["collective-permute"] == 3 * 5 * 2
    assert got["all-to-all"] == 0
    assert group_size("replica_groups=mesh['x'=2,'y'=4] {'x','y'}", 8) == 8
