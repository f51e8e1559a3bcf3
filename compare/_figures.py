"""Figures the chapters draw from values their programs computed (matplotlib, Agg backend).

Each function takes data a chapter's code produced (per-device blocks of a shard_map run, the
order in which callbacks ran, the spans of an offloaded step) and saves one PNG; it decides
nothing about the values. Kept out of the chapters so that their cells show the computation
and one line that draws it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

# one colour per device (8 devices); sums of several devices' blocks are drawn grey
DEVICE_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                 "#59a14f", "#edc948", "#b07aa1", "#ff9da7"]
MIXED = "#9d9d9d"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str, dpi: int = 100) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    _pyplot().close(fig)


def collectives(rows: Sequence[tuple[str, list[list[int | None]]]], path: str,
                n_devices: int = 8) -> None:
    """One row per collective, one column per device. `rows[k] = (title, blocks)`, where
    `blocks[d]` lists, chunk by chunk, which device the chunk device d holds came from (None:
    a sum over devices). Each chunk is a cell coloured by its source device."""
    plt = _pyplot()
    from matplotlib.patches import Rectangle
    fig, ax = plt.subplots(figsize=(9, 0.75 * len(rows) + 0.6))
    width, gap = 1.0, 0.15
    for r, (title, blocks) in enumerate(rows):
        y = len(rows) - 1 - r
        ax.text(-0.2, y + 0.35, title, ha="right", va="center", fontsize=9, family="monospace")
        n = len(blocks[0])
        ax.text(n_devices * (width + gap), y + 0.35, f"{n} number" + "s" * (n != 1),
                ha="left", va="center", fontsize=8)
        for d, chunks in enumerate(blocks):
            x0 = d * (width + gap)
            w = width / max(len(chunks), 8)  # a block of one number is drawn 1/8 wide
            edge = "white" if len(chunks) <= 8 else "none"
            for c, src in enumerate(chunks):
                color = MIXED if src is None else DEVICE_COLORS[src % len(DEVICE_COLORS)]
                ax.add_patch(Rectangle((x0 + c * w, y), w, 0.7, facecolor=color,
                                       edgecolor=edge, linewidth=0.5))
            if all(src is None for src in chunks):
                ax.text(x0 + w * len(chunks) / 2, y + 0.35, "Σ", ha="center", va="center",
                        color="white", fontsize=8)
    for d in range(n_devices):
        ax.text(d * (width + gap) + width / 2, len(rows) - 0.05, f"device {d}", ha="center",
                va="bottom", fontsize=8)
    ax.set_xlim(-2.6, n_devices * (width + gap) + 1.0)
    ax.set_ylim(-0.2, len(rows) + 0.3)
    ax.axis("off")
    ax.set_title("What each device holds after each collective\n(colour: the device the "
                 "data came from; grey Σ: a sum over all devices)", fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def decode_sources(local: np.ndarray, base: int) -> list[int | None]:
    """Chunk sources of a block whose input chunks were `base * device + chunk`: a value that
    is one such code names its device; anything else (a sum) gives None."""
    out = []
    for v in np.asarray(local).ravel():
        code = int(round(float(v)))
        ok = abs(float(v) - code) < 1e-6 and 0 <= code < base * base
        out.append(code // base if ok else None)
    return out


def token_chain(events: Sequence[tuple[int, str]], path: str) -> None:
    """Host callbacks in the order they ran: `events[k] = (call, label)`, one row per jitted
    call, a box per callback, arrows along the runtime token that orders them."""
    plt = _pyplot()
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    calls = sorted({c for c, _ in events})
    fig, ax = plt.subplots(figsize=(9, 0.9 * len(calls) + 0.8))
    prev = None
    for k, (call, label) in enumerate(events):
        x, y = k * 1.6, len(calls) - 1 - calls.index(call)
        ax.add_patch(FancyBboxPatch((x, y), 1.3, 0.6, boxstyle="round,pad=0.05",
                                    facecolor=DEVICE_COLORS[calls.index(call) % 8], alpha=0.85))
        ax.text(x + 0.65, y + 0.3, label, ha="center", va="center", fontsize=8, color="white")
        if prev is not None:
            ax.add_patch(FancyArrowPatch((prev[0] + 1.35, prev[1] + 0.3), (x - 0.05, y + 0.3),
                                         arrowstyle="->", mutation_scale=10, color="#333333"))
            if prev[1] != y:  # from one call to the next: the runtime token
                ax.text((prev[0] + x) / 2 + 0.9, (prev[1] + y) / 2 + 0.3, "runtime token",
                        fontsize=7, ha="left", va="center", color="#333333")
        prev = (x, y)
    for i, call in enumerate(calls):
        ax.text(-0.3, len(calls) - 1 - i + 0.3, f"call {call}", ha="right", va="center",
                fontsize=9)
    ax.set_xlim(-1.6, len(events) * 1.6)
    ax.set_ylim(-0.3, len(calls) + 0.1)
    ax.axis("off")
    ax.set_title("Ordered effects: within a call the token orders the callbacks; the token a "
                 "call returns is the next call's input", fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def moe_tensors(dispatch: np.ndarray, combine: np.ndarray, path: str) -> None:
    """The MoE's dispatch (0/1) and combine (weights) tensors of shape [tokens, experts,
    capacity], drawn as one [tokens, experts x capacity] image each."""
    plt = _pyplot()
    t, e, c = dispatch.shape
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, data, title, cmap in ((axes[0], dispatch, "dispatch (0/1)", "Greys"),
                                  (axes[1], combine, "combine (gate weights)", "viridis")):
        im = ax.imshow(np.asarray(data).reshape(t, e * c), aspect="auto", cmap=cmap,
                       interpolation="nearest")
        for k in range(1, e):
            ax.axvline(k * c - 0.5, color="#d62728", lw=0.6)
        ax.set_xticks([k * c + (c - 1) / 2 for k in range(e)], [f"e{k}" for k in range(e)],
                      fontsize=7)
        ax.set_xlabel(f"expert (each: {c} capacity slots)", fontsize=8)
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    axes[0].set_ylabel("token", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def timeline(spans: Sequence[tuple[str, str, float, float]], path: str, unit: str = "ms") -> None:
    """A Gantt chart: `spans[k] = (lane, label, start, end)`, one lane per row."""
    plt = _pyplot()
    lanes = list(dict.fromkeys(lane for lane, *_ in spans))
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(lanes) + 1.0))
    for lane, label, start, end in spans:
        y = len(lanes) - 1 - lanes.index(lane)
        ax.barh(y, end - start, left=start, height=0.6, edgecolor="white",
                color=DEVICE_COLORS[lanes.index(lane) % len(DEVICE_COLORS)])
        ax.text(start + (end - start) / 2, y, label, ha="center", va="center", fontsize=7,
                color="white")
    ax.set_yticks(range(len(lanes)), lanes[::-1], fontsize=8)
    ax.set_xlabel(unit, fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def mesh_blocks(shape: tuple, blocks: dict[int, tuple], groups: Sequence[Sequence[int]],
                grid: np.ndarray, axis_names: Sequence[str], path: str, title: str) -> None:
    """An array split over a 2-D mesh and the devices a collective joins. `grid` is the mesh's
    device ids (rows: first axis), `blocks[id] = (row slice, column slice)` of the global
    `shape` that device holds, `groups` the device ids of each all-reduce group (one colour
    each). Left: the global array with each block labelled by its device; right: the mesh."""
    plt = _pyplot()
    from matplotlib.patches import Rectangle
    color = {d: DEVICE_COLORS[(2 * g) % len(DEVICE_COLORS)]
             for g, group in enumerate(groups) for d in group}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    rows, cols = shape
    for d, (rs, cs) in blocks.items():
        r0, r1 = rs.start or 0, rows if rs.stop is None else rs.stop
        c0, c1 = cs.start or 0, cols if cs.stop is None else cs.stop
        left.add_patch(Rectangle((c0, rows - r1), c1 - c0, r1 - r0, facecolor=color[d],
                                 edgecolor="white", linewidth=2))
        left.text((c0 + c1) / 2, rows - (r0 + r1) / 2, f"device {d}\n[{r0}:{r1}, {c0}:{c1}]",
                  ha="center", va="center", fontsize=7, color="white")
    left.set_xlim(0, cols)
    left.set_ylim(0, rows)
    left.set_aspect("equal")
    left.set_xticks([])
    left.set_yticks([])
    left.set_title(f"the global array {tuple(shape)}: each device's block", fontsize=9)
    n0, n1 = grid.shape
    for i in range(n0):
        for j in range(n1):
            d = int(grid[i, j])
            right.add_patch(Rectangle((j, n0 - 1 - i), 0.9, 0.9, facecolor=color[d]))
            right.text(j + 0.45, n0 - 0.55 - i, str(d), ha="center", va="center",
                       color="white", fontsize=10)
    right.set_xlim(-0.2, n1)
    right.set_ylim(-0.2, n0)
    right.set_aspect("equal")
    right.set_xticks([j + 0.45 for j in range(n1)], [f"{axis_names[1]}={j}" for j in range(n1)],
                     fontsize=8)
    right.set_yticks([n0 - 0.55 - i for i in range(n0)],
                     [f"{axis_names[0]}={i}" for i in range(n0)], fontsize=8)
    right.tick_params(length=0)
    for side in right.spines.values():
        side.set_visible(False)
    right.set_title(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)
