"""numpy: the generated minijax.numpy-vs-jax.numpy conformance table (tests/numpy_conformance.py).

Runs every (function, dtype, shape, kwargs) case of the spec table, plus one gradient case per
differentiable function, and reports the number of functions and cases, the pass rate, and the
known gaps with their reasons. A check fails if a case outside `KNOWN_GAPS` disagrees with JAX or
a known gap has started to pass (then shrink `KNOWN_GAPS`), or if the committed copy of the gap
table, docs/numpy_conformance.md, is out of date; the full run then rewrites it (commit it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from compare._report import TopicResult, progress

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
import numpy_conformance as nc


def run(quick: bool = False) -> TopicResult:
    """quick: the value cases only (no gradients) and docs/numpy_conformance.md left as is."""
    # minijax.numpy against jax.numpy, through tests/numpy_conformance
    res = TopicResult("numpy conformance: every jnp function in the spec table, case by case")
    res.chapter = "docs/numpy_conformance.md"
    t0 = time.perf_counter()
    all_cases = nc.cases()
    results = {c.id: nc.check_case(c)
               for c in progress(all_cases, "numpy: value cases", unit="case")}
    gaps = {c.id: nc.gap_for(c) for c in all_cases}
    names = [] if quick else nc.grad_names()
    for name in progress(names, "numpy: gradient cases", unit="fn"):
        results[f"{name}-grad"] = nc.check_grad(name)
        gaps[f"{name}-grad"] = nc.gap_for(name)

    unexpected = {k: v for k, v in results.items() if v and not gaps[k]}
    fixed = [k for k, v in results.items() if not v and gaps[k]]
    n_pass = sum(v is None for v in results.values())
    value_ids = [c.id for c in all_cases]
    res.check_true("every value case agrees with JAX or is a known gap",
                   not any(k in unexpected for k in value_ids))
    res.check_true("no known gap passes (KNOWN_GAPS is not stale)",
                   not any(k in fixed for k in value_ids))
    if not quick:
        res.check_true("every gradient case agrees with JAX or is a known gap",
                       not any(k.endswith("-grad") for k in unexpected))
    # Read the committed file before anything rewrites it: this check fails when it is stale.
    committed = nc.DOCS_PATH.read_text() if nc.DOCS_PATH.exists() else ""
    current = committed == nc.gaps_markdown()
    res.check_true("docs/numpy_conformance.md (as committed) lists exactly the known gaps",
                   current)
    if not quick and not current:
        nc.write_docs()  # so the next run (and a commit) has it right

    n_fns = len(nc.SPECS)
    n_missing = sum(1 for (fn, sel), r in nc.KNOWN_GAPS.items()
                    if sel == "*" and r == "not implemented")
    res.extra = {"functions": n_fns, "cases": len(all_cases), "checks": len(results),
                 "passed": n_pass, "known_gaps": len(nc.KNOWN_GAPS),
                 "not_implemented": n_missing}
    lines = [
        "### Summary", "",
        f"- functions in the spec table: {n_fns} ({n_missing} not implemented in minijax)",
        f"- (function, dtype, shape, kwargs) cases: {len(all_cases)}"
        + ("" if quick else f", plus {len(names)} gradient cases"),
        f"- passing: {n_pass}/{len(results)} ({100.0 * n_pass / len(results):.1f}%)",
        f"- known gaps: {len(nc.KNOWN_GAPS)} entries",
        f"- whole topic: {time.perf_counter() - t0:.1f} s",
    ]
    if unexpected or fixed:
        lines += ["", "### Unexpected", ""]
        lines += [f"- `{k}`: {v}" for k, v in list(unexpected.items())[:50]]
        lines += [f"- `{k}`: passes but is listed in KNOWN_GAPS" for k in fixed[:50]]
    table = nc.gaps_markdown().split("## Known gaps", 1)[1]
    res.sections += ["\n".join(lines), "### Known gaps" + table]
    return res
