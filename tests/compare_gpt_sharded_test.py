"""The `gpt_sharded` comparison topic (`compare/gpt_sharded.py`) at quick sizes: all ten
strategies (dp, fsdp, tp, fsdp_tp, ep; each by the partitioner and by hand with shard_map) train
the GPT on 8 CPU devices in minijax and JAX with the losses of one device, the same shardings,
compiled collectives and bytes, the hand-written ones the bytes of the chapter's formula; FSDP
keeps 1/8 of dp's bytes per device; KV-cache sampling under the tp layout gives one device's
tokens; the NNX version reaches the same losses; the GPipe and 1F1B pipelines over 4 stages
give one device's losses with the bubble (p-1)/(m+p-1). The topic runs in a child process: XLA
reads the device count once, when JAX is imported."""

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
                          timeout=1800)  # ten strategies and two pipelines: minutes on a busy CPU
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
    names = {f"{s}_{st}" for s in ("dp", "fsdp", "tp", "fsdp_tp", "ep")
             for st in ("auto", "manual")}
    assert set(topic["strategies"]) == names
    for name, entry in topic["strategies"].items():
        want = topic["single_device_moe" if name.startswith("ep") else "single_device"]
        for module in ("minijax", "jax"):
            rec = entry[module]
            np.testing.assert_allclose(rec["losses"], want["losses"], rtol=1e-4)
            assert rec["step_ms"] > 0 and rec["bytes_per_step"] > 0
            if name.endswith("manual"):  # what we wrote is what the formula counts
                formula = topic["formulas"][name]
                assert abs(rec["bytes_per_step"] - formula) <= 0.02 * formula + 1024
        assert entry["minijax"]["collectives"] == entry["jax"]["collectives"]
        assert entry["minijax"]["bytes"] == entry["jax"]["bytes"]
    # FSDP: the parameters and both AdamW moments split 8 ways, the same traffic as dp
    mem = {n: topic["strategies"][n]["jax"]["param_bytes_per_device"] for n in names}
    assert mem["fsdp_manual"] / mem["dp_manual"] == pytest.approx(1 / 8, abs=0.02)
    sent = {n: topic["strategies"][n]["jax"]["bytes_per_step"] for n in names}
    assert sent["fsdp_manual"] == pytest.approx(sent["dp_manual"], rel=0.01)
    np.testing.assert_allclose(topic["nnx"]["losses"], ref, rtol=1e-4)
    assert topic["kv_cache_equal"] is True


@pytest.mark.slow
def test_pipeline_schedules(quick):
    doc, _ = quick
    pipe = doc["topics"]["gpt_sharded"]["pipeline"]
    p, m = 4, 4
    for kind in ("gpipe", "1f1b"):
        for module in ("minijax", "jax"):
            rec = pipe[f"{kind}_m{m}_{module}"]
            np.testing.assert_allclose(rec["losses"], pipe["single_device"], rtol=1e-4)
            # every device worked 2m ticks (m forwards, m backwards) of 2(m+p-1)
            assert rec["busy"] == [2 * m] * 8
            assert rec["bubble"] == pytest.approx((p - 1) / (m + p - 1))
        held = pipe[f"{kind}_m{m}_minijax"]["peak_in_flight"]
        assert held == ([m] * p if kind == "gpipe" else [p - s for s in range(p)])


@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(4, 4), (4, 8), (2, 5), (3, 1)])
def test_schedule_respects_dependencies(kind, p, m):
    from compare._pipeline import BWD, FWD, IDLE, schedule
    table = schedule(kind, p, m)
    done = {}
    for t, row in enumerate(table):
        for s, (act, i) in enumerate(row):
            if act == FWD:  # needs the previous stage's forward of i, finished before
                assert s == 0 or done[("F", s - 1, i)] < t
            elif act == BWD:  # needs its own forward and the next stage's backward of i
                assert done[("F", s, i)] < t and (s == p - 1 or done[("B", s + 1, i)] < t)
            else:
                assert act == IDLE
            if act != IDLE:
                key = ("F" if act == FWD else "B", s, int(i))
                assert key not in done
                done[key] = t
    assert len(done) == 2 * p * m  # every forward and backward ran once
    assert len(table) == 2 * (m + p - 1)


def test_schedule_rejects_an_unknown_kind():
    from compare._pipeline import schedule
    with pytest.raises(ValueError, match="gpipe"):
        schedule("interleaved", 4, 4)


def test_textbook_formulas_from_sizes():
    """predicted_bytes against the formulas written out for a model of known sizes."""
    from compare import gpt, gpt_sharded, moe
    cfg = gpt.Config(vocab=24, n_layer=2, d_model=16, n_head=4, block=8, batch=16)
    params = gpt_sharded.megatron_layout(gpt.init_params(cfg))
    P = 4 * sum(np.size(v) for v in jax_leaves(params))
    n, m, L = 8, 4, 2
    assert gpt_sharded.predicted_bytes("dp", cfg, params) == pytest.approx(2 * (n - 1) / n * P)
    assert gpt_sharded.predicted_bytes("fsdp", cfg, params) == pytest.approx(2 * 7 / 8 * P)
    A = 4 * (16 // 2) * 8 * 16  # [B/2, T, d] float32
    col = sum(4 * np.size(b[k]) for b in params["blocks"] for k in gpt_sharded.COLUMN +
              gpt_sharded.COLUMN_BIAS + gpt_sharded.ROW)
    per_dev = P - col + col / m  # tp: the split matrices a quarter each, the rest whole
    tp = 4 * L * 2 * (m - 1) / m * A + 2 * (2 - 1) / 2 * per_dev
    assert gpt_sharded.predicted_bytes("tp", cfg, params) == pytest.approx(tp)
    mcfg = moe.MoEConfig(n_experts=8, top_k=2, d_expert=32)
    mp = gpt_sharded.megatron_layout(moe.init_params(cfg, mcfg))
    experts = 4 * sum(np.size(b[k]) for b in mp["blocks"] for k in gpt_sharded.EXPERT)
    slots = 4 * 8 * 2 * mcfg.capacity(cfg.block) * 16  # [E, B/n, C, d]
    ep = 2 * 7 / 8 * (4 * sum(np.size(v) for v in jax_leaves(mp)) - experts) + 4 * L * 7 / 8 * slots
    assert gpt_sharded.predicted_bytes("ep", cfg, mp, mcfg) == pytest.approx(ep)


def jax_leaves(tree):
    import jax
    return jax.tree_util.tree_leaves(tree)


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
