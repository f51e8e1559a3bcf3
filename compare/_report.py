"""The result record every topic returns, timing helpers, and the report writer.

A topic's `run()` returns a `TopicResult`. `python -m compare` stores each one as JSON under
`compare/out/topics/<name>.json` (`save_topic`), then renders `compare/out/report.md` from every
stored topic (`write_report`), so running one topic refreshes its section and keeps the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

OUT_DIR = Path(__file__).parent / "out"
REPO = Path(__file__).parent.parent
FOLD_LINES = 25  # fenced blocks longer than this are folded into <details> in the report


def code(text: str, lang: str = "") -> str:
    """A fenced markdown code block (`lang` names the highlighting, e.g. "python")."""
    return f"```{lang}\n{text.rstrip()}\n```"


@dataclasses.dataclass
class Check:
    """One agreement check: `ok`, the largest absolute error seen (None if not numeric), `why`
    a failed check failed in words (a shape, dtype or weak-type mismatch, NaN or inf where the
    other side has none), and `known`: a difference between the modules that is understood and
    not fixed yet (the check passes on values and the report shows it as KNOWN). `target`: a
    speed target, not an agreement (`TopicResult.check_target`): a missed one is shown as
    MISSED and listed by `python -m compare`, but does not fail the run, since a timing on a
    shared or loaded machine says as much about the machine as about the code. `runs`: the
    modules the check ran, "both" (minijax and JAX), "jax" or "minijax" (`TopicResult.
    running`, `runs_of_check`)."""

    name: str
    ok: bool
    max_err: float | None = None
    why: str = ""
    known: str = ""
    target: bool = False
    runs: str = ""

    def to_json(self) -> dict:
        err = self.max_err
        if err is not None and not math.isfinite(err):
            err = None
        d = {"name": self.name, "ok": bool(self.ok), "max_err": err}
        if self.why:
            d["why"] = self.why
        if self.known:
            d["known"] = self.known
        if self.target:
            d["target"] = True
        if self.runs:
            d["runs"] = self.runs
        return d

    def shown_err(self) -> str:
        """The report's max_err cell: a failed check says why, never `0` or `-`."""
        err = None if self.max_err is None else f"{self.max_err:.3g}"
        if self.ok:
            return err or "-"
        if self.why:
            return self.why + (f" (max_err {err})" if self.max_err else "")
        if self.max_err is None:
            return "condition false"
        return err if self.max_err > 0 else "not close (max_err 0)"


class Ms(float):
    """A median in milliseconds that also carries its spread: quartiles `q1`, `q3` and the
    minimum `lo` over `n` runs.

    It is a float, so topics that store `median_ms(...)` in `timings_ms` keep working, and the
    report finds the spread on the value itself."""

    q1: float
    q3: float
    n: int
    lo: float

    def __new__(cls, median: float, q1: float, q3: float, n: int,
                lo: float | None = None) -> "Ms":
        self = super().__new__(cls, median)
        self.q1, self.q3, self.n = float(q1), float(q3), int(n)
        self.lo = float(q1 if lo is None else lo)
        return self


def ms_of(times: Iterable[float]) -> Ms:
    """Median and quartiles of a list of times in milliseconds."""
    times = sorted(float(t) for t in times)
    if len(times) >= 2:
        q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    else:
        q1 = q3 = times[0]
    return Ms(statistics.median(times), q1, q3, len(times), times[0])


@dataclasses.dataclass
class TopicResult:
    """What a topic's `run()` returns.

    checks: agreement checks; timings_ms: median wall times in milliseconds (keys naming
    `minijax` and `jax` the same way, e.g. `step: minijax` / `step: jax`, are paired in the
    report with their ratio; keys starting with `ratio` are ratios, not times); spread_ms:
    (q1, q3) per timing where known (a `Ms` value in timings_ms carries its own); devices: how
    many devices the topic ran on; sections: markdown paragraphs for the report; chapter:
    repo-relative link to the chapter that explains the topic; runs: "both" (minijax and JAX)
    or "jax" (JAX only), as `compare/__init__.py: TOPICS` declares when empty: what a check
    that does not say which modules it ran (`running`, `runs_of_check`) stands for; extra:
    other JSON-able keys, copied to the JSON root when only this topic was run; intro: the
    paragraph the report opens the topic's section with (by default the first paragraph of
    the topic module's docstring). status/error/seconds/quick are filled in by `python -m compare`.
    """

    title: str
    checks: list[Check] = dataclasses.field(default_factory=list)
    timings_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    devices: int = 1
    sections: list[str] = dataclasses.field(default_factory=list)
    chapter: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    spread_ms: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    runs: str = ""
    intro: str = ""
    status: str = "ok"
    error: str = ""
    seconds: float | None = None
    quick: bool = False
    _running: str = dataclasses.field(default="", repr=False, compare=False)

    @contextlib.contextmanager
    def running(self, runs: str):
        """The checks recorded inside the block ran `runs` ("both", "jax" or "minijax"),
        whatever their names and values suggest (`runs_of_check`)."""
        if runs not in RUNS:
            raise ValueError(f"running({runs!r}): expected one of {sorted(RUNS)}")
        saved, self._running = self._running, runs
        try:
            yield
        finally:
            self._running = saved

    def _add(self, c: "Check", *trees) -> None:
        c.runs = c.runs or self._running or runs_of_check(c.name, *trees)
        self.checks.append(c)

    def check(self, name: str, got, want, *, rtol: float = 1e-5, atol: float = 1e-6,
              known: str = "", dtype=None) -> bool:
        """Compare two pytrees of arrays leaf by leaf: same structure, shapes, dtypes and weak
        types (see `compare_trees`), values within tolerance.

        `known` names an understood difference of dtype or weak type that is not fixed yet: the
        check then passes when values and shapes agree, and the report marks it KNOWN with the
        reason; values that disagree still fail it. `dtype`: for a reference computed in NumPy
        at another precision (float64, int64), the dtype every `got` leaf must have instead of
        the reference's."""
        v = compare_trees(got, want, rtol=rtol, atol=atol, dtype=dtype)
        ok, why = v.ok, v.why
        if known and not ok and v.values_ok:
            ok, why = True, ""
        elif known and ok:  # the difference has gone: say so rather than carry a stale note
            known = ""
        self._add(Check(name, ok, v.max_err, why, known if ok else ""), got, want)
        return ok

    def check_true(self, name: str, ok: bool, *, known: str = "") -> bool:
        """A condition that must hold. `known` names an understood difference between the
        modules that is not fixed yet: the check then passes and the report shows it as
        KNOWN with the reason (and the note is dropped once the condition holds)."""
        self._add(Check(name, bool(ok) or bool(known), None, known="" if ok else known))
        return bool(ok)

    def check_target(self, name: str, ok: bool) -> bool:
        """A speed target (e.g. a step-time ratio): reported, MISSED when not met, but not an
        agreement check: `failed_checks` leaves it out."""
        self._add(Check(name, bool(ok), None, target=True))
        return bool(ok)

    def failed_checks(self) -> list[Check]:
        """The agreement checks that failed (missed speed targets are not among them)."""
        return [c for c in self.checks if not c.ok and not c.target]

    def missed_targets(self) -> list[Check]:
        return [c for c in self.checks if not c.ok and c.target]

    def check_raises(self, name: str, fn: Callable[[], Any],
                     expected: type | tuple[type, ...]) -> str:
        """Check that `fn()` raises `expected` (the type JAX raises); returns the message.

        A different exception, or none, fails the check, and the report names what happened."""
        try:
            fn()
        except expected as e:
            self._add(Check(name, True, None))
            return f"{type(e).__name__}: {e}"
        except Exception as e:  # the wrong kind of error is a failed check
            self._add(Check(f"{name} (raised {type(e).__name__})", False, None))
            return f"{type(e).__name__}: {e}"
        self._add(Check(f"{name} (did not raise)", False, None))
        return "(no exception)"

    def runs_summary(self) -> str:
        """The modules the topic's checks ran, in words: "minijax and JAX", "JAX only", or
        how many ran each where they differ."""
        counts = {}
        for c in self.checks:
            counts[c.runs or self.runs] = counts.get(c.runs or self.runs, 0) + 1
        if len(counts) <= 1:
            return RUNS.get(next(iter(counts), self.runs), self.runs or "?")
        return ", ".join(f"{RUNS.get(k, k or '?')}: {n}" for k, n in
                         sorted(counts.items(), key=lambda kv: list(RUNS).index(kv[0])
                                if kv[0] in RUNS else 9))

    def spread(self, key: str) -> tuple[float, ...] | None:
        """(q1, q3) of timing `key`, or (q1, q3, minimum) where the minimum is known."""
        if key in self.spread_ms:
            return tuple(self.spread_ms[key])
        v = self.timings_ms.get(key)
        return (v.q1, v.q3, v.lo) if isinstance(v, Ms) else None

    def to_json(self) -> dict:
        d = {
            "checks": [c.to_json() for c in self.checks],
            "timings_ms": {k: float(v) for k, v in self.timings_ms.items()},
            "devices": int(self.devices),
        }
        spreads = {k: list(s) for k in self.timings_ms if (s := self.spread(k)) is not None}
        if spreads:
            d["spread_ms"] = spreads
        d.update(self.extra)
        return d

    def to_record(self) -> dict:
        """Everything the report needs, JSON-able (what `save_topic` stores)."""
        return {
            "title": self.title, "intro": self.intro, "status": self.status,
            "error": self.error,
            "runs": self.runs, "quick": bool(self.quick), "seconds": self.seconds,
            "devices": int(self.devices), "chapter": self.chapter,
            "checks": [c.to_json() for c in self.checks],
            "timings_ms": {k: float(v) for k, v in self.timings_ms.items()},
            "spread_ms": {k: list(s) for k in self.timings_ms
                          if (s := self.spread(k)) is not None},
            "sections": list(self.sections), "extra": self.extra,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }

    @classmethod
    def from_record(cls, rec: dict) -> "TopicResult":
        res = cls(rec.get("title", "?"))
        res.checks = [Check(c["name"], c["ok"], c.get("max_err"), c.get("why", ""),
                            c.get("known", ""), c.get("target", False), c.get("runs", ""))
                      for c in rec.get("checks", [])]
        res.timings_ms = dict(rec.get("timings_ms", {}))
        res.spread_ms = {k: tuple(v) for k, v in rec.get("spread_ms", {}).items()}
        for key in ("devices", "sections", "chapter", "extra", "runs", "intro", "status",
                    "error", "seconds", "quick"):
            if key in rec:
                setattr(res, key, rec[key])
        return res


def _leaves(tree) -> list:
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _leaves(t)]
    return [tree]


_MINIJAX = re.compile(r"\bminijax\b", re.I)
_JAX = re.compile(r"(?<![\w.])jax\b|\bJAX's\b|\bboth\b", re.I)


def runs_of_check(name: str, *trees) -> str:
    """Which modules a check ran, when the topic does not say (`TopicResult.running`).

    From its name: "minijax ... equals JAX's" or "... in both": both; "minijax ..." without
    JAX: minijax; the module `jax` named alone ("jax: ...", "(jax)"): JAX. Else from the
    arrays it compares (minijax's and JAX's: both; one kind against NumPy: that module).
    Else "": the topic's `runs` then stands for it."""
    if _MINIJAX.search(name):
        return "both" if _JAX.search(_MINIJAX.sub("", name)) else "minijax"
    if re.search(r"\bboth\b", name):
        return "both"
    if re.search(r"(?<![\w.])jax\b", name):  # the module by name: "jax: ...", "(jax)"
        return "jax"
    kinds = {type(leaf).__module__.split(".")[0] for t in trees for leaf in _leaves(t)}
    kinds = {"jax" if k == "jaxlib" else k for k in kinds}
    if {"minijax", "jax"} <= kinds:
        return "both"
    return "minijax" if "minijax" in kinds else "jax" if "jax" in kinds else ""


def _type_of(x) -> tuple[np.dtype | None, bool | None]:
    """(dtype, weak_type) of a leaf: None where the leaf has none (a Python scalar has no dtype;
    a NumPy array has a dtype but no weak type)."""
    dtype = np.dtype(x.dtype) if hasattr(x, "dtype") else None
    weak = getattr(x, "weak_type", None)
    if weak is None and hasattr(x, "aval"):  # a JAX array keeps its weak type on its aval
        weak = getattr(x.aval, "weak_type", None)
    return dtype, (None if weak is None else bool(weak))


def _count(n: int, what: str) -> str:
    return f"{what} at {n} element{'s' if n != 1 else ''}"


@dataclasses.dataclass
class Verdict:
    """What `compare_trees` found: ok overall; values_ok (structure, shapes and values agree,
    types aside); max_err over elements finite on both sides; why, in words, when not ok."""

    ok: bool
    values_ok: bool
    max_err: float | None
    why: str = ""


def compare_trees(got, want, *, rtol: float = 1e-5, atol: float = 1e-6, dtype=None) -> Verdict:
    """Compare two pytrees of arrays leaf by leaf.

    Leaves must agree in number, shape, dtype (where both sides have one: NumPy and JAX arrays
    alike, so a float32 result against a float64 NumPy reference fails), weak type (where both
    sides carry one, i.e. minijax and JAX arrays) and value (`np.allclose(rtol, atol)`, NaN equal
    to NaN). NaN or inf on one side only is reported as such, not as an error size. With
    `dtype`, `want` is a reference at another precision: every `got` leaf must have that dtype
    (and the reference's dtype and weak type are not compared)."""
    g, w = _leaves(got), _leaves(want)
    if len(g) != len(w):
        return Verdict(False, False, None, f"{len(g)} leaves vs {len(w)}")
    worst, whys, values_ok, compared = 0.0, [], True, False
    for i, (x, y) in enumerate(zip(g, w)):
        at = f"leaf {i}: " if len(g) > 1 else ""
        (dx, wx), (dy, wy) = _type_of(x), _type_of(y)
        if dtype is not None:
            dx, dy, wy = np.asarray(x).dtype, np.dtype(dtype), None
        a, b = np.asarray(x), np.asarray(y)
        if a.shape != b.shape:
            whys.append(f"{at}shape {a.shape} vs {b.shape}")
            values_ok = False
            continue
        if dx is not None and dy is not None and dx != dy:
            whys.append(f"{at}dtype {dx.name} vs {dy.name}")
        elif wx is not None and wy is not None and wx != wy:
            whys.append(f"{at}weak_type {wx} vs {wy}")
        if not a.size:
            continue
        if a.dtype.kind in "biu" and b.dtype.kind in "biu":
            a, b = a.astype(np.int64), b.astype(np.int64)  # exact: no rounding through floats
        elif a.dtype.kind == "c" or b.dtype.kind == "c":
            a, b = a.astype(np.complex128), b.astype(np.complex128)
        else:
            a, b = a.astype(np.float64), b.astype(np.float64)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        inf_a, inf_b = np.isinf(a), np.isinf(b)
        bad = []
        if (n := int((nan_a != nan_b).sum())):
            bad.append(_count(n, "nan on one side"))
        if (n := int((inf_a & ~inf_b | inf_b & ~inf_a).sum()
                     + (inf_a & inf_b & (a != b)).sum())):
            bad.append(_count(n, "inf on one side or of opposite sign"))
        finite = np.isfinite(a) & np.isfinite(b)
        compared = True
        if finite.any():
            worst = max(worst, float(np.max(np.abs(a[finite] - b[finite]))))
        close = np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if bad:
            whys.append(at + ", ".join(bad))
        elif not close:
            n = int((~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)).sum())
            whys.append(f"{at}{_count(n, 'outside tolerance')}")
        values_ok = values_ok and close and not bad
    return Verdict(not whys, values_ok, worst if compared else None, "; ".join(whys))


def allclose_tree(got, want, *, rtol: float = 1e-5, atol: float = 1e-6) -> tuple[bool, float]:
    """(all leaves agree, largest absolute difference) for two pytrees of arrays: structure,
    shapes, dtypes, weak types and values, as `compare_trees` checks them."""
    v = compare_trees(got, want, rtol=rtol, atol=atol)
    return v.ok, (math.inf if v.max_err is None else v.max_err)


def median_ms(fn: Callable[[], Any], *, repeat: int = 30, warmup: int = 3) -> Ms:
    """Median wall time of `fn()` in milliseconds (an `Ms`: a float with quartiles).
    `fn` must block on its own result."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return ms_of(times)


def interleaved_times(calls: dict[str, Callable[[], Any]], *, repeat: int = 30,
                      warmup: int = 3) -> dict[str, list[float]]:
    """Wall times in ms of `repeat` calls of each `calls[name]()` (after `warmup` rounds),
    measured in rounds that call each one once, in turn: load on a shared machine then falls
    on all of them alike, where timing one after the other could hand one the quiet minute
    and the other the busy one. Every other round runs the calls in reverse order, so that
    none always goes first (after another program, with colder caches). Every comparison of
    minijax with JAX times through this (or `interleaved_ms`). Each callable must block on
    its own result (`J.block_until_ready`)."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(repeat):
        for name, fn in (reversed(calls.items()) if i % 2 else calls.items()):
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return times


def interleaved_ms(calls: dict[str, Callable[[], Any]], *, repeat: int = 30,
                   warmup: int = 3) -> dict[str, Ms]:
    """The median (an `Ms`, with quartiles) of each call's `interleaved_times`."""
    return {name: ms_of(t) for name, t in
            interleaved_times(calls, repeat=repeat, warmup=warmup).items()}


@contextlib.contextmanager
def xla_log_lines(pattern: str):
    """Collect the lines of XLA's C++ log (written to file descriptor 2, beyond Python's
    reach) that contain `pattern` into the yielded list, instead of letting them flood the
    console; every other line still reaches stderr when the block ends. A topic then says
    once what the collected warnings mean."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        hits: list[str] = []
        try:
            yield hits
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            for line in tmp.read().decode(errors="replace").splitlines(keepends=True):
                if pattern in line:
                    hits.append(line.rstrip("\n"))
                else:
                    sys.stderr.write(line)


def progress(iterable: Iterable, desc: str, total: int | None = None, unit: str = "it"):
    """`tqdm` progress on stderr for a long loop (a plain iterator when tqdm is missing)."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return iterable
    return tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False,
                mininterval=1.0, disable=os.environ.get("COMPARE_NO_PROGRESS") == "1")


def plot(name: str, draw: Callable[[Any], None], *, figsize=(6.4, 4.0), quick: bool = False) -> str:
    """Draw a matplotlib figure with `draw(fig)`, save it as `compare/out/plots/<name>.png` and
    return the markdown that shows it in the report (which lives in compare/out/). Quick runs
    (the tests, possibly several at once) draw it smaller, into a fresh temporary folder that
    `save_topic` copies beside the report."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(figsize[0] * 0.6, figsize[1] * 0.6) if quick else figsize)
    draw(fig)
    fig.tight_layout()
    folder = Path(tempfile.mkdtemp(prefix="compare-plots-")) if quick else OUT_DIR / "plots"
    path = folder / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=60 if quick else 100)
    plt.close(fig)
    return f"![{name}]({rel(path)})" if quick else f"![{name}](plots/{name}.png)"


# ---------------------------------------------------------------------------------------------
# Stored per-topic results
# ---------------------------------------------------------------------------------------------

def rel(path: str | Path) -> str:
    """How a topic names a file it wrote (a plot, a trace, a dump) in its sections: the
    absolute path, which `save_topic` turns into one relative to the report."""
    return str(Path(path).resolve())


# an absolute path in a section's text: starts after a space, quote, bracket or backtick
_ABS_PATH = re.compile(r"(?<![\w.~/-])(/(?:[\w.+@=-]+/)*[\w.+@=-]+)")


def _portable(text: str, out_dir: Path, name: str) -> str:
    """`text` with each absolute path of an existing file or folder made relative to
    `out_dir` (where report.md lies); one outside it (a quick run's temporary folder) is
    copied first to `<out_dir>/files/<name>/`, so the report and its files travel together."""
    out_dir = out_dir.resolve()

    def sub(m: re.Match) -> str:
        src = Path(m.group(1))
        if not src.exists() or src == Path("/"):
            return m.group(1)
        src = src.resolve()
        if not src.is_relative_to(out_dir):
            dst = out_dir / "files" / name / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)
            src = dst
        return os.path.relpath(src, out_dir)
    return _ABS_PATH.sub(sub, text)


def save_topic(name: str, res: TopicResult, out_dir: Path | None = None) -> Path:
    """Store one topic's result as `<out_dir>/topics/<name>.json`. The paths in its sections
    and extras become relative to `<out_dir>` (the report's folder), in place."""
    out_dir = out_dir or OUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    res.sections = [_portable(t, out_dir, name) for t in res.sections]
    res.extra = {k: _portable(v, out_dir, name) if isinstance(v, str) else v
                 for k, v in res.extra.items()}
    path = out_dir / "topics" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = res.to_record()
    rec["environment"] = environment()  # the machine and versions the numbers came from
    path.write_text(json.dumps(rec, indent=1, default=str))
    return path


def load_topics(names: Iterable[str], out_dir: Path | None = None) -> dict[str, TopicResult]:
    """The stored results of `names` that exist, in that order."""
    out = {}
    for name in names:
        path = (out_dir or OUT_DIR) / "topics" / f"{name}.json"
        if path.exists():
            out[name] = TopicResult.from_record(json.loads(path.read_text()))
    return out


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------

def environment() -> dict[str, str]:
    """Versions and machine, for the report header."""
    import jax
    import jaxlib

    import minijax
    from compare._modules import DEFAULT_PRECISION_ON_TPU, check_precision
    precision = check_precision()
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "minijax": minijax.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
        "numpy": np.__version__, "python": platform.python_version(),
        "cpu": f"{cpu} ({os.cpu_count()} logical cores)",
        "devices": f"{jax.device_count()} x {jax.default_backend()}",
        "device_kind": jax.devices()[0].device_kind,
        "matmul_precision": (f"{precision} (the checks' float32 tolerances; the backend's "
                             "default is one bf16 pass), but for " + ", ".join(
                                 DEFAULT_PRECISION_ON_TPU) + " (see compare/_modules.py)"
                             if precision else ""),
    }


def _fold(section: str) -> str:
    """Fold fenced code blocks longer than FOLD_LINES lines into a <details> element."""
    def sub(m: re.Match) -> str:
        block = m.group(0)
        n = block.count("\n") - 1
        if n <= FOLD_LINES:
            return block
        return f"<details><summary>{n} lines (click to show)</summary>\n\n{block}\n\n</details>"
    return re.sub(r"^```[^\n]*\n.*?^```$", sub, section, flags=re.S | re.M)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _spread(s) -> str:
    if s is None:
        return "-"
    return f"{s[0]:.4g}–{s[1]:.4g}" + (f" (min {s[2]:.4g})" if len(s) > 2 else "")


def timing_tables(r: TopicResult) -> list[str]:
    """Markdown tables for `r.timings_ms`: minijax/JAX pairs with their ratio, then the rest."""
    keys = list(r.timings_ms)
    pairs, used = [], set()
    for k in keys:
        if re.search(r"\bminijax\b", k):
            kj = re.sub(r"\bminijax\b", "jax", k)
            if kj in r.timings_ms and kj != k:
                pairs.append((k, kj))
                used |= {k, kj}
    out = []
    if pairs:
        rows = ["| what | JAX ms | JAX spread | minijax ms | minijax spread | minijax / JAX |",
                "|---|---|---|---|---|---|"]
        for k, kj in pairs:
            label = re.sub(r"\s+", " ", re.sub(r"[:,]?\s*\bminijax\b\s*[:,]?", " ", k)).strip()
            mj, jx = r.timings_ms[k], r.timings_ms[kj]
            ratio = f"{mj / jx:.2f}" if jx else "-"
            rows.append(f"| {label} | {_fmt(jx)} | {_spread(r.spread(kj))} | {_fmt(mj)} | "
                        f"{_spread(r.spread(k))} | {ratio} |")
        out.append("\n".join(rows))
    rest = [k for k in keys if k not in used and not k.lower().startswith("ratio")]
    if rest:
        rows = ["| what | median ms | spread (q1–q3, min) |", "|---|---|---|"]
        rows += [f"| {k} | {_fmt(r.timings_ms[k])} | {_spread(r.spread(k))} |" for k in rest]
        out.append("\n".join(rows))
    ratios = [k for k in keys if k.lower().startswith("ratio")]
    if ratios:
        out.append("\n".join(["| ratio | value |", "|---|---|"]
                             + [f"| {k} | {r.timings_ms[k]:.3g} |" for k in ratios]))
    return out


RUNS = {"both": "minijax and JAX", "jax": "JAX only", "minijax": "minijax only"}


def heading(name: str, title: str) -> str:
    """`name: title`, without the topic's name twice when the title starts with it
    ("Sharding: NamedSharding, ..." under `sharding`, "MNIST MLP: ..." under `mnist_mlp`)."""
    said = "|".join(re.escape(name.replace("_", sep)) for sep in ("_", " ", "-"))
    rest = re.sub(rf"^(?:{said})\b[:\s]*", "", title, flags=re.I)
    return f"{name}: {rest or title}"


def render(results: dict[str, TopicResult], env: dict[str, str] | None = None,
           run_seconds: float | None = None) -> str:
    """The report's markdown for `results` (topic name -> result, in report order)."""
    env = env if env is not None else environment()
    modes = {r.quick for r in results.values()}
    mode = ("quick" if modes == {True} else "full" if modes == {False} else
            "mixed (quick: " + ", ".join(n for n, r in results.items() if r.quick) + ")")
    total = sum(r.seconds or 0.0 for r in results.values())
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# minijax and JAX: comparison report", "",
             "The same programs run through minijax and real JAX. Each check says which "
             "modules it ran: *minijax and JAX* (the two compared), *JAX only* (a real JAX "
             "feature minijax does not model, checked against NumPy or JAX's documented "
             "behaviour) or *minijax only*.", "",
             f"- written: {now}; sizes: {mode}; topic time: {total:.1f} s"
             + (f" (this run: {run_seconds:.1f} s)" if run_seconds is not None else ""),
             "- versions: " + ", ".join(f"{k} {env[k]}" for k in
                                         ("minijax", "jax", "jaxlib", "numpy", "python")
                                         if k in env),
             f"- machine: {env.get('cpu', '?')}; devices: {env.get('devices', '?')}"
             + (f" ({env['device_kind']})" if "device_kind" in env else "")
             + (f"; matmul precision: {env['matmul_precision']}" if env.get(
                 "matmul_precision") else ""), "",
             '<a id="contents"></a>', "", "## Contents", "",
             "| topic | runs | status | checks passed | worst max_err | time s | ran | chapter |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        passed = sum(c.ok for c in r.checks)
        errs = [c.max_err for c in r.checks if c.max_err is not None]
        worst = f"{max(errs):.3g}" if errs else "-"
        status = ("**FAILED (raised)**" if r.status == "error" else
                  "skipped" if r.status == "skipped" else
                  "**checks fail**" if r.failed_checks() else
                  "ok, speed target missed" if r.missed_targets() else "ok")
        chap = "-"
        if r.chapter:  # a chapter not written yet is named, not linked
            exists = (REPO / r.chapter).exists()
            chap = f"[{r.chapter}](../../{r.chapter})" if exists else f"{r.chapter} (planned)"
        secs = "-" if r.seconds is None else f"{r.seconds:.1f}"
        lines.append(f"| [{name}](#{name}) | {r.runs_summary()} | {status} | "
                     f"{passed}/{len(r.checks)} | {worst} | {secs} | "
                     f"{'quick' if r.quick else 'full'} | {chap} |")
    for name, r in results.items():
        lines += ["", f'<a id="{name}"></a>', "", f"## {heading(name, r.title)}", ""]
        lines += [r.intro, ""] if r.intro else []
        lines += [f"*Runs: {r.runs_summary()}.* [Back to contents](#contents)"]
        if r.status == "error":
            lines += ["", "**This topic raised an exception**; the run went on with the "
                      "others. Traceback:", "", code(r.error)]
        if r.status == "skipped":
            lines += ["", f"**Skipped on this machine**: {r.error}."]
        if r.checks:
            lines += ["", "| check | runs | ok | max_err |", "|---|---|---|---|"]
            for c in r.checks:
                mark = ("MISSED (speed target)" if c.target else "FAIL") if not c.ok \
                    else f"KNOWN ({c.known})" if c.known else "PASS"
                runs = RUNS.get(c.runs or r.runs, c.runs or r.runs or "?")
                lines.append(f"| {c.name} | {runs} | {mark} | {c.shown_err()} |")
        tables = timing_tables(r)
        if tables:
            lines += ["", f"Timings (median ms; spread = quartiles q1–q3 and the minimum; "
                      f"{r.devices} device(s)):", ""]
            lines += ["\n\n".join(tables)]
        for s in r.sections:
            lines += ["", _fold(s)]
    from tools import accelerator_compare
    lines += ["", "## On a TPU", "", accelerator_compare.report_section()]
    return "\n".join(lines) + "\n"


def write_report(results: dict[str, TopicResult], path: Path | None = None,
                 run_seconds: float | None = None) -> Path:
    """Write the markdown report for `results` and return its path."""
    path = path or OUT_DIR / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(results, run_seconds=run_seconds))
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
