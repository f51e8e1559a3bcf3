"""compare/multi_process.py at its (only) size: 2 processes x 4 CPU devices connected with
jax.distributed run the same minijax training step as one 8-device process; every loss must
match, and the children must be gone afterwards."""

import pytest

from compare import multi_process


@pytest.mark.slow
def test_two_processes_match_one():
    res = multi_process.run(quick=True)
    failing = [c.name for c in res.checks if not c.ok]
    assert res.checks and not failing, failing


def test_failing_child_is_reported_and_reaped(monkeypatch):
    # process 1 dies at once (a bad port argument) while process 0 waits for it at the
    # coordinator: the error names it, and process 0 is killed instead of left waiting
    started = []
    real = multi_process._start

    def start(i, n, port, devices, log):
        p = real(i, n, "not-a-port" if i == 1 else port, devices, log)
        started.append(p)
        return p
    monkeypatch.setattr(multi_process, "_start", start)
    with pytest.raises(RuntimeError, match="process 1 exited"):
        multi_process.run_job(2, 4, timeout_s=60)
    assert started and all(p.poll() is not None for p in started)
