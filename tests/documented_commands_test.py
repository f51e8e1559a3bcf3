"""The commands the READMEs give work by copy and paste on a fresh clone.

A reader pastes what a README shows into a shell at the repository root, where the only Python
that has jax is the one `make` installs in `.venv`. So every command shown (a fenced block's line,
or an inline `code` span that starts like a command) must be a `make` target that exists, or run
`.venv/bin/python`; a bare `pytest` or `python` would run some other interpreter and fail with
`ModuleNotFoundError: No module named 'jax'`. The make commands are dry-run (`make -n`) against
the Makefile, and the pytest runs they and the python commands make are collected, so a renamed
test file or a `-k` that selects nothing fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "chapters" / "README.md",
           ROOT / "chapters" / "exercises" / "README.md"]
_STARTS = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(make|pytest|python\S*|\.venv/\S+|pip\d?)\b")
_ENV = re.compile(r"^[A-Z_]+=")


def _commands(path: Path, fences: bool = True) -> list[str]:
    """Every command the file shows: lines of unlabelled or shell fenced blocks (if `fences`:
    a chapter's fenced blocks are code and outputs), and inline code spans that start like a
    command (`make ...`, `pytest ...`, `python ...`, `.venv/...`), line breaks and all."""
    text = path.read_text()
    found = []
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    for lang, body in blocks if fences else []:
        if lang in ("", "sh", "bash", "shell", "console"):
            found += [line.strip() for line in body.splitlines() if line.strip()]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    # A lone word (`python3.11` on the PATH) names a program; a command has arguments.
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return found + [span for span in spans if _STARTS.match(span) and len(span.split()) > 1]


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


ALL = [(p.relative_to(ROOT).as_posix(), c) for p in READMES for c in _commands(p)]
# The chapters' prose names commands too (their fenced blocks are code and outputs, not shell).
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))
IN_CHAPTERS = [(p.relative_to(ROOT).as_posix(), c) for p in CHAPTERS
               for c in _commands(p, fences=False)]


def test_readmes_show_commands():
    """Each README gives at least one command (the parser found them)."""
    for path in READMES:
        assert _commands(path), f"{path.relative_to(ROOT)} shows no command"
    assert any(c.startswith("make exercise ") for _, c in ALL)
    assert any(c.startswith("make chapter ") for _, c in ALL)


def _words(command: str) -> list[str]:
    """The command's words, without the VAR=value assignments in front."""
    return _env_and_words(command)[1]


@pytest.mark.parametrize("where,command", ALL + IN_CHAPTERS,
                         ids=[f"{w}:{c}" for w, c in ALL + IN_CHAPTERS])
def test_command_is_a_make_target_or_the_venv_python(where, command):
    words = _words(command)
    if words[0] == "make":
        targets = [w for w in words[1:] if not _ENV.match(w) and w != "..."]
        missing = [t for t in targets if t not in _make_targets()]
        assert not missing, f"{where}: `{command}` names no Makefile target {missing}"
    else:
        assert words[0] == ".venv/bin/python", (
            f"{where}: `{command}` runs {words[0]!r}, not the .venv's python that `make` installs "
            "(a bare pytest/python has no jax): use a make target or .venv/bin/python")


def _env_and_words(command: str) -> tuple[dict, list[str]]:
    words = shlex.split(command)
    env = {}
    while words and _ENV.match(words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def _dry_run(command: str) -> str:
    """What `make -n` says the command runs (the install stamp taken as up to date)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed here")
    out = subprocess.run(["make", "-n", "-o", ".venv/.installed", *_words(command)[1:]],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"`{command}`: make -n failed\n{out.stderr}"
    return out.stdout


def _pytest_run(command: str) -> tuple[dict, list[str]]:
    """The environment and pytest arguments of the pytest run a command makes."""
    lines = _dry_run(command).splitlines() if command.startswith("make") else [command]
    for line in lines:
        env, words = _env_and_words(line)
        if words[:3] == [".venv/bin/python", "-m", "pytest"]:
            return env, words[3:]
    raise AssertionError(f"`{command}` runs no pytest")


PYTEST_RUNS = sorted({c for _, c in ALL if c.startswith(("make chapter", "make exercise",
                                                          "make test ARGS="))
                      or "-m pytest" in c})


@pytest.mark.slow
@pytest.mark.parametrize("command", PYTEST_RUNS)
def test_documented_pytest_runs_select_tests(command):
    env, args = _pytest_run(command)
    # collecting needs no workers: drop xdist's `-n N` and `--dist MODE`
    args = [a for i, a in enumerate(args)
            if a not in ("-n", "--dist") and (i == 0 or args[i - 1] not in ("-n", "--dist"))]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:xdist", "-p", "no:randomly", *args],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    # `-q` twice (pyproject's addopts add one) prints "file: count" lines.
    counts = re.findall(r"^\S+\.py: (\d+)$", out.stdout, re.M)
    assert out.returncode == 0 and sum(map(int, counts)) > 0, (
        f"`{command}` selects no tests\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")


def test_exercise_target_copies_the_skeleton_once():
    """`make exercise NAME=...` puts the learner's copy in chapters/exercises/mine/, which git
    ignores, and never overwrites it."""
    assert "/chapters/exercises/mine/" in (ROOT / ".gitignore").read_text().splitlines()
    recipe = _dry_run("make exercise NAME=tiny_trace")
    assert "test -f chapters/exercises/mine/tiny_trace.py ||" in recipe
    assert "cp chapters/exercises/tiny_trace.py chapters/exercises/mine/tiny_trace.py" in recipe


def test_front_page_leads_to_the_teaching():
    """README.md links the chapters, the exercises and the conformance notes (links that
    resolve), names `make docs`, and its quick start runs a report, a chapter and an exercise."""
    text = (ROOT / "README.md").read_text()
    links = set(re.findall(r"\]\(([^)#\s]+)", text))
    for target in ("chapters/README.md", "chapters/exercises/README.md", "docs/conformance.md"):
        assert target in links, f"README.md does not link {target}"
    for target in links - {t for t in links if "://" in t}:
        assert (ROOT / target).exists(), f"README.md: broken link {target}"
    commands = _commands(ROOT / "README.md")
    for start in ('make compare ARGS="core --quick"', "make chapter ", "make exercise ",
                  "make docs"):
        assert any(c.startswith(start) for c in commands), f"README.md shows no `{start}`"
    assert "Python 3.11" in text and "optional" in text


def test_exercise_names_and_compare_topics_exist():
    """`make exercise NAME=x` names a skeleton that exists, `make compare ARGS="topic ..."` a
    topic that `python -m compare` knows (in the READMEs and in the chapters)."""
    from compare import TOPICS
    for where, command in ALL + IN_CHAPTERS:
        words = _words(command)
        if words[:2] == ["make", "exercise"]:
            name = dict(w.split("=", 1) for w in words[2:] if "=" in w)["NAME"]
            assert (ROOT / "chapters" / "exercises" / f"{name}.py").exists(), (
                f"{where}: `{command}`: no chapters/exercises/{name}.py")
        if words[:2] == ["make", "compare"]:
            args = dict(w.split("=", 1) for w in words[2:] if "=" in w).get("ARGS", "")
            words, topics = args.split(), []
            for i, word in enumerate(words):
                after_value_flag = i and words[i - 1] in ("--json", "--cifar", "--text")
                if not word.startswith(("-", "[")) and word.islower() and not after_value_flag:
                    topics.append(word)
            for topic in topics:
                assert topic in TOPICS, f"{where}: `{command}`: no compare topic {topic!r}"
