"""`python -m compare [topic ...] [--json PATH] [--quick]`: run topics, write the report."""

import argparse
import importlib
import os
import sys
import time

from compare import TOPICS
from compare._report import write_json, write_report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m compare", description=__doc__)
    p.add_argument("topics", nargs="*", help=f"topics to run (default: all of {', '.join(TOPICS)})")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--quick", action="store_true", help="small sizes (what the tests run)")
    p.add_argument("--cifar", metavar="DIR",
                   help="cnn_bn: train on the CIFAR-10 python batches in DIR (sets CIFAR10_DIR)")
    args = p.parse_args(argv)
    if args.cifar:
        os.environ["CIFAR10_DIR"] = args.cifar
    names = args.topics or TOPICS
    unknown = [n for n in names if n not in TOPICS]
    if unknown:
        p.error(f"unknown topic(s) {unknown}; choose from {TOPICS}")
    results, failed = {}, []
    for name in names:
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        mod = importlib.import_module(f"compare.{name}")
        res = mod.run(quick=args.quick)
        results[name] = res
        bad = [c.name for c in res.checks if not c.ok]
        failed += [f"{name}:{b}" for b in bad]
        print(f"   {sum(c.ok for c in res.checks)}/{len(res.checks)} checks passed "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    path = write_report(results)
    print(f"report: {path}")
    if args.json:
        write_json(results, args.json)
        print(f"json: {args.json}")
    if failed:
        print("FAILED checks: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
