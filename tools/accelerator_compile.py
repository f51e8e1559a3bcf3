"""XLA's compile of the model steps on the chip under minijax and JAX, measured enough times
to tell a difference between the two programs from XLA's spread on one program.

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/accelerator_compile.py [--rounds 5] [--out FILE]

`tools/accelerator_compare.py: compile_phases` times each module's first call in three fresh
builds, and XLA's compile of one program there ranged over half of its median. This script
asks two questions per topic (`--topics`, default the GPT and the MoE):

* `builds`: each module's own path, `rounds` fresh builds in alternating order (a new top-level
  function each time, so neither module's caches answer): `lower` (trace and lower) and
  `compile` (XLA), seconds.
* `same_path`: each module's lowered text (with its locations), compiled `rounds` times
  through one call, the backend's `compile_and_load` with JAX's compile options, alternating:
  XLA's time on each program alone, whatever either module does around it.

Where `same_path` gives both programs the same time within its spread, a gap in `builds`
is XLA's spread or the path, not the program. Writes `chapters/data/compile-tpu.json`
(`--out`: elsewhere); without a TPU it says so and writes nothing (`tools/_chip.py`), unless
`--out` names another file (`--smoke`: small models, for a CPU check of the script).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

OUT = ROOT / "chapters" / "data" / "compile-tpu.json"
TOPICS = ("gpt", "moe")


def builds(name: str, rounds: int, smoke: bool) -> tuple[list[dict], dict[str, str]]:
    """`rounds` fresh builds of topic `name`, the modules alternating which goes first: rows
    {"module", "round", "lower_s", "compile_s"}; and each module's lowered text (the last)."""
    from tools import accelerator_compare as A

    rows, texts = [], {}
    for r in range(rounds):
        entries, batches, _ = A.BUILDERS[name](smoke, 3, A._modules())
        for module in (("minijax", "jax") if r % 2 == 0 else ("jax", "minijax")):
            _, call, state = entries[module]
            t0 = time.perf_counter()
            lowered = call.lower(state, *batches[0])
            t1 = time.perf_counter()
            lowered.compile()
            t2 = time.perf_counter()
            rows.append({"module": module, "round": r, "lower_s": t1 - t0, "compile_s": t2 - t1})
            texts[module] = lowered.as_text(debug_info=True)
    return rows, texts


def same_path(texts: dict[str, str], rounds: int) -> list[dict]:
    """Each text compiled `rounds` times by the backend's `compile_and_load`, alternating, with
    the options JAX's compiler module makes for one device: rows {"module", "round",
    "compile_s", "chars"}."""
    import jax.extend.backend as jeb
    from jaxlib._jax import DeviceList

    backend = jeb.get_backend()
    device = backend.local_devices()[0]
    options = jeb.get_compile_options(num_replicas=1, num_partitions=1,
                                      device_assignment=[[device.id]], backend=backend)
    rows = []
    for r in range(rounds):
        for module in (("minijax", "jax") if r % 2 == 0 else ("jax", "minijax")):
            t0 = time.perf_counter()
            backend.compile_and_load(texts[module], DeviceList((device,)), options)
            rows.append({"module": module, "round": r, "compile_s": time.perf_counter() - t0,
                         "chars": len(texts[module])})
    return rows


def summary(rows: list[dict], key: str) -> dict:
    """Per module: the median, the fastest and the slowest of `key`, and minijax/JAX of the
    medians and of the fastest."""
    out = {}
    for module in ("minijax", "jax"):
        xs = [r[key] for r in rows if r["module"] == module]
        out[module] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    out["ratio_median"] = out["minijax"]["median"] / out["jax"]["median"]
    out["ratio_min"] = out["minijax"]["min"] / out["jax"]["min"]
    return out


def show(path: Path = OUT) -> None:
    """Print the committed record: per topic, XLA's compile seconds of each module's program by
    its own path and by one path (every round, then the medians and minijax/JAX)."""
    if not path.exists():
        print(f"no record at {path.name}: run this script on a TPU")
        return
    doc = json.loads(path.read_text())
    print(f"{doc['device_kind']}, JAX {doc['jax']}, measured {doc['date'][:10]}, "
          f"{doc['rounds']} rounds")
    for name, t in doc["topics"].items():
        for part, rows, s in (("own paths", t["builds"], t["compile"]),
                              ("one path ", t["same_path"], t["same_path_compile"])):
            each = {m: " ".join(f"{r['compile_s']:.2f}" for r in rows if r["module"] == m)
                    for m in ("minijax", "jax")}
            print(f"{name:4} {part}: minijax {each['minijax']} | JAX {each['jax']} | median "
                  f"{s['minijax']['median']:.2f} / {s['jax']['median']:.2f} = "
                  f"{s['ratio_median']:.2f}")
        lo = t["lower"]
        print(f"{name:4} lowering:  minijax {lo['minijax']['median']:.3f} s, JAX "
              f"{lo['jax']['median']:.3f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--topics", default=",".join(TOPICS))
    p.add_argument("--smoke", action="store_true", help="small models: checks the script")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    from tools._chip import no_accelerator
    if no_accelerator(f"nothing measured, {OUT.name} not written",
                      allow=args.smoke or args.out.resolve() != OUT.resolve()):
        return 0
    import jax

    dev = jax.devices()[0]
    doc = {"device_kind": dev.device_kind, "platform": dev.platform, "jax": jax.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": args.rounds,
           "smoke": args.smoke, "topics": {}}
    for name in args.topics.split(","):
        t0 = time.perf_counter()
        rows, texts = builds(name, args.rounds, args.smoke)
        raw = same_path(texts, args.rounds)
        doc["topics"][name] = {
            "builds": rows, "same_path": raw, "seconds": time.perf_counter() - t0,
            "lower": summary(rows, "lower_s"), "compile": summary(rows, "compile_s"),
            "same_path_compile": summary(raw, "compile_s")}
        s, c = doc["topics"][name]["same_path_compile"], doc["topics"][name]["compile"]
        print(f"{name}: own paths, compile median {c['minijax']['median']:.2f} s / "
              f"{c['jax']['median']:.2f} s ({c['ratio_median']:.2f}); one path, median "
              f"{s['minijax']['median']:.2f} / {s['jax']['median']:.2f} "
              f"({s['ratio_median']:.2f}), fastest {s['ratio_min']:.2f}", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
