"""The comparison report (`compare/_report.py`, `compare/__main__.py`): stored per-topic results,
a failing topic reported with its traceback, paired timings with spread and ratio, folding."""

import sys
import types

import jax
import numpy as np

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
    monkeypatch.setattr(cmain, "TOPICS", ["fake_ok", "fake_boom"])


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
    assert "| step | 2 | 1.5–2.5 | 4 | 3–5 | 2.00 |" in text
    assert "| compile | 5 | - |" in text
    assert "<details><summary>40 lines" in text


def test_median_ms_carries_spread_and_json_keeps_it():
    t = median_ms(lambda: None, repeat=5, warmup=0)
    assert isinstance(t, Ms) and t.q1 <= t <= t.q3 and t.n == 5
    res = TopicResult("t")
    res.timings_ms["x"] = t
    rec = TopicResult.from_record(res.to_record())
    assert rec.spread("x") == (t.q1, t.q3)
    assert res.to_json()["spread_ms"]["x"] == [t.q1, t.q3]


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
