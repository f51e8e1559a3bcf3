"""`minijax.profiler` (minijax/profiler.py) against `jax.profiler`: the same files, annotations
and errors, on the backend's own profiler session."""

import gzip
import json

import jax
import jax.profiler
import numpy as np
import pytest

import minijax


def traced(J, folder):
    step = J.jit(lambda w, x: (w * 0.5, (x @ w).sum()))
    w, x = J.numpy.ones((4, 4)), np.ones((2, 4), np.float32)
    J.block_until_ready(step(w, x))
    tag = J.profiler.annotate_function(lambda v: v, name="tagged")
    J.profiler.start_trace(str(folder), create_perfetto_trace=True)
    try:
        for i in range(2):
            with J.profiler.StepTraceAnnotation("step", step_num=i):
                w, loss = step(w, x)
                float(loss)
            with J.profiler.TraceAnnotation("between", detail=i):
                tag(i)
    finally:
        J.profiler.stop_trace()
    (path,) = folder.rglob("perfetto_trace.json.gz")
    with gzip.open(path, "rt") as f:
        names = [e.get("name") for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    files = sorted(q.name.split(".", 1)[1] for q in folder.rglob("*") if q.is_file())
    return files, [names.count(n) for n in ("step", "between", "tagged")]


def errors(J):
    out = []
    for fn in (J.profiler.stop_trace,
               lambda: J.profiler.save_device_memory_profile("/nonexistent/dir/m.prof")):
        with pytest.raises(Exception) as info:
            fn()
        out.append(type(info.value).__name__ + ": " + str(info.value).split(":")[0])
    return out


def test_trace_files_and_annotations_as_jax(tmp_path):
    mine = traced(minijax, tmp_path / "minijax")
    assert mine == traced(jax, tmp_path / "jax")
    files, counts = mine
    assert counts == [2, 2, 2] and {"xplane.pb", "trace.json.gz", "json.gz"} <= set(files)


def test_one_trace_at_a_time_and_errors_as_jax(tmp_path):
    assert errors(minijax) == errors(jax)
    minijax.profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            minijax.profiler.start_trace(str(tmp_path / "b"))
    finally:
        minijax.profiler.stop_trace()


def test_device_memory_profile_is_gzip_pprof_as_jax(tmp_path):
    keep = minijax.numpy.ones((64, 64))
    for J in (minijax, jax):
        J.profiler.save_device_memory_profile(str(tmp_path / f"{J.__name__}.prof"))
        assert (tmp_path / f"{J.__name__}.prof").read_bytes()[:2] == b"\x1f\x8b"
    assert keep.shape == (64, 64)
