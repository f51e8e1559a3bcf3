"""The result record every topic returns, timing helpers, and the report writer."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

OUT_DIR = Path(__file__).parent / "out"


def code(text: str, lang: str = "") -> str:
    """A fenced markdown code block (`lang` names the highlighting, e.g. "python")."""
    return f"```{lang}\n{text.rstrip()}\n```"


@dataclasses.dataclass
class Check:
    """One agreement check: `ok` and the largest absolute error seen (None if not numeric)."""

    name: str
    ok: bool
    max_err: float | None = None

    def to_json(self) -> dict:
        err = self.max_err
        if err is not None and not math.isfinite(err):
            err = None
        return {"name": self.name, "ok": bool(self.ok), "max_err": err}


@dataclasses.dataclass
class TopicResult:
    """What a topic's `run()` returns.

    checks: agreement checks; timings_ms: median wall times in milliseconds; devices: how many
    devices the topic ran on; sections: markdown paragraphs for the report (jaxprs side by side,
    explanations); chapter: repo-relative link to the chapter that explains the topic;
    extra: other JSON-able keys, copied to the JSON root when only this topic was run.
    """

    title: str
    checks: list[Check] = dataclasses.field(default_factory=list)
    timings_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    devices: int = 1
    sections: list[str] = dataclasses.field(default_factory=list)
    chapter: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def check(self, name: str, got, want, *, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
        """Compare two pytrees of arrays leaf by leaf (same shapes, values within tolerance)."""
        ok, err = allclose_tree(got, want, rtol=rtol, atol=atol)
        self.checks.append(Check(name, ok, err))
        return ok

    def check_true(self, name: str, ok: bool) -> bool:
        self.checks.append(Check(name, bool(ok), None))
        return bool(ok)

    def to_json(self) -> dict:
        d = {
            "checks": [c.to_json() for c in self.checks],
            "timings_ms": {k: float(v) for k, v in self.timings_ms.items()},
            "devices": int(self.devices),
        }
        d.update(self.extra)
        return d


def _leaves(tree) -> list:
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _leaves(t)]
    return [tree]


def allclose_tree(got, want, *, rtol: float = 1e-5, atol: float = 1e-6) -> tuple[bool, float]:
    """(all leaves close, largest absolute difference) for two pytrees of arrays."""
    g, w = _leaves(got), _leaves(want)
    if len(g) != len(w):
        return False, math.inf
    ok, worst = True, 0.0
    for a, b in zip(g, w):
        a = np.asarray(a, dtype=np.float64) if np.asarray(a).dtype != bool else np.asarray(a)
        b = np.asarray(b, dtype=np.float64) if np.asarray(b).dtype != bool else np.asarray(b)
        if a.shape != b.shape:
            return False, math.inf
        if a.size:
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            worst = max(worst, float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf)
        ok = ok and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return ok, worst


def median_ms(fn: Callable[[], Any], *, repeat: int = 30, warmup: int = 3) -> float:
    """Median wall time of `fn()` in milliseconds. `fn` must block on its own result."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def write_report(results: dict[str, TopicResult], path: Path | None = None) -> Path:
    """Write the markdown report (agreement table, timings, sections) and return its path."""
    path = path or OUT_DIR / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# minijax vs JAX: comparison report", ""]
    lines += ["| topic | checks passed | worst max_err | devices | chapter |",
              "|---|---|---|---|---|"]
    for name, r in results.items():
        passed = sum(c.ok for c in r.checks)
        errs = [c.max_err for c in r.checks if c.max_err is not None]
        worst = f"{max(errs):.3g}" if errs else "-"
        chap = "-"
        if r.chapter:  # a chapter not written yet is named, not linked
            exists = (Path(__file__).parent.parent / r.chapter).exists()
            chap = f"[{r.chapter}](../../{r.chapter})" if exists else f"{r.chapter} (planned)"
        lines.append(f"| {name} | {passed}/{len(r.checks)} | {worst} | {r.devices} | {chap} |")
    for name, r in results.items():
        lines += ["", f"## {name}: {r.title}", ""]
        lines += ["| check | ok | max_err |", "|---|---|---|"]
        for c in r.checks:
            err = "-" if c.max_err is None else f"{c.max_err:.3g}"
            lines.append(f"| {c.name} | {'PASS' if c.ok else 'FAIL'} | {err} |")
        if r.timings_ms:
            lines += ["", f"Timings (median, ms, {r.devices} device(s)):", ""]
            lines += ["| what | ms |", "|---|---|"]
            lines += [f"| {k} | {v:.4g} |" for k, v in r.timings_ms.items()]
        for s in r.sections:
            lines += ["", s]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_json(results: dict[str, TopicResult], path: str | Path) -> None:
    """Write `{"topics": {name: {...}}}`; with one topic, its extra keys also go at the root."""
    doc: dict[str, Any] = {"topics": {n: r.to_json() for n, r in results.items()}}
    if len(results) == 1:
        (only,) = results.values()
        for k, v in only.extra.items():
            doc.setdefault(k, v)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=2))
