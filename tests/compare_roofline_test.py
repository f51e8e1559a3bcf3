"""The roofline's ladder points (compare/profiling.py: ladder_points) read from stored topic
results: intensity = flops / bytes, achieved = flops / step time; topics missing or without
bytes are left out."""

import json

from compare.profiling import ladder_points


def test_ladder_points_from_stored_topics(tmp_path):
    entries = {"jax": {"flops": 6e9, "bytes_accessed": 1.5e8, "step_ms": 120.0},
               "minijax": {"flops": 6e9, "bytes_accessed": 1.2e8, "step_ms": 100.0}}
    (tmp_path / "gpt.json").write_text(json.dumps({"extra": entries}))
    (tmp_path / "moe.json").write_text(json.dumps(  # recorded before bytes were stored
        {"extra": {"jax": {"flops": 7e9, "step_ms": 80.0}}}))
    points = {p[0]: p for p in ladder_points(tmp_path)}
    assert set(points) == {"GPT jax", "GPT minijax"}
    for name, e in entries.items():
        _, intensity, achieved, *_ = points[f"GPT {name}"]
        assert intensity == e["flops"] / e["bytes_accessed"]
        assert abs(achieved - e["flops"] / (e["step_ms"] * 1e-3)) < 1e-3 * achieved


def test_roofline_runs_at_the_default_precision_on_a_tpu(monkeypatch):
    """At `highest` XLA's TPU compile of the CNN step stalls (compare/profiling.py:
    TPU_DEFAULT_PRECISION): there the roofline sets the default in both modules; elsewhere
    it leaves the caller's precision."""
    import jax

    import minijax
    from compare import profiling
    from compare._modules import precision_scope
    seen = []
    monkeypatch.setattr(profiling, "_measure_roofline", lambda res, quick, precision: seen.append(
        (precision, jax.config.jax_default_matmul_precision,
         minijax.config.jax_default_matmul_precision)))
    for platform in ("tpu", "cpu"):
        monkeypatch.setattr(jax, "default_backend", lambda platform=platform: platform)
        with precision_scope("highest"):  # what compare/__main__.py sets on a TPU
            profiling._roofline(None, quick=True)
    assert seen == [("default", "default", "default"), (None, "highest", "highest")]
