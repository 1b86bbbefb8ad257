"""``python manage.py`` with nothing set, and no ``make run`` running: it starts the embedded
Postgres under ``var/`` for the one command and stops it afterwards, as ``make manage`` does.

(With ``make run`` running, the console examples test runs every ``python manage.py`` of the
docs against its stack.)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from project.embedded import alive
from tests.processes import ROOT

pytestmark = pytest.mark.e2e


def manage(var: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/root"),
        "TASKS_VAR_DIR": str(var),
    }
    return subprocess.run(  # noqa: S603 - our own manage.py
        ["python", "manage.py", *args],  # noqa: S607 - the virtualenv's python, first on PATH
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_manage_py_starts_and_stops_the_embedded_postgres_for_one_command(
    tmp_path: Path,
) -> None:
    var = tmp_path / "var"
    migrated = manage(var, "migrate", "--noinput", "-v0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]

    listed = manage(var, "tasks", "list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert listed.stdout.split() == ["ID", "NAME", "ACTION", "SCHEDULE", "STATUS", "NEXT", "RUN"]
    assert listed.stderr == "", listed.stderr  # quiet: no warning, no log line

    refused = manage(var, "tasks", "get", "no-such-task")
    assert refused.returncode == 1, refused.stderr
    assert "no-such-task" in refused.stderr

    # The server it started is stopped again: no postmaster left for the data directory.
    pid_file = var / "postgres" / "postmaster.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        assert not alive(pid), f"the embedded Postgres (pid {pid}) was left running"
    assert (var / "secret_key").exists(), "the embedded defaults were not used"
