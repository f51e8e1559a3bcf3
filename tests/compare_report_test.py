"""The comparison report (`compare/_report.py`, `compare/__main__.py`): stored per-topic results,
a failing topic reported with its traceback, paired timings with spread and ratio, folding."""

import json
import shutil
import sys
import types

import jax
import numpy as np
import pytest

import compare.__main__ as cmain
from compare._report import Ms, TopicResult, code, median_ms, ms_of, render


def _fake_topics(monkeypatch):
    def ok_run(quick=False):
        res = TopicResult("a topic that passes", runs="both")
        res.check("values", np.ones(3), np.ones(3))
        res.timings_ms["step: jax"] = ms_of([1.0, 2.0, 3.0])
        res.timings_ms["step: minijax"] = ms_of([2.0, 4.0, 6.0])
        res.timings_ms["compile"] = 5.0
        res.sections.append("### jaxpr\n\n" + code("\n".join(f"line {i}" for i in range(40))))
        return res

    def boom_run(quick=False):
        raise RuntimeError("topic exploded")

    for name, fn in (("fake_ok", ok_run), ("fake_boom", boom_run)):
        mod = types.ModuleType(f"compare.{name}")
        mod.run = fn
        monkeypatch.setitem(sys.modules, f"compare.{name}", mod)
    monkeypatch.setattr(cmain, "TOPICS", {"fake_ok": "both", "fake_boom": "jax"})


def test_one_topic_updates_its_section_and_failures_are_reported(monkeypatch, tmp_path):
    _fake_topics(monkeypatch)
    assert cmain.main(["fake_ok", "--quick"], out_dir=tmp_path) == 0
    assert (tmp_path / "topics" / "fake_ok.json").exists()
    assert cmain.main(["fake_boom"], out_dir=tmp_path) == 1  # raised: reported, exit 1
    text = (tmp_path / "report.md").read_text()
    # Both sections are present: running fake_boom kept the stored fake_ok result.
    assert "## fake_ok: a topic that passes" in text and "## fake_boom" in text
    assert "RuntimeError: topic exploded" in text and "FAILED (raised)" in text
    assert "## Contents" in text and "[fake_ok](#fake_ok)" in text
    assert f"jax {jax.__version__}" in text and "mixed (quick: fake_ok)" in text
    assert "*Runs: minijax and JAX.*" in text and "*Runs: JAX only.*" in text
    # The paired row: medians 2 and 4, ratio 2.00 in its own column, spreads next to them.
    assert "| step | 2 | 1.5–2.5 (min 1) | 4 | 3–5 (min 2) | 2.00 |" in text
    assert "| compile | 5 | - |" in text
    assert "<details><summary>40 lines" in text


def test_median_ms_carries_spread_and_json_keeps_it():
    t = median_ms(lambda: None, repeat=5, warmup=0)
    assert isinstance(t, Ms) and t.q1 <= t <= t.q3 and t.n == 5
    res = TopicResult("t")
    res.timings_ms["x"] = t
    rec = TopicResult.from_record(res.to_record())
    assert t.lo <= t.q1 and rec.spread("x") == (t.q1, t.q3, t.lo)
    assert res.to_json()["spread_ms"]["x"] == [t.q1, t.q3, t.lo]


def test_check_raises_wants_the_type_jax_raises():
    res = TopicResult("t")
    res.check_raises("right type", lambda: int("x"), ValueError)
    res.check_raises("wrong type", lambda: {}["k"], ValueError)
    res.check_raises("no error", lambda: 1, ValueError)
    assert [c.ok for c in res.checks] == [True, False, False]
    assert "raised KeyError" in res.checks[1].name and "did not raise" in res.checks[2].name


def test_report_renders_without_results_env():
    text = render({"x": TopicResult("empty")}, env={})
    assert "## x: empty" in text


def _one_check(got, want, **kw):
    res = TopicResult("t", runs="both")
    res.check("c", got, want, **kw)
    (c,) = res.checks
    row = next(line for line in render({"t": res}, env={}).splitlines() if line.startswith("| c |"))
    return c, row


def test_a_wrong_dtype_nan_or_shape_fails_and_says_why():
    want = jax.numpy.arange(6.0, dtype=jax.numpy.float32).reshape(2, 3)
    # Equal values, wrong dtype: JAX's own int32 result against its float32 one.
    c, row = _one_check(jax.numpy.arange(6, dtype=jax.numpy.int32).reshape(2, 3), want)
    assert not c.ok and "dtype int32 vs float32" in row and "| FAIL |" in row
    # A NumPy float64 result is a wrong dtype too (compared on np.asarray).
    c, _ = _one_check(np.asarray(want, np.float64), want)
    assert not c.ok and c.why == "dtype float64 vs float32"
    # Weak type: a Python-scalar-derived JAX result against a strong float32 one.
    c, row = _one_check(jax.jit(lambda x: x * 2)(1.0), jax.numpy.float32(2.0))
    assert not c.ok and "weak_type True vs False" in row
    # NaN at 3 elements, inf at one: named, never shown as a max_err of 0 or "-".
    bad = np.asarray(want).copy()
    bad[0, :] = np.nan
    bad[1, 0] = np.inf
    c, row = _one_check(jax.numpy.asarray(bad), want)
    assert not c.ok and "nan on one side at 3 elements" in row and "inf on one side" in row
    assert "| 0 |" not in row and not row.endswith("| - |")
    # Wrong shape: the transposed result.
    c, row = _one_check(want.T, want)
    assert not c.ok and "shape (3, 2) vs (2, 3)" in row and c.max_err is None
    # A wrong leaf count, and a plain value error (still with its size).
    c, _ = _one_check([want, want], [want])
    assert not c.ok and c.why == "2 leaves vs 1"
    c, row = _one_check(want + 1, want)
    assert not c.ok and "outside tolerance at 6 elements" in row and "max_err 1" in row
    # The same leaves pass, with a 0 error; NaN in the same place on both sides is equal.
    assert _one_check(jax.numpy.asarray(bad), jax.numpy.asarray(bad))[0].ok
    # A failed boolean check says so instead of "-".
    res = TopicResult("t")
    res.check_true("b", False)
    assert res.checks[0].shown_err() == "condition false"


def test_a_known_difference_passes_on_values_only_and_is_shown():
    want = jax.numpy.ones(3, jax.numpy.float32)
    c, row = _one_check(np.ones(3, np.float64), want, known="reference computed in float64")
    assert c.ok and "KNOWN (reference computed in float64)" in row
    c, row = _one_check(np.full(3, 2.0), want, known="reference computed in float64")
    assert not c.ok and "| FAIL |" in row  # values still have to agree
    c, row = _one_check(np.ones(3, np.float32), want, known="stale")
    assert c.ok and "| PASS |" in row and not c.known
    # A condition known to fail passes as KNOWN; once it holds, the note goes.
    res = TopicResult("t")
    res.check_true("cond", False, known="not modelled yet")
    res.check_true("held", True, known="stale")
    assert [(c.ok, c.known) for c in res.checks] == [(True, "not modelled yet"), (True, "")]
    # The note survives the stored JSON record.
    res = TopicResult("t")
    res.check("k", np.ones(3, np.float64), want, known="why")
    assert TopicResult.from_record(res.to_record()).checks[0].known == "why"


def test_a_float64_reference_checks_the_result_dtype_it_names():
    ref = np.arange(3.0)  # float64 NumPy mathematics
    assert _one_check(jax.numpy.arange(3.0), ref, dtype=np.float32)[0].ok
    c, row = _one_check(jax.numpy.arange(3), ref, dtype=np.float32)
    assert not c.ok and "dtype int32 vs float32" in row


def test_a_missed_speed_target_is_shown_but_does_not_fail_the_run(monkeypatch, tmp_path):
    def slow_run(quick=False):
        res = TopicResult("a topic whose timing misses its target", runs="both")
        res.check("values", np.ones(3), np.ones(3))
        res.check_target("step-time ratio minijax/JAX <= 1.05", 1.3 <= 1.05)
        return res

    def wrong_run(quick=False):
        res = TopicResult("a topic whose values disagree", runs="both")
        res.check("values", np.ones(3), np.zeros(3))
        res.check_target("step-time ratio minijax/JAX <= 1.05", True)
        return res

    for name, fn in (("fake_slow", slow_run), ("fake_wrong", wrong_run)):
        mod = types.ModuleType(f"compare.{name}")
        mod.run = fn
        monkeypatch.setitem(sys.modules, f"compare.{name}", mod)
    monkeypatch.setattr(cmain, "TOPICS", {"fake_slow": "both", "fake_wrong": "both"})
    assert cmain.main(["fake_slow"], out_dir=tmp_path) == 0  # a missed target: reported only
    assert cmain.main(["fake_wrong"], out_dir=tmp_path) == 1  # a wrong value fails the run
    text = (tmp_path / "report.md").read_text()
    assert ("| step-time ratio minijax/JAX <= 1.05 | minijax and JAX | MISSED (speed target) |"
            in text)
    assert "ok, speed target missed" in text and "**checks fail**" in text
    stored = TopicResult.from_record(
        json.loads((tmp_path / "topics" / "fake_slow.json").read_text()))
    assert [c.name for c in stored.missed_targets()] == ["step-time ratio minijax/JAX <= 1.05"]
    assert stored.failed_checks() == []


def test_interleaved_times_alternate_the_calls_round_by_round():
    from compare._report import interleaved_ms, interleaved_times
    order = []
    calls = {"jax": lambda: order.append("jax"), "minijax": lambda: order.append("minijax")}
    times = interleaved_times(calls, repeat=3, warmup=1)
    # one warm-up round, then three timed ones, every other one in reverse order
    assert order == ["jax", "minijax"] * 2 + ["minijax", "jax"] + ["jax", "minijax"]
    assert {k: len(v) for k, v in times.items()} == {"jax": 3, "minijax": 3}
    ms = interleaved_ms(calls, repeat=4, warmup=0)
    assert all(isinstance(v, Ms) and v.n == 4 and v.q1 <= v <= v.q3 for v in ms.values())


def test_headings_do_not_repeat_the_topic_name_and_open_with_the_intro():
    from compare._report import heading
    assert heading("sharding", "Sharding: NamedSharding, propagation") == \
        "sharding: NamedSharding, propagation"
    assert heading("mnist_mlp", "MNIST MLP: one program") == "mnist_mlp: one program"
    assert heading("ragged", "ragged_dot and gmm") == "ragged: ragged_dot and gmm"
    assert heading("gpt", "Character-level GPT") == "gpt: Character-level GPT"
    res = TopicResult("Sharding: NamedSharding", runs="both", intro="What this topic shows.")
    res.check_true("a check", True)
    rec = TopicResult.from_record(res.to_record())
    text = render({"sharding": rec}, env={})
    assert "## sharding: NamedSharding\n" in text and "Sharding: NamedSharding" not in text
    assert text.index("What this topic shows.") < text.index("| a check |")


def test_report_paths_are_relative_to_the_report_in_every_mode(monkeypatch, tmp_path):
    """A quick run writes its plots and traces to a temporary folder: the report copies them
    beside itself and links them relatively, so the report folder can be moved or zipped."""
    import re
    import tempfile
    from pathlib import Path

    from compare._report import rel
    scratch = Path(tempfile.mkdtemp(prefix="compare-test-"))
    (scratch / "loss.png").write_bytes(b"\x89PNG fake")
    (scratch / "trace").mkdir()
    (scratch / "trace" / "t.json.gz").write_bytes(b"trace")
    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "inside.png").write_bytes(b"\x89PNG")

    def files_run(quick=False):
        res = TopicResult("a topic with files", runs="both")
        res.check("values", np.ones(1), np.ones(1))
        res.sections.append(f"![loss]({rel(scratch / 'loss.png')})\n\n"
                            f"trace folder `{rel(scratch / 'trace')}`; "
                            f"![inside]({rel(out / 'plots' / 'inside.png')}); 4 ms/step")
        res.extra["trace"] = rel(scratch / "trace")
        return res

    mod = types.ModuleType("compare.fake_files")
    mod.run = files_run
    monkeypatch.setitem(sys.modules, "compare.fake_files", mod)
    monkeypatch.setattr(cmain, "TOPICS", {"fake_files": "both"})
    for quick in (["--quick"], []):
        assert cmain.main(["fake_files", *quick, "--json", str(tmp_path / "r.json")],
                          out_dir=out) == 0
        text = (out / "report.md").read_text()
        assert str(scratch) not in text and str(tmp_path) not in text
        links = re.findall(r"\]\(([^)#]+)\)", text) + re.findall(r"`(files/[^`]+)`", text)
        assert "files/fake_files/loss.png" in links and "plots/inside.png" in links
        assert "files/fake_files/trace" in links and "4 ms/step" in text
        assert all((out / link).exists() for link in links), links
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["trace"] == "files/fake_files/trace"
    shutil.rmtree(scratch)


def test_xla_log_lines_collects_the_matching_lines_and_passes_the_rest(capfd):
    import os

    from compare._report import xla_log_lines
    with xla_log_lines("[SPMD] Involuntary") as hits:
        os.write(2, b"W1201 spmd_partitioner.cc:656] [SPMD] Involuntary full remat A\n")
        os.write(2, b"another warning\n")
        os.write(2, b"W1201 spmd_partitioner.cc:656] [SPMD] Involuntary full remat B\n")
    assert [h[-1] for h in hits] == ["A", "B"]
    assert capfd.readouterr().err == "another warning\n"


def test_each_check_says_which_modules_it_ran(monkeypatch, tmp_path):
    """`runs` per check: said by the topic (`running`), else read from the check's name or the
    arrays it compares, else the topic's; the contents table counts them."""
    import minijax
    from compare._report import runs_of_check
    assert runs_of_check("grad: minijax equals JAX's") == "both"
    assert runs_of_check("minijax shards reassemble to the array") == "minijax"
    assert runs_of_check("raises the same error in both") == "both"
    assert runs_of_check("jax: pure_callback under jit") == "jax"
    assert runs_of_check("a while loop over the grid (jax)") == "jax"
    assert runs_of_check("grad equals JAX's") == ""  # JAX's as the reference: the topic says
    assert runs_of_check("values", minijax.numpy.ones(2), jax.numpy.ones(2)) == "both"
    assert runs_of_check("values", jax.numpy.ones(2), np.ones(2)) == "jax"
    assert runs_of_check("values", np.ones(2), np.ones(2)) == ""

    def mixed_run(quick=False):
        res = TopicResult("a topic with JAX-only parts", runs="both")
        res.check("minijax equals JAX", np.ones(2), np.ones(2))
        with res.running("jax"):
            res.check_true("a JAX-only property", True)
            res.check("JAX against NumPy", np.ones(2), np.ones(2))
        res.check("plain values", np.ones(2), np.ones(2))
        return res

    mod = types.ModuleType("compare.fake_mixed")
    mod.run = mixed_run
    monkeypatch.setitem(sys.modules, "compare.fake_mixed", mod)
    monkeypatch.setattr(cmain, "TOPICS", {"fake_mixed": "both"})
    assert cmain.main(["fake_mixed"], out_dir=tmp_path) == 0
    stored = TopicResult.from_record(
        json.loads((tmp_path / "topics" / "fake_mixed.json").read_text()))
    assert [c.runs for c in stored.checks] == ["both", "jax", "jax", "both"]
    text = (tmp_path / "report.md").read_text()
    assert "| a JAX-only property | JAX only | PASS |" in text
    assert "| plain values | minijax and JAX | PASS |" in text
    assert "minijax and JAX: 2, JAX only: 2" in text
    assert text.count("[Back to contents](#contents)") == 1 and '<a id="contents">' in text
    with pytest.raises(ValueError, match="expected one of"):
        with TopicResult("t").running("numpy"):
            pass


def test_quick_runs_draw_their_plots_smaller_beside_the_report(tmp_path):
    import re
    from pathlib import Path

    from compare._report import plot, save_topic

    def draw(fig):
        fig.add_subplot().plot([0, 1], [1, 0])

    md = plot("a_line", draw, figsize=(6.0, 4.0), quick=True)
    (src,) = re.findall(r"\]\(([^)]+)\)", md)
    assert Path(src).is_absolute() and Path(src).exists()
    import matplotlib.image
    h, w = matplotlib.image.imread(src).shape[:2]
    assert (w, h) == (216, 144)  # 0.6 of 6x4 inches at 60 dpi
    res = TopicResult("t", runs="both", sections=[md])
    save_topic("t", res, tmp_path)
    assert res.sections == ["![a_line](files/t/a_line.png)"]
    assert (tmp_path / "files" / "t" / "a_line.png").exists()


def test_multi_device_topics_are_skipped_with_the_reason_on_one_device(monkeypatch, tmp_path):
    assert cmain.skip_reason("sharding", 8) == "" and cmain.skip_reason("gpt", 1) == ""
    why = cmain.skip_reason("shard_map", 1, "TPU v5 lite")
    assert "needs 8 devices" in why and "has 1 (TPU v5 lite)" in why
    monkeypatch.setattr(cmain, "TOPICS", {"sharding": "both"})
    monkeypatch.setattr(cmain.jax, "device_count", lambda: 1)
    assert cmain.main(["sharding"], out_dir=tmp_path) == 0  # skipped is not failed
    text = (tmp_path / "report.md").read_text()
    assert "| skipped |" in text and "**Skipped on this machine**: needs 8 devices" in text
    # the header names the device; the saved TPU steps (or their absence) close the report
    assert f"({jax.devices()[0].device_kind})" in text
    assert "## On a TPU" in text and "The model topics' training steps" in text


def test_each_topic_declares_the_modules_it_runs(monkeypatch):
    """`compare/__init__.py: TOPICS` says which modules a topic runs, never its source's
    imports: a topic declared "jax" is labelled JAX only even when skipped, and a declaration
    other than "both" or "jax" is refused with the topic named."""
    from compare import TOPICS
    assert set(TOPICS.values()) <= {"both", "jax"}
    assert all((cmain.Path(cmain.__file__).parent / f"{name}.py").exists() for name in TOPICS)
    monkeypatch.setattr(cmain, "TOPICS", {"shard_map": "jax", "numpy": "numpy"})
    monkeypatch.setattr(cmain.jax, "device_count", lambda: 1)
    skipped = cmain.run_topic("shard_map", quick=True)
    assert skipped.status == "skipped" and skipped.runs_summary() == "JAX only"
    with pytest.raises(ValueError, match=r"TOPICS\['numpy'\] = 'numpy'.*'both'"):
        cmain.runs_of("numpy")


def test_data_keeps_a_full_runs_record_with_its_machine_and_refuses_a_quick_one(
        monkeypatch, tmp_path):
    """`--data` copies the stored record (with date, machine and versions) to
    chapters/data/run-<topic>.json, what the chapters' run markers are checked against."""
    _fake_topics(monkeypatch)
    monkeypatch.setattr(cmain, "DATA_DIR", tmp_path / "data")
    with pytest.raises(SystemExit):  # argparse's error: a quick run is not the chapters' size
        cmain.main(["fake_ok", "--quick", "--data"], out_dir=tmp_path)
    assert not (tmp_path / "data").exists()
    assert cmain.main(["fake_ok", "fake_boom", "--data"], out_dir=tmp_path) == 1
    rec = json.loads((tmp_path / "data" / "run-fake_ok.json").read_text())
    assert rec == json.loads((tmp_path / "topics" / "fake_ok.json").read_text())
    assert rec["quick"] is False and rec["date"] and rec["checks"][0]["ok"]
    assert rec["environment"]["jax"] == jax.__version__ and rec["environment"]["cpu"]
    assert not (tmp_path / "data" / "run-fake_boom.json").exists()  # a raised topic: no data
