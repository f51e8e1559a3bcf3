"""Numbers in a chapter's prose come from its code.

The prose (fenced blocks and inline code left out) is read for numeric claims: ratios
("thirty times the step", "540x", "twice as fast", "a twentieth", "a factor of ten", "an order
of magnitude"), percentages and tolerances
("within 1e-6"). Each must be one of:

(a) shown: the number, written the same way ("97%", "1e-4", "540x"; a tolerance by its value),
    appears in an ```output / ```output-timing block of the same `## ` section;
(b) tied to a printed value by a marker after it in its paragraph, with no other claim in
    between: `<!-- printed: A -->` or `<!-- printed: A / B -->`, optionally ending `within 25%`
    (10% otherwise). A and B are each a number shown in an output block ("1.84"), or a regex
    of an output line followed by the number meant (`direct/classic `). The claim must agree
    with the value (or the ratio A/B) within the tolerance: "twice" with 2 or 1/2, "10% more"
    with 1.10, 10 or 0.10, "a third fewer" with 2/3 or 1/3, "an order of magnitude" with 10
    to the nearest power of ten, and "within a factor of ten" with any ratio up to 10;
(c) a fact of mathematics, a definition or a datasheet figure, listed in FACTS below with its
    reason;
(d) from a full comparison run, which the chapter cannot print (it takes minutes to hours),
    recomputed from that run's committed result, `chapters/data/run-TOPIC.json` (what
    `python -m compare TOPIC --data` writes: the topic's stored record, with its date, machine
    and versions): `<!-- run: TOPIC A -->` or `<!-- run: TOPIC A / B -->` after the claim,
    optionally ending `within N%`. A and B each name a value of the record: a dotted path
    whose first name is a key of its `extra` or of the record itself (`minijax.test_exact_match`;
    a number picks a list's item, `@500` the value of a list's `[500, value]` pair), a number
    its text (or the chapter's own output, for what a run's number is compared with) shows as
    it is, or a regex of a line of its text (the report sections the topic
    wrote) followed by the number meant. They are checked as in (b), but to the claim's
    written precision (half a unit of its last digit) unless it says `within N%`; a claim
    without digits ("twice") within 10%. A table on the line after `<!-- run: TOPIC -->`:
    every number of its body (the row labels left out) is checked the same way, by a marker in
    its cell naming one value per number, separated by ` ; ` (`<!-- run: gpt a.b ; c / d -->`).
    A topic whose full run could not be committed is listed in RUN_EXEMPT with the reason;
    only its claims may keep the bare `<!-- run: make compare ARGS=TOPIC -->`.

Left out on purpose: counts ("called twice", "nest it three times"), shapes ("a 4 x 2 mesh"),
formulas in inline code, and absolute quantities with units (68.5 ms, 80 GB), which are not
read as claims at all.

tests/chapters/chapters_test.py checks that each ```output block equals what its code prints
and that each ```output-timing block has its words and units, so (a) and (b) tie the prose,
through what the chapter shows, to what its code prints.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))

_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
          "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "a hundred": 100,
          "a thousand": 1000, "hundred": 100, "thousand": 1000}
_FRACTIONS = {"half": 2, "third": 3, "quarter": 4, "fifth": 5, "sixth": 6, "eighth": 8,
              "tenth": 10, "twentieth": 20, "fiftieth": 50, "hundredth": 100}
_NUM = r"\d[\d,]*(?:\.\d+)?"
_WORD = "|".join(sorted(_WORDS, key=len, reverse=True))
_COMPARE = (r"(?:faster|slower|longer|shorter|more|fewer|larger|smaller|bigger|less|as\b|the\b|"
            r"its\b|that\b|this\b|what\b|apart|over\b|under\b)")
_CLAIM = re.compile("|".join([
    rf"(?P<times>\b(?:{_NUM}|{_WORD})(?:[- ]fold| times)(?= {_COMPARE}))",
    rf"(?P<x>\b{_NUM}(?:x|×)(?![\w(]| ?[\d(]))",
    rf"(?P<factor>\b(?:a factor of (?:{_NUM}|{_WORD})|(?:an|one|{_WORD}) orders? of magnitude)\b)",
    r"(?P<twice>\btwice(?= (?:as|that|the|its|it|what)\b))",
    rf"(?P<frac>\b(?:a|one) (?:{'|'.join(_FRACTIONS)})(?= (?:of|the|as|fewer|more|less)\b)"
    rf"|\bhalf(?= (?:as|of it|that|the step|the time)\b))",
    rf"(?P<percent>(?<![\w.]){_NUM} ?%)",
    r"(?P<sci>(?<![\w.])\d(?:\.\d+)?e[-+]?\d+\b)",
]), re.I)
_FENCED = re.compile(r"^```(\S*)\n(.*?)^```", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_MARKER = re.compile(r"<!-- (printed|run): (.+?)(?: within (\d+(?:\.\d+)?)%)? -->")
_RUN = re.compile(r"make compare ARGS=(\w+)$")
_PATH = re.compile(r"[\w@-]+(?:\.[\w@-]+)*")
_RUN_DATA = ROOT / "chapters" / "data"

# Topics whose full run is not committed yet, with the reason: only their claims may keep the
# bare `<!-- run: make compare ARGS=TOPIC -->`.
RUN_EXEMPT: dict[str, str] = {}
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\d.])", re.I)


@dataclass(frozen=True)
class Claim:
    line: int  # 1-based
    start: int  # column in the line
    text: str  # as written
    kind: str  # times, x, factor, twice, frac, percent, sci
    value: float
    bound: bool = False  # "within ...": an upper bound, not an estimate


def _value(m: re.Match) -> float:
    s, kind = m.group(0), m.lastgroup
    if kind == "twice":
        return 2.0
    if kind == "frac":
        return 1 / _FRACTIONS[s.split()[-1].lower()]
    if kind == "sci":
        return float(s)
    if kind == "factor":
        n = re.sub(r"^a factor of | orders? of magnitude$", "", s.lower())
        n = {"an": "1", "one": "1"}.get(n, n)
        value = float(_WORDS[n]) if n in _WORDS else float(n.replace(",", ""))
        return value if s.lower().startswith("a factor") else 10.0 ** value
    n = re.match(rf"{_NUM}|{_WORD}", s, re.I).group(0).lower()
    return float(_WORDS[n]) if n in _WORDS else float(n.replace(",", ""))


def _prose(text: str) -> str:
    """The text with fenced blocks and inline code blanked (lines and columns kept)."""
    text = _FENCED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = re.sub(r"<!--.*?-->", lambda m: " " * len(m.group(0)), text)
    return _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), text)


def claims(text: str) -> list[Claim]:
    """Each numeric claim of the prose."""
    return [Claim(i, m.start(), m.group(0), m.lastgroup, _value(m),
                  bool(re.search(r"\bwithin (?:about )?$", line[:m.start()], re.I)))
            for i, line in enumerate(_prose(text).splitlines(), 1)
            for m in _CLAIM.finditer(line)]


def _outputs(text: str) -> str:
    return "\n".join(m.group(2) for m in _FENCED.finditer(text)
                     if m.group(1) in ("output", "output-timing"))


def _section(text: str, line: int) -> str:
    """The `## ` section of `text` holding `line` (1-based), fenced blocks included: where (a)
    looks for a claim's number, so that the same number printed elsewhere does not count."""
    lines = text.splitlines()
    heads = [i for i, row in enumerate(_prose(text).splitlines(), 1) if row.startswith("## ")]
    start = max([h for h in heads if h <= line], default=1)
    end = min([h for h in heads if h > line], default=len(lines) + 1)
    return "\n".join(lines[start - 1:end - 1])


def _number(s: str) -> float:
    return float(s.replace(",", ""))


def _shown(claim: Claim, outputs: str) -> bool:
    """(a): the claim's number, as an output block would write it, is in one."""
    if claim.kind == "sci":
        return any(_number(n) == claim.value for n in _NUMBER.findall(outputs) if "e" in n.lower())
    n = re.escape(re.match(_NUM, claim.text).group(0)) if claim.text[0].isdigit() else None
    if n is None or claim.kind in ("twice", "frac"):
        return False
    suffix = r" ?%" if claim.kind == "percent" else r" ?(?:x|×|times)(?!\w)"
    return re.search(rf"(?<![\w.]){n}{suffix}", outputs, re.I) is not None


def _printed(part: str, outputs: str) -> float | str:
    """The value a marker's part names: a number shown as it is, or the number that follows
    the first output line's match of a regex; a message if there is none."""
    part = part.strip()
    if _NUMBER.fullmatch(part):
        shown = any(n == part for n in _NUMBER.findall(outputs))
        return _number(part) if shown else f"no output block shows {part}"
    for line in outputs.splitlines():
        m = re.search(part, line)
        if m:
            after = _NUMBER.search(line, m.end())
            return _number(after.group(0)) if after else f"no number after {part!r} in {line!r}"
    return f"no output line matches {part!r}"


def _agrees(claim: Claim, value: float, tolerance: float) -> bool:
    """A claim and a printed value (a ratio, a percentage, a fraction) agree within
    `tolerance`, read in any of the ways the claim's words can mean it: a bound ("within")
    holds the value, an order of magnitude is the value's, to the nearest power of ten."""
    if claim.kind == "percent":
        readings = [value, 100 * value, 100 * (value - 1), 100 * (1 - value)]
    elif claim.kind == "frac":
        readings = [value, value / 100, value - 1, 1 - value]
    elif claim.kind == "sci":
        readings = [value]
    else:  # a ratio: either way round
        readings = [value, 1 / value if value else float("inf")]
    if claim.bound:  # a ratio's bound holds it either way round; a difference's, its size
        if claim.kind not in ("percent", "frac", "sci"):
            readings = [max(readings)]
        return any(0 <= r <= claim.value * (1 + tolerance) for r in readings)
    if "magnitude" in claim.text:
        return any(r > 0 and abs(math.log10(r / claim.value)) <= 0.5 for r in readings)
    return any(abs(r - claim.value) <= tolerance * abs(claim.value) for r in readings)


def _check_marker(claim: Claim, body: str, tolerance: str | None, outputs: str) -> str | None:
    parts = [_printed(p, outputs) for p in body.split(" / ")]
    if any(isinstance(p, str) for p in parts):
        return next(p for p in parts if isinstance(p, str))
    value = parts[0] / parts[1] if len(parts) == 2 else parts[0]
    tol = float(tolerance or 10) / 100
    if _agrees(claim, value, tol):
        return None
    return f"the output shows {value:.4g} ({body}), which it does not match within {tol:.0%}"


def load_run(topic: str) -> dict | None:
    """The committed record of `topic`'s full run, or None if there is none."""
    path = _RUN_DATA / f"run-{topic}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _run_text(record: dict) -> str:
    return "\n".join(record.get("sections", []))


def _run_value(part: str, record: dict, outputs: str = "") -> float | str:
    """The value a run marker's part names in `record` (see (d)), or a number the chapter's own
    output blocks show (the count a run's number is compared with); a message if none."""
    part = part.strip()
    if _NUMBER.fullmatch(part) and part in _NUMBER.findall(outputs):
        return _number(part)
    head = part.split(".")[0]
    if _PATH.fullmatch(part) and not _NUMBER.fullmatch(part) and (
            head in record.get("extra", {}) or head in record):
        node: object = record["extra"] if head in record.get("extra", {}) else record
        for key in part.split("."):
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.lstrip("-").isdigit() and \
                    -len(node) <= int(key) < len(node):
                node = node[int(key)]
            elif isinstance(node, list) and key.startswith("@") and any(
                    isinstance(kv, list) and len(kv) == 2 and str(kv[0]) == key[1:] for kv in node):
                node = next(v for k, v in node if str(k) == key[1:])
            else:
                return f"the run's record has no {key!r} in {part!r}"
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            return f"{part!r} in the run's record is {node!r}, not a number"
        return float(node)
    value = _printed(part, _run_text(record))
    return value.replace("output block", "the run's text") if isinstance(value, str) else value


def _half_unit(written: str) -> float:
    """Half a unit of the last digit of a number as written ("0.960" -> 0.0005)."""
    mantissa, _, exp = written.lower().replace(",", "").partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exp or 0) - decimals)


def _run_marker_value(body: str, record: dict, outputs: str = "") -> float | str:
    parts = [_run_value(p, record, outputs) for p in body.split(" / ")]
    if any(isinstance(p, str) for p in parts):
        return next(p for p in parts if isinstance(p, str))
    if len(parts) == 2:
        return parts[0] / parts[1] if parts[1] else "a ratio over zero"
    return parts[0]


def _check_run_claim(claim: Claim, body: str, tolerance: str | None, record: dict,
                     outputs: str = "") -> str | None:
    """(d) for a claim of the prose: the value its marker names, within the stated tolerance,
    or the claim's written precision, or 10% for a claim in words."""
    value = _run_marker_value(body, record, outputs)
    if isinstance(value, str):
        return value
    digits = re.search(_NUM + r"(?:e[-+]?\d+)?", claim.text, re.I)
    if tolerance:
        tol = float(tolerance) / 100
    elif digits and claim.value:
        tol = _half_unit(digits.group(0)) / abs(claim.value) + 1e-9
    else:
        tol = 0.10
    if _agrees(claim, value, tol):
        return None
    return (f"the run's data gives {value:.6g} ({body}), which it does not match "
            f"{'within ' + format(tol, '.2%') if tolerance or not digits else 'as written'}")


def _run_marker(body: str, where: str, topics, runs) -> tuple[dict | None, str, str | None]:
    """(record, the rest of the body, problem) of a run marker's `TOPIC ...` body."""
    m = _RUN.fullmatch(body.strip())
    if m:
        if m.group(1) in RUN_EXEMPT:
            return None, "", None
        return None, "", (f"{where}: `make compare ARGS={m.group(1)}` is not checked: name the "
                          "value of the run's committed data the number is "
                          "(`<!-- run: TOPIC path -->`), or list the topic in RUN_EXEMPT")
    topic, _, rest = body.strip().partition(" ")
    if topics is not None and topic not in topics:
        return None, "", f"{where}: no comparison topic {topic!r}"
    record = runs(topic)
    if record is None:
        return None, "", (f"{where}: no committed run of {topic!r} "
                          f"(chapters/data/run-{topic}.json: `python -m compare {topic} --data`)")
    return record, rest, None


def _table_problems(lines: list[str], first: int, topic: str, where: str, topics,
                    runs, outputs: str = "") -> list[str]:
    """(d) for a table starting at line `first` (1-based) under `<!-- run: TOPIC -->`: each
    number of each body cell, the row label left out, against its cell's marker."""
    out, row = [], first + 2  # past the header and the |---| line
    while row <= len(lines) and lines[row - 1].lstrip().startswith("|"):
        for cell in re.split(r"(?<!\\)\|", lines[row - 1].strip().strip("|"))[1:]:
            marker = _MARKER.search(cell)
            numbers = _NUMBER.findall(re.sub(r"<!--.*?-->", "", cell))
            here = f"{where}:{row}: {' '.join(re.sub(r'<!--.*?-->', '', cell).split())!r}"
            if not numbers:
                continue
            if not marker or marker.group(1) != "run":
                out.append(f"{here}: a number of a run's table with no `<!-- run: {topic} ... -->`"
                           " in its cell")
                continue
            record, rest, why = _run_marker(marker.group(2), here, topics, runs)
            if why or record is None:
                out += [why] if why else []
                continue
            parts = rest.split(" ; ")
            if len(parts) != len(numbers):
                out.append(f"{here}: {len(numbers)} numbers, {len(parts)} values named")
                continue
            for written, part in zip(numbers, parts):
                value = _run_marker_value(part, record, outputs)
                if isinstance(value, str):
                    out.append(f"{here}: {value}")
                    continue
                want, percent = _number(written), re.search(
                    re.escape(written) + r" ?%", cell) is not None
                tol = (float(marker.group(3)) / 100 * abs(want) if marker.group(3)
                       else _half_unit(written) * (1 + 1e-9))
                readings = [value, 100 * value] if percent else [value]
                if not any(abs(r - want) <= tol for r in readings):
                    out.append(f"{here}: {written} against the run's {value:.6g} ({part})")
        row += 1
    return out


def _paragraphs(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line, 1-based, of each run of non-blank lines."""
    spans, start = [], None
    for i, line in enumerate(lines + [""], 1):
        if line.strip() and start is None:
            start = i
        elif not line.strip() and start is not None:
            spans.append((start, i - 1))
            start = None
    return spans


def problems(text: str, name: str, topics=None, runs=load_run) -> list[str]:
    """What is wrong with the numeric claims of a chapter's text: each claim that is neither
    shown by its output, nor tied to it, nor a listed fact, nor recomputed from the committed
    data of its run (`runs(topic)`: the record, or None), and each number of a run's table
    that its data does not give."""
    outputs, lines = _outputs(text), text.splitlines()
    prose_lines = _prose(text).splitlines()
    spans = _paragraphs(re.sub(r"<!--.*?-->", "", _FENCED.sub(
        lambda m: "\n" * m.group(0).count("\n"), text)).splitlines())
    facts = [phrase for chapter, phrase, _ in FACTS if chapter == name[:2]]
    out = []
    run_tables = set()  # the lines of tables under a bare `<!-- run: TOPIC -->`
    for i, line in enumerate(lines[:-1], 1):
        above = _MARKER.fullmatch(line.strip())
        if above and above.group(1) == "run" and lines[i].lstrip().startswith("|"):
            body = above.group(2).strip()
            where = f"{name}:{i}"
            if _RUN.fullmatch(body) and _RUN.fullmatch(body).group(1) in RUN_EXEMPT:
                continue
            if topics is not None and body not in topics:
                out.append(f"{where}: a run's table is marked `<!-- run: TOPIC -->`, not {body!r}")
                continue
            out += _table_problems(lines, i + 1, body, where=name, topics=topics, runs=runs,
                                   outputs=outputs)
            end = i + 1
            while end <= len(lines) and lines[end - 1].lstrip().startswith("|"):
                run_tables.add(end)
                end += 1

    for claim in claims(text):
        if claim.line in run_tables:
            continue
        here = f"{name}:{claim.line}: {claim.text!r}"
        first, last = next((a, b) for a, b in spans if a <= claim.line <= b)
        # the text after the claim, to the paragraph's end: its first marker, if no other
        # claim comes before it
        rest = "\n".join([lines[claim.line - 1][claim.start + len(claim.text):]]
                         + lines[claim.line:last])
        rest_prose = "\n".join([prose_lines[claim.line - 1][claim.start + len(claim.text):]]
                               + prose_lines[claim.line:last])
        marker = _MARKER.search(rest)
        if marker and not _CLAIM.search(rest_prose[:marker.start()]):
            if marker.group(1) == "run":
                record, body, why = _run_marker(marker.group(2), here, topics, runs)
                why = why or (record and _check_run_claim(claim, body, marker.group(3), record,
                                                          outputs))
                if why:
                    out.append(why if why.startswith(name) else f"{here}: {why}")
            else:
                why = _check_marker(claim, marker.group(2), marker.group(3), outputs)
                if why:
                    out.append(f"{here}: {why}")
            continue
        above = _MARKER.fullmatch(lines[first - 2].strip()) if first >= 2 else None
        if above and above.group(1) == "run" and _RUN.fullmatch(above.group(2).strip()):
            _, _, why = _run_marker(above.group(2), here, topics, runs)
            if why:
                out.append(why)
            continue
        paragraph = " ".join(" ".join(lines[first - 1:last]).split())
        if _shown(claim, _outputs(_section(text, claim.line))):
            continue
        if any(claim.text in f and f in paragraph for f in facts):
            continue
        out.append(f"{here}: no output block shows it, no marker ties it to one, and it is "
                   "not a listed fact")
    flat = " ".join(text.split())
    out += [f"{name}: the listed fact {f!r} is not in the text" for f in facts if f not in flat]
    return out


# (chapter, phrase holding the claim, why it needs no printed number): mathematics, definitions
# and datasheet figures, each checked by reading it.
FACTS: list[tuple[str, str, str]] = [
    ("13", "eight times the bytes", "all_gather over 8 devices leaves each with all 8 blocks"),
    ("13", "costs about half of it", "a ring psum is a reduce-scatter then an all-gather"),
    ("13", "an all-reduce of S bytes twice that", "the same: reduce-scatter plus all-gather"),
    ("16", "990e12 / 3.35e12", "the H100 SXM datasheet (3.35 TB/s), as the text says above"),
    ("16", "with twice the refs", "the jvp rule adds one tangent ref per ref"),
    ("17", "a value above 100%", "the definition of the fraction of the roof reached"),
    ("18", "twice that backward", "two matmuls (input and weight gradients) per forward one"),
    ("19", "masked scores become -1e30", "the constant the model's code uses"),
    ("19", "the mask only hides half of it", "a causal mask keeps T(T+1)/2 of T² scores"),
    ("20", "to 1e-4 relative", "the tolerance the test checks"),
    ("20", "defaults to 1e-6", "nnx.LayerNorm's default epsilon"),
    ("20", "(here 1e-5, as in", "the model's layer-norm epsilon"),
    ("20", "a clip a quarter of it", "the solution's choice (its code divides by 4)"),
    ("21", "adds 0.01 times its sum", "the model's aux_weight setting"),
    ("21", "with a factor of 1 exactly the", "capacity_factor's meaning: C is the mean load"),
    ("21", "checks every step to 1e-4", "the tolerance the topic checks"),
    ("22", "at three times the work", "HIGH precision is three bf16 passes"),
    ("23", "preallocates 75% of the GPU's memory", "jaxlib's default memory fraction, 0.75"),
    ("23", "holding 75% of the GPU", "the same default"),
    ("26", "(2% test, 1% validation", "the split's definition"),
    ("26", "three times that with the backward", "two products backward per forward one"),
    ("26", "the time to 99%", "a threshold, named"),
    ("26", "crossing 99% on the validation", "the same threshold"),
    ("27", "even with sizes 16x apart", "the sizes swept, 0.25 to 4 N_opt (its output's row)"),
    ("27", "and twice that in the backward pass", "two products backward per forward one"),
    ("27", "on twice the expert parameters", "top-2 of 4 experts of width 2d against a 4d MLP"),
    ("27", "At 1000x the compute", "a scale the section supposes"),
    ("27", "A thousand times the compute", "the same"),
    ("27", "a budget four times larger", "the exercise's choice"),
    ("29", "twice what a dense matmul can reach", "datasheets count 2:4 sparsity as 2x"),
    ("29", "half that with int8 weights", "one byte per weight instead of two"),
    ("29", "travel on average half as far", "a bidirectional ring's mean distance"),
    ("29", "training three times that", "two products backward per forward one"),
    ("29", "4096 becomes 4e3", "the book's rounding, quoted"),
    ("29", "NVLink is five times faster than a v5p link", "the datasheets' link bandwidths"),
    ("29", "an H100 does twice the FLOPs", "the datasheets' bf16 peaks"),
    ("32", "nearest to 1e-5, because", "the handler's EPS constant"),
]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_numbers_in_prose_come_from_code(path):
    from compare import TOPICS
    found = problems(path.read_text(), path.name, TOPICS)
    assert not found, "numbers the prose states but no output shows:\n" + "\n".join(found)


_PLANTED = """Building `jit` inside the loop costs thirty times the step{marker}.

```python
print(f"rebuild/step {{540.2:.1f}}x")
```

```output-timing
rebuild/step 540.2x
```
"""


def test_a_stale_claim_fails():
    """A claim as chapter 17 once made it, against the output that contradicted it."""
    stale = _PLANTED.format(marker="")
    assert [c.text for c in claims(stale)] == ["thirty times"]
    (found,) = problems(stale, "99-x.md")
    assert "'thirty times'" in found and "not a listed fact" in found
    (found,) = problems(_PLANTED.format(marker="<!-- printed: rebuild/step -->"), "99-x.md")
    assert "shows 540.2" in found and "does not match" in found
    fixed = _PLANTED.replace("thirty times", "540 times")
    assert problems(fixed.format(marker="<!-- printed: rebuild/step -->"), "99-x.md") == []
    assert problems(_PLANTED.replace("thirty", "540.2").format(marker=""), "99-x.md") == []


def test_claims_read_ratios_fractions_percentages_tolerances():
    text = ("About twice as fast, a twentieth of the time, 3.5x slower, ten times more, 7% "
            "longer, within 1e-6. Called twice; nest it three times; a 4 x 2 mesh; `2x`.")
    assert [(c.text, c.value) for c in claims(text)] == [
        ("twice", 2.0), ("a twentieth", 0.05), ("3.5x", 3.5), ("ten times", 10.0),
        ("7%", 7.0), ("1e-6", 1e-6)]


def test_shown_numbers_markers_facts_and_runs():
    out = "```output\nerror 2e-07, share 45%, step 12.0 ms, unrolled 6.1 ms\n```\n"
    assert problems(out + "Agrees to 2e-7 and 45% of it.\n", "99-x.md") == []
    ok = "It is twice as fast<!-- printed: step / unrolled -->.\n"
    assert problems(out + ok, "99-x.md") == []
    bad = "It is a tenth as fast<!-- printed: step / unrolled -->.\n"
    assert "does not match" in problems(out + bad, "99-x.md")[0]
    missing = "It is twice as fast<!-- printed: 9.9 -->.\n"
    assert "no output block shows 9.9" in problems(out + missing, "99-x.md")[0]
    run = "<!-- run: make compare ARGS=gpt -->\nThe run: 3% and 4%.\n"
    assert "is not checked" in problems(run, "99-x.md", {"gpt"}, runs=_RECORDS.get)[0]
    RUN_EXEMPT["gpt"] = "a planted reason"
    try:
        assert problems(run, "99-x.md", {"gpt"}, runs=_RECORDS.get) == []
    finally:
        del RUN_EXEMPT["gpt"]
    text = "A ring psum is a reduce-scatter then an all-gather: it costs about half of it."
    assert [p for p in problems(text, "13-x.md") if "half" in p] == []  # a listed fact
    assert "listed fact" in problems(text.replace("about half", "about a third"), "13-x.md")[0]


def test_bounds_and_orders_of_magnitude():
    out = ("```output\nleft 12.5 ms, right 0.79 ms; error 5e-06 against 6e-07; "
           "max difference 0\n```\n")
    tied = "wins by an order of magnitude<!-- printed: left / right -->.\n"
    assert problems(out + tied, "99-x.md") == []
    assert problems(out + tied.replace("an order", "two orders"), "99-x.md") != []
    within = "within a factor of ten<!-- printed: 5e-06 / 6e-07 -->.\n"
    assert problems(out + within, "99-x.md") == []
    assert problems(out + within.replace("ten", "five"), "99-x.md") != []
    # chapter 18's old "within 1e-6" beside a block that prints 0: the prose should say 0
    assert "'1e-6'" in problems(out + "The losses agree within 1e-6.\n", "99-x.md")[0]


@pytest.mark.parametrize("chapter, true, stale", [
    ("06", "about a quarter more slowly", "about five times as slowly"),  # a marker's claim
    ("27", "misses by 15%", "misses by 40%"),  # a ratio of two printed numbers
    ("20", "without it the run differs by 1e-3", "without it the run differs by 1e-2"),  # shown
    ("26", "the model stalls at 89%", "the model stalls at 83%"),  # a full run's data
], ids=["marker", "ratio", "shown", "run"])
def test_a_chapter_made_stale_fails(chapter, true, stale):
    (path,) = (ROOT / "chapters").glob(f"{chapter}-*.md")
    text = path.read_text()
    assert true in text and problems(text, path.name) == []
    (found,) = problems(text.replace(true, stale), path.name)
    assert f"{path.name}:" in found and re.search(r"'(five times|40%|1e-2|83%)'", found), found


_RECORDS = {"gpt": {  # a planted record of a full run, in the form `python -m compare --data` keeps
    "sections": ["| impl | loss |\n| jax | 1.8355 |\nLargest difference **3.8e-06**; "
                 "matmuls 45.2% of the step"],
    "timings_ms": {"step": 68.5},
    "extra": {"jax": {"val_curve": [[100, 2.5349], [300, 2.0968]], "dropped": 0.022},
              "dense": {"val": 1.877}, "moe": {"val": 1.838}}}}


@pytest.mark.parametrize("text, wrong", [
    ("It ends 2.1% below<!-- run: gpt moe.val / dense.val -->.", "2.4% below"),
    ("It ends 2.1% below<!-- run: gpt 1 - moe.val / dense.val -->.", None),
    ("A 45% share<!-- run: gpt matmuls -->.", "41% share"),
    ("A 45% share<!-- run: gpt matmuls within 20% -->.", "60% share"),
    ("At most 3.8e-6<!-- run: gpt Largest difference -->.", "3.9e-6"),
    ("At most 3.8e-6<!-- run: gpt 3.8e-06 -->.", "3.2e-6"),
    ("About twice as long<!-- run: gpt timings_ms.step / dense.val -->.", None),
], ids=["ratio", "no-path", "regex", "within", "sci", "shown", "words"])
def test_run_claims_are_recomputed_from_the_runs_data(text, wrong):
    found = problems(text, "99-x.md", {"gpt"}, runs=_RECORDS.get)
    if wrong is None:  # a marker that names no value of the data, or a claim it contradicts
        assert len(found) == 1 and ("no output line matches" in found[0]
                                    or "does not match" in found[0]), found
        return
    assert found == []
    claim = re.search(r"(?:\d[\d.e-]*%?|twice)", text).group(0)
    stale = problems(text.replace(claim, wrong.split()[0], 1), "99-x.md", {"gpt"},
                     runs=_RECORDS.get)
    assert len(stale) == 1 and "does not match" in stale[0], stale


_TABLE = """<!-- run: gpt -->
| | JAX | dropped |
|---|---|---|
| validation at 100 / 300 | 2.535 / 2.097<!-- run: gpt jax.val_curve.@100 ; jax.val_curve.@300 \
--> | 2.2%<!-- run: gpt jax.dropped --> |
| step | 68 ms<!-- run: gpt timings_ms.step within 2% --> | — |
"""


def test_a_runs_table_is_checked_number_by_number():
    assert problems(_TABLE, "99-x.md", {"gpt"}, runs=_RECORDS.get) == []
    for old, new, why in [("2.097<", "2.098<", "2.098 against the run's 2.0968"),
                          ("2.2%<", "2.4%<", "2.4 against"),
                          ("68 ms", "75 ms", "75 against the run's 68.5"),
                          (" ; jax.val_curve.@300", "", "2 numbers, 1 values named"),
                          ("@300", "@400", "no '@400'"),
                          ("<!-- run: gpt jax.dropped -->", "", "no `<!-- run: gpt ... -->`")]:
        (found,) = problems(_TABLE.replace(old, new), "99-x.md", {"gpt"}, runs=_RECORDS.get)
        assert why in found, found
    assert "no committed run of 'gpt'" in problems(_TABLE, "99-x.md", {"gpt"},
                                                   runs=lambda t: None)[0]


def test_committed_runs_are_full_passing_runs_that_a_chapter_reads():
    """Each chapters/data/run-TOPIC.json is what `python -m compare TOPIC --data` kept of a
    full-size run whose checks all passed, with its date, machine and versions, and some
    chapter's run marker reads it."""
    texts = " ".join(p.read_text() for p in CHAPTERS)
    records = sorted(_RUN_DATA.glob("run-*.json"))
    assert records
    for path in records:
        rec, topic = json.loads(path.read_text()), path.stem.removeprefix("run-")
        assert rec["quick"] is False and rec["status"] == "ok", path.name
        assert rec["date"] and {"jax", "minijax", "cpu", "device_kind"} <= set(
            rec["environment"]), path.name
        assert all(c["ok"] for c in rec["checks"]), path.name
        assert f"<!-- run: {topic} " in texts, f"no chapter reads {path.name}"
