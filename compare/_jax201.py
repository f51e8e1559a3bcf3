"""Small helpers shared by the topics of the JAX 201 pages.

Nothing here knows about a particular topic: timing with a blocking wrapper, catching an error so
the report can quote it, counting the collectives XLA wrote into a compiled program, capturing
printed output, and picking an output folder that is safe when tests run in parallel.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import jax

from compare._report import OUT_DIR, TopicResult, interleaved_ms, median_ms, rel  # noqa: F401 (rel)

# The HLO opcodes that move data between devices. Async forms appear as `<op>-start`/`<op>-done`
# pairs; we count the `-start` half (or the plain op) so each transfer is counted once.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_OPCODE = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def count_collectives(hlo_text: str) -> dict[str, int]:
    """How many of each collective opcode appear in an HLO module's text."""
    counts = {c: 0 for c in COLLECTIVES}
    for line in hlo_text.splitlines():
        # An instruction line reads `%name = type opcode(operands), attrs`; look after the `=`.
        _, eq, rhs = line.partition("=")
        if not eq:
            continue
        for m in _OPCODE.finditer(rhs):
            counts[m.group(1)] += 1
    return counts


_DTYPE_BYTES = {"f64": 8, "f32": 4, "s32": 4, "u32": 4, "bf16": 2, "f16": 2, "s16": 2,
                "s8": 1, "u8": 1, "pred": 1}
_COLLECTIVE_TYPE = re.compile(r"= (.*?) (" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def collective_bytes(hlo_text: str, n: int) -> dict[str, int]:
    """Bytes each device receives per collective kind, read from the shapes in compiled HLO.

    A ring over n devices receives (n-1)/n of the gathered result of an all-gather, (n-1)/n
    of the (n times larger) input of a reduce-scatter, twice (n-1)/n of an all-reduce's array
    (a reduce-scatter, then an all-gather), (n-1)/n of an all-to-all's array, and the whole
    array of a collective-permute. A tuple type (XLA combining several collectives) counts
    every element."""
    out = {c: 0 for c in COLLECTIVES}
    for line in hlo_text.splitlines():
        m = _COLLECTIVE_TYPE.search(line)
        if not m:
            continue
        result_type, op = m.groups()
        if op.endswith("-done"):
            continue
        size = sum(_DTYPE_BYTES[d] * math.prod(int(k) for k in dims.split(",") if k)
                   for d, dims in re.findall(r"\b([a-z]+\d*)\[([\d,]*)\]", result_type)
                   if d in _DTYPE_BYTES)
        if op == "collective-permute":
            out[op] += size
            continue
        if op == "reduce-scatter":
            size *= n
        out[op] += (2 if op == "all-reduce" else 1) * (n - 1) * size // n
    return out


def hlo_opcodes(hlo_text: str) -> list[str]:
    """The opcode of every instruction in HLO text, in order.

    An instruction reads `[ROOT] %name = TYPE opcode(operands), attrs`, where TYPE may be a
    tuple such as `(s32[], f32[4,4]{1,0})` containing spaces, so it is skipped by matching
    parentheses rather than by a regular expression.
    """
    ops = []
    for line in hlo_text.splitlines():
        head, eq, rhs = line.partition(" = ")
        name = head.strip().removeprefix("ROOT").strip()
        if not eq or not name.startswith("%"):
            continue
        rhs = rhs.lstrip()
        if rhs.startswith("("):
            depth = 0
            for i, ch in enumerate(rhs):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    rhs = rhs[i + 1:]
                    break
        else:
            rhs = rhs.split(" ", 1)[1] if " " in rhs else ""
        m = re.match(r"\s*([a-z][a-z0-9\-]*)\(", rhs)
        if m:
            ops.append(m.group(1))
    return ops


def collective_lines(hlo_text: str, limit: int = 6, width: int = 160) -> list[str]:
    """The instruction lines that are collectives, trimmed, for quoting in the report."""
    out = []
    for line in hlo_text.splitlines():
        _, eq, rhs = line.partition("=")
        if eq and _OPCODE.search(rhs):
            s = line.strip()
            out.append(s if len(s) <= width else s[: width - 3] + "...")
    return out[:limit]


def fmt_counts(counts: dict[str, int]) -> str:
    """`all-reduce x1, all-gather x2` (only nonzero), or `none`."""
    parts = [f"{k} x{v}" for k, v in counts.items() if v]
    return ", ".join(parts) if parts else "none"


def blocked(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Wrap `fn` so that it waits for its (possibly asynchronous) result."""
    return lambda: jax.block_until_ready(fn())


def time_into(res: TopicResult, name: str, fn: Callable[[], Any], quick: bool) -> float:
    """Median wall time of a blocking call of `fn`, stored under `res.timings_ms[name]`."""
    ms = median_ms(blocked(fn), repeat=5 if quick else 30, warmup=1 if quick else 3)
    res.timings_ms[name] = ms
    return ms


def times_into(res: TopicResult, calls: dict[str, Callable[[], Any]],
               quick: bool) -> dict[str, float]:
    """`time_into` for calls to be compared (minijax's and JAX's): timed interleaved, round by
    round (`interleaved_ms`), each stored under `res.timings_ms[name]`."""
    ms = interleaved_ms({k: blocked(f) for k, f in calls.items()},
                        repeat=5 if quick else 30, warmup=1 if quick else 3)
    res.timings_ms.update(ms)
    return ms


def catch(fn: Callable[[], Any]) -> tuple[str | None, str]:
    """Run `fn`; return (exception type name, first lines of its message) or (None, repr)."""
    try:
        out = fn()
    except Exception as e:  # we want to report whatever JAX raises
        return type(e).__name__, first_lines(str(e))
    return None, repr(out)[:200]


def first_lines(msg: str, n: int = 4, width: int = 400) -> str:
    """The first `n` non-empty lines of a message, each cut to `width` characters."""
    lines = [ln for ln in msg.splitlines() if ln.strip() and not ln.startswith("-----")][:n]
    lines = [ln if len(ln) <= width else ln[: width - 3] + "..." for ln in lines]
    return "\n".join(lines)


@contextlib.contextmanager
def captured_stdout():
    """Collect everything printed (Python-level `print`, incl. JAX debug callbacks) into a buffer.

    JAX runs debug callbacks on a runtime thread; `redirect_stdout` swaps `sys.stdout` for the
    whole process, so those prints land in the buffer too. Call `jax.effects_barrier()` before
    leaving the block so every pending callback has run.
    """
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield buf


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A markdown table."""
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def out_folder(name: str, quick: bool) -> Path:
    """Where a topic writes files: a fresh `compare/out/<name>` normally, a temp dir when quick.

    Quick runs are what the tests use, possibly several processes at once, so they never share
    a folder; the full run owns `compare/out/<name>` and clears it first so it does not grow.
    """
    if quick:
        return Path(tempfile.mkdtemp(prefix=f"compare-{name}-"))
    path = OUT_DIR / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path
