"""`python -m compare [topic ...] [--json PATH] [--quick] [--data]`: run topics, write the report.

Each topic's result is stored in `compare/out/topics/<name>.json`; the report is then rendered
from every stored topic, so `python -m compare jit` refreshes the jit section and keeps the
rest. A topic that raises is recorded as failed, with its traceback, and the run goes on. A
topic that builds meshes of several devices is skipped, with the reason, on a machine with
fewer (a one-chip TPU machine: the CPU's eight devices come from an XLA flag that only the CPU
client reads). With `--data`, a full run's stored result is also copied to
`chapters/data/run-<name>.json`: the committed data that the chapters' `<!-- run: ... -->`
markers are checked against (tests/chapters/prose_numbers_test.py).
"""

import argparse
import importlib
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import jax

from compare import TOPICS
from compare._modules import check_precision, precision_scope
from compare._report import (
    OUT_DIR,
    REPO,
    TopicResult,
    load_topics,
    save_topic,
    write_json,
    write_report,
)

DATA_DIR = REPO / "chapters" / "data"  # `--data`: a full run's record, run-<topic>.json

# Topics whose meshes span up to eight devices (multi_process also starts processes that
# connect through sockets); `compare/__init__.py` asks the CPU client for eight.
MULTI_DEVICE = ("placement", "sharding", "multi_process", "shard_map", "gpt_sharded",
                "scaling_book", "callbacks", "debugging", "offloading")


def skip_reason(name: str, n_devices: int, device_kind: str = "") -> str:
    """Why topic `name` cannot run on a machine with `n_devices` devices, or "" if it can."""
    if name in MULTI_DEVICE and n_devices < 8:
        kind = f" ({device_kind})" if device_kind else ""
        return (f"needs 8 devices for its meshes; this machine has {n_devices}{kind}. Run it "
                "on a CPU, where compare/__init__.py asks for 8 host devices")
    return ""


def runs_of(name: str) -> str:
    """The modules topic `name` declares it runs (`compare/__init__.py: TOPICS`): "both"
    (minijax and JAX) or "jax" (JAX only), what its checks ran when they do not say
    (`TopicResult.runs`). Raises ValueError naming the topic for any other declaration."""
    runs = TOPICS[name]
    if runs not in ("both", "jax"):
        raise ValueError(f"compare/__init__.py: TOPICS[{name!r}] = {runs!r}; a topic declares "
                         "the modules it runs: 'both' (minijax and JAX) or 'jax' (JAX only)")
    return runs


def run_topic(name: str, quick: bool) -> TopicResult:
    """Run one topic; an exception becomes a failed result carrying the traceback."""
    t0 = time.perf_counter()
    runs = runs_of(name)
    reason = skip_reason(name, jax.device_count(), jax.devices()[0].device_kind)
    if reason:
        return TopicResult(f"{name} (skipped)", status="skipped", error=reason, quick=quick,
                           runs=runs, seconds=0.0)
    try:
        mod = importlib.import_module(f"compare.{name}")
        with precision_scope(check_precision(name)):
            res = mod.run(quick=quick)
    except Exception:  # report it and go on with the other topics
        res = TopicResult(f"{name} (raised)", status="error", error=traceback.format_exc())
    res.seconds = time.perf_counter() - t0
    res.quick = quick
    res.runs = res.runs or runs
    for c in res.checks:  # a check that did not say which modules it ran: the topic's
        c.runs = c.runs or res.runs
    res.intro = res.intro or intro_of(name)
    return res


def rel_to_repo(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def intro_of(name: str) -> str:
    """The first paragraph of the topic module's docstring, on one line (the report opens the
    topic's section with it, before its checks)."""
    mod = sys.modules.get(f"compare.{name}")
    doc = (getattr(mod, "__doc__", None) or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def main(argv=None, out_dir: Path | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m compare", description=__doc__)
    p.add_argument("topics", nargs="*", help=f"topics to run (default: all of {', '.join(TOPICS)})")
    p.add_argument("--json", metavar="PATH", help="also write this run's results as JSON to PATH")
    p.add_argument("--quick", action="store_true", help="small sizes (what the tests run)")
    p.add_argument("--cifar", metavar="DIR",
                   help="cnn_bn: train on the CIFAR-10 python batches in DIR (sets CIFAR10_DIR)")
    p.add_argument("--data", action="store_true",
                   help="also copy each finished topic's result to chapters/data/run-<topic>.json "
                        "(full runs only: the data the chapters' run markers are checked against)")
    args = p.parse_args(argv)
    if args.data and args.quick:
        p.error("--data keeps a full run's result for the chapters; a --quick run's sizes "
                "are not the ones they describe")
    if args.cifar:
        os.environ["CIFAR10_DIR"] = args.cifar
    names = args.topics or list(TOPICS)
    unknown = [n for n in names if n not in TOPICS]
    if unknown:
        p.error(f"unknown topic(s) {unknown}; choose from {list(TOPICS)}")
    out_dir = out_dir or OUT_DIR
    results, failed, missed = {}, [], []
    t_run = time.perf_counter()
    for i, name in enumerate(names, 1):
        print(f"== [{i}/{len(names)}] {name}", flush=True)
        res = run_topic(name, args.quick)
        results[name] = res
        stored = save_topic(name, res, out_dir)
        if args.data and res.status == "ok":
            DATA_DIR.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stored, DATA_DIR / f"run-{name}.json")
            print(f"   data: {rel_to_repo(DATA_DIR / f'run-{name}.json')}", flush=True)
        if res.status == "error":
            failed.append(f"{name}: raised")
            print(res.error.rstrip().splitlines()[-1], flush=True)
        if res.status == "skipped":
            print(f"   skipped: {res.error}", flush=True)
            continue
        failed += [f"{name}:{c.name}" for c in res.failed_checks()]
        missed += [f"{name}:{c.name}" for c in res.missed_targets()]
        print(f"   {sum(c.ok for c in res.checks)}/{len(res.checks)} checks passed "
              f"({res.seconds:.1f} s)", flush=True)
    stored = load_topics(list(TOPICS), out_dir)
    path = write_report(stored, out_dir / "report.md", run_seconds=time.perf_counter() - t_run)
    print(f"report: {path} ({len(stored)} topics, {len(names)} run now)")
    if args.json:
        write_json(results, args.json)
        print(f"json: {args.json}")
    if missed:  # reported, not a failure: timings on a loaded machine vary (Check.target)
        print("speed targets missed on this machine: " + ", ".join(missed))
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
