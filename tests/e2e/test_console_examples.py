"""Every console example in the README and docs runs as written, on a ``make run`` stack.

The examples are the fenced blocks tagged ``console``, ``sh``, ``bash`` or ``shell`` in
``README.md``, ``CHANGELOG.md`` and ``docs/*.md``. The test starts ``make run`` with nothing
in its environment but ``PATH``, ``HOME``, ``PORT`` and ``TASKS_VAR_DIR`` (as
``tests/e2e/test_make_run.py`` does) and runs each example as a reader would, in a shell whose
``PATH`` starts with the virtualenv (what ``source .venv/bin/activate`` does), from a
directory that holds the project's ``manage.py`` and ``.venv`` (links to them: files an
example writes stay out of the repository):

- a ``console`` block: each ``$ `` line is a command, run on its own; it must exit 0, and the
  lines the block shows under it must appear in what it printed, in that order (``…`` stands
  for any text, runs of spaces for any spacing);
- an ``sh`` / ``bash`` / ``shell`` block: the whole block is one script, run with
  ``set -euo pipefail``; it must exit 0. ``curl`` fails on an HTTP error status there
  (``--fail-with-body``), so an example that answers 400 fails the test.

The examples run one after the other on one stack, in the order a reader meets them (README
first, then each doc in the order the README links it): each starts from what the ones
before it left, as in a reader's terminal. A block that cannot run here says so on the line above it, in an
HTML comment the reader does not see: ``<!-- not run: REASON -->``. The test accepts three
reasons, each checked against the block: ``needs PROGRAM`` (the block calls ``PROGRAM``, a
program that is not part of the project), ``interactive`` (it asks for a password) and
``long-running`` (it is ``make run``, ``make test`` or ``make bench``, which run for minutes
or until stopped; ``make run`` has its own test).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.markdown import fenced_blocks
from tests.processes import ROOT, wait_until
from tests.web import free_port, up

pytestmark = pytest.mark.e2e

PASSWORD = "console-examples-password-42"
SHELLS = {"console", "sh", "bash", "shell"}
INTERACTIVE = ("changepassword", "createsuperuser")
# The commands that start the stack or a process of it: they run until stopped.
LONG_RUNNING = re.compile(
    r"^(\w+=\S+\s+)*(make (run|test|bench|soak)|celery -A \S+ (worker|beat))\b"
)
# A block without a language whose first line looks like a command: an example the test
# would not see.
COMMAND_LIKE = re.compile(r"^(\$ |(\w+=\S+ )*(make|python|curl|docker|celery|pip)\b)")
UNTAGGED: list[str] = []
PREAMBLE = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n'


@dataclass
class Example:
    """One fenced shell block of a markdown file."""

    path: Path
    line: int
    language: str
    text: str
    not_run: str | None = None
    #: ``console`` blocks: each command with the output lines shown under it.
    steps: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """The commands of the block: ``$ `` lines of a console block; otherwise every line
        that is not a comment, continuation lines joined."""
        if self.language == "console":
            return [command for command, _ in self.steps]
        joined = re.sub(r"\\\n\s*", " ", self.text)
        return [
            line.strip()
            for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]


def markdown_files() -> list[Path]:
    """README first, then the docs in the order the README first links them (the others
    after, by name), then the changelog: the order a reader meets them."""
    readme = ROOT / "README.md"
    linked = dict.fromkeys(re.findall(r"\(docs/([\w-]+\.md)", readme.read_text()))
    order = {name: index for index, name in enumerate(linked)}
    docs = sorted(
        (ROOT / "docs").glob("*.md"), key=lambda p: (order.get(p.name, len(order)), p.name)
    )
    files = [readme, *docs, ROOT / "CHANGELOG.md"]
    return [path for path in files if path.exists()]


def parse(path: Path) -> list[Example]:
    examples: list[Example] = []
    for block in fenced_blocks(path):
        body = block.text.splitlines()
        if block.language not in SHELLS:
            if not block.language and body and COMMAND_LIKE.match(body[0]):
                UNTAGGED.append(f"{path.relative_to(ROOT)}:{block.line}")
            continue
        example = Example(
            path=path,
            line=block.line,
            language=block.language,
            text=block.text,
            not_run=block.not_run,
        )
        if block.language == "console":
            for body_line in body:
                if body_line.startswith("$ "):
                    example.steps.append((body_line[2:], []))
                elif example.steps:
                    example.steps[-1][1].append(body_line)
        examples.append(example)
    return examples


# docs/install.md is run by tests/e2e/test_install.py, in a project of its own.
EXAMPLES = [
    example for path in markdown_files() if path.name != "install.md" for example in parse(path)
]
RUNNABLE = [example for example in EXAMPLES if example.not_run is None]


def reason_holds(example: Example) -> str | None:
    """Why the block's ``not run`` reason is wrong, or None when it holds."""
    reason = example.not_run or ""
    commands = example.commands()
    words = [shlex.split(command)[0] for command in commands if shlex.split(command)]
    if reason.startswith("needs "):
        program = reason.removeprefix("needs ").split()[0]
        if program not in words:
            return f"no command of the block runs {program!r}"
        if (ROOT / ".venv" / "bin" / program).exists() or program in {"python", "make"}:
            return f"{program!r} is part of the project's toolchain: run the example"
        return None
    if reason == "interactive":
        if not any(word in command for command in commands for word in INTERACTIVE):
            return f"no command of the block is one that prompts ({', '.join(INTERACTIVE)})"
        return None
    if reason == "long-running":
        if not all(LONG_RUNNING.match(command) for command in commands):
            return "only make run / test / bench / soak and celery worker / beat blocks are long-running"
        return None
    return "the reason must be 'needs PROGRAM', 'interactive' or 'long-running'"


def test_the_docs_have_examples_and_every_one_not_run_says_why() -> None:
    names = {example.path.name for example in RUNNABLE}
    assert {"README.md", "api.md", "cli.md"} <= names, names
    assert len(RUNNABLE) >= 5, [example.name for example in RUNNABLE]
    wrong = {
        example.name: why
        for example in EXAMPLES
        if example.not_run is not None and (why := reason_holds(example))
    }
    assert not wrong, wrong
    empty = [
        example.name for example in EXAMPLES if example.language == "console" and not example.steps
    ]
    assert not empty, f"console blocks without a '$ ' command: {empty}"
    assert not UNTAGGED, f"command blocks without a console/sh tag: {UNTAGGED}"


# Words of the team that builds the product, not of its users.
INTERNAL = re.compile(
    r"\b(issue ?#?\d+|must[- ]shows?|(first|second|third|fourth|fifth|sixth|seventh|eighth)"
    r" session|this session|other sessions|helpers?\b)",
    re.IGNORECASE,
)


def test_the_docs_speak_the_products_words() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in markdown_files()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if (match := INTERNAL.search(line))
    ]
    assert not found, found


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


DECIMAL = re.compile(r"\d+\\\.\d+")  # a decimal figure, once re.escape'd


def word_pattern(word: str) -> str:
    """A shown word as a pattern: ``…`` stands for any text, and a decimal figure for any
    (a relative time such as ``in 1.5 min`` is ``in 1.4 min`` a few seconds later)."""
    pieces = [DECIMAL.sub(r"\\d+\\.\\d+", re.escape(piece)) for piece in word.split("…")]
    return ".*?".join(pieces)


def output_matches(expected: list[str], printed: str) -> str | None:
    """The first expected line not found (in order) in what was printed, or None."""
    lines = printed.splitlines()
    position = 0
    for want in expected:
        if not want.strip():
            continue
        pattern = re.compile(r"\s+".join(word_pattern(word) for word in want.split()))
        found = next(
            (i for i in range(position, len(lines)) if pattern.fullmatch(lines[i].strip())),
            None,
        )
        if found is None:
            return want
        position = found + 1
    return None


@dataclass
class Stack:
    """A running ``make run`` stack and the shell environment a reader's terminal has."""

    env: dict[str, str]
    workdir: Path

    def sh(
        self, script: str, *, merged: bool = False, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script`` in bash; ``merged``: stderr into stdout, in the order written, as
        a terminal shows them."""
        return subprocess.run(  # noqa: S603 - the docs' own examples
            ["bash", "-c", script],  # noqa: S607
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("console-examples")
    port = free_port()
    base_env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "PORT": str(port),
        "TASKS_VAR_DIR": str(tmp / "var"),
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
    }
    log_path = tmp / "make-run.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "run"],  # noqa: S607
            cwd=ROOT,
            env=base_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: up(f"http://127.0.0.1:{port}/admin/login/") or proc.poll() is not None,
            timeout=300,
            interval=0.5,
            message="make run to serve the admin",
        )
        assert proc.poll() is None, log_path.read_text()[-3000:]
        # A reader's terminal: the virtualenv first on PATH, in a directory with manage.py.
        workdir = tmp / "work"
        workdir.mkdir()
        venv = ROOT / ".venv"
        (workdir / "manage.py").symlink_to(ROOT / "manage.py")
        (workdir / ".venv").symlink_to(venv)
        env = {
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "VIRTUAL_ENV": str(venv),
            "HOME": base_env["HOME"],
            "PORT": str(port),
            "TASKS_VAR_DIR": base_env["TASKS_VAR_DIR"],
            "LANG": "C.UTF-8",
        }
        yield Stack(env=env, workdir=workdir)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.timeout(600)  # the first one waits for make run to start the stack
@pytest.mark.parametrize("example", RUNNABLE, ids=[example.name for example in RUNNABLE])
def test_example_runs_as_written(example: Example, stack: Stack) -> None:
    if example.language != "console":
        done = stack.sh(PREAMBLE + example.text)
        assert done.returncode == 0, (
            f"{example.name} exited {done.returncode}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        )
        return
    for command, shown in example.steps:
        done = stack.sh("set -o pipefail\n" + command, merged=True)
        printed = done.stdout
        assert done.returncode == 0, f"$ {command}\nexited {done.returncode}:\n{printed[-3000:]}"
        missing = output_matches(shown, printed)
        assert missing is None, (
            f"$ {command}\nthe docs show {missing!r}; it printed:\n{printed[-3000:]}"
        )
