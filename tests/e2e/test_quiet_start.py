"""What a newcomer sees: processes that start without deprecation warnings, a command line
that prints only its result, and the exit statuses docs/cli.md promises, through
``manage.py`` and through ``make manage``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import ROOT, process_env, start_beat, start_worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def warning_lines(log: str) -> list[str]:
    """Lines that print a Python warning (``...: CDeprecationWarning: ...``), except Celery's
    SecurityWarning about running as root, which is true when the tests run as root."""
    found = [line for line in log.splitlines() if re.search(r"\w+Warning\b", line)]
    if os.geteuid() == 0:
        found = [line for line in found if "SecurityWarning" not in line]
    return found


def test_worker_and_beat_start_without_warnings(tmp_path: Path) -> None:
    worker = start_worker(tmp_path, concurrency=1)
    beat = start_beat(tmp_path)
    try:
        assert warning_lines(worker.log()) == []
        assert warning_lines(beat.log()) == []
    finally:
        worker.stop()
        beat.stop()


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "manage", f"ARGS={' '.join(args)}"],  # noqa: S607
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_success_prints_its_result_only() -> None:
    done = manage("tasks", "create", "quiet-1", "--action", "noop")
    assert (done.returncode, done.stdout, done.stderr) == (0, "created task quiet-1\n", "")
    done = manage("tasks", "execute", "quiet-1")
    assert done.returncode == 0 and done.stderr == ""
    assert re.fullmatch(r"run [0-9a-f-]{36} of quiet-1 queued now\n", done.stdout), done.stdout
    # -v 2 shows the log lines the services write for the processes' logs.
    done = manage("tasks", "-v", "2", "create", "quiet-2", "--action", "noop")
    assert done.returncode == 0 and "task quiet-2 created by cli:" in done.stderr


def test_exit_statuses_through_manage_py() -> None:
    assert manage("tasks", "create", "quiet-3", "--action", "noop").returncode == 0
    refused = manage("tasks", "create", "quiet-3", "--action", "noop")
    assert refused.returncode == 1
    assert refused.stderr == "CommandError: a task with id 'quiet-3' already exists\n"
    usage = manage("tasks", "execute", "quiet-3", "--in", "soon")
    assert usage.returncode == 2 and "usage:" in usage.stderr and "--in" in usage.stderr


def test_exit_statuses_through_make_manage() -> None:
    done = make_manage("tasks", "create", "quiet-4", "--action", "noop")
    assert (done.returncode, done.stdout, done.stderr) == (0, "created task quiet-4\n", "")
    # make exits 2 on any failure; its last line names the command's own status.
    refused = make_manage("tasks", "create", "quiet-4", "--action", "noop")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines()[0] == (
        "CommandError: a task with id 'quiet-4' already exists"
    )
    assert refused.stderr.splitlines()[-1].endswith("manage] Error 1")
    usage = make_manage("tasks", "bogus")
    assert usage.returncode == 2 and "usage:" in usage.stderr
    assert usage.stderr.splitlines()[-1].endswith("manage] Error 2")
