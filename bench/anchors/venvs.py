"""The anchors' own virtualenvs under ``var/bench-anchors/``, built from PyPI.

``python -m bench.anchors.venvs [name ...]`` (``make bench-anchors``) builds them; the
``enqueue`` scenario calls :func:`ensure` on first use. Each is rebuilt when its
requirements file changes (a stamp named by the file's hash). Their packages are never the
project's: nothing here touches pyproject.toml or ``.venv``.

Standard library only: it runs before any of the packages it installs exist.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VAR = Path(os.environ.get("TASKS_VAR_DIR") or ROOT / "var")
VENVS = VAR / "bench-anchors"


class AnchorUnavailable(RuntimeError):
    """An anchor's virtualenv could not be built (no suitable Python, PyPI unreachable...)."""


@dataclass(frozen=True)
class Anchor:
    name: str
    directory: str
    requirements: str
    python: tuple[int, int]  # the interpreter's minor version it is built with
    python_env: str  # an environment variable naming another interpreter

    @property
    def venv(self) -> Path:
        return VENVS / self.directory

    @property
    def venv_python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def requirements_path(self) -> Path:
        return HERE / self.requirements

    def stamp(self) -> Path:
        digest = hashlib.sha1(self.requirements_path.read_bytes()).hexdigest()[:12]
        return self.venv / f".installed-{digest}"


ANCHORS = {
    "tasks_db": Anchor(
        "tasks_db", "tasks-db", "requirements-tasks-db.txt", (3, 11), "BENCH_TASKS_DB_PYTHON"
    ),
    "ox": Anchor("ox", "ox", "requirements-ox.txt", (3, 12), "BENCH_OX_PYTHON"),
}


def _version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out.stdout.split()
    return (int(parts[0]), int(parts[1])) if out.returncode == 0 and len(parts) == 2 else None


def interpreter(anchor: Anchor) -> str:
    """The Python ``anchor`` is built with: ``$<python_env>`` if set, else a
    ``python3.X`` of the wanted minor version (pyenv's, then PATH's, then this one)."""
    if chosen := os.environ.get(anchor.python_env):
        if _version(chosen) is None:
            raise AnchorUnavailable(f"{anchor.python_env}={chosen} does not run")
        return chosen
    major, minor = anchor.python
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = [
        sys.executable,
        *sorted(glob.glob(f"{pyenv}/versions/{major}.{minor}.*/bin/python{major}.{minor}")),
        shutil.which(f"python{major}.{minor}") or "",
    ]
    for candidate in filter(None, candidates):
        if _version(candidate) == anchor.python:
            return candidate
    raise AnchorUnavailable(f"no Python {major}.{minor} found (set {anchor.python_env} to one)")


def ensure(name: str) -> Path:
    """The Python of anchor ``name``'s virtualenv, built first if needed;
    :class:`AnchorUnavailable` with the reason if it cannot be."""
    anchor = ANCHORS[name]
    if anchor.stamp().exists() and anchor.venv_python.exists():
        return anchor.venv_python
    python = interpreter(anchor)
    shutil.rmtree(anchor.venv, ignore_errors=True)
    anchor.venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [python, "-m", "venv", str(anchor.venv)],
        [str(anchor.venv_python), "-m", "pip", "install", "-q", "--upgrade", "pip"],
        [
            str(anchor.venv_python),
            "-m",
            "pip",
            "install",
            "-q",
            "-r",
            str(anchor.requirements_path),
        ],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AnchorUnavailable(f"{' '.join(step[1:4])}: {exc}") from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise AnchorUnavailable(f"{' '.join(step[1:4])} failed: {' | '.join(tail)}")
    anchor.stamp().touch()
    return anchor.venv_python


def main(argv: list[str]) -> int:
    failed = 0
    for name in argv or list(ANCHORS):
        try:
            print(f"{name}: {ensure(name)}", flush=True)
        except AnchorUnavailable as exc:
            failed += 1
            print(f"{name}: unavailable: {exc}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
