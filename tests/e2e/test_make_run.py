"""`make run` on a bare machine: no environment at all, embedded SQLite + file broker.

Starts the real command, logs in to the admin over HTTP, creates an echo task, runs it from
the admin and reads the completed run's output; then Ctrl-C (SIGINT) stops all three
processes.
"""

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.processes import ROOT, wait_until

pytestmark = pytest.mark.e2e
PASSWORD = "make-run-password-42"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Browser:
    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as response:
            return response.read().decode()

    def post(self, path: str, data: dict[str, object]) -> str:
        token = next(c.value for c in self.jar if c.name == "csrftoken")
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": token}, doseq=True).encode()
        request = urllib.request.Request(
            self.base + path, data=body, headers={"Referer": self.base + path}
        )
        with self.opener.open(request, timeout=10) as response:
            return response.read().decode()


def up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - local test server
            return response.status == 200
    except OSError:
        return False


def test_make_run_serves_the_admin_and_runs_a_task(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "PORT": str(port),
        "TASKS_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
    }
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
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: up(base + "/admin/login/") or proc.poll() is not None,
            timeout=180,
            interval=0.5,
            message="make run to serve the admin",
        )
        output = log_path.read_text()
        assert proc.poll() is None, output[-3000:]
        assert f"Admin: http://127.0.0.1:{port}/admin/" in output

        browser = Browser(base)
        login_page = browser.get("/admin/login/")
        assert "static/admin/css/base" in login_page  # styled: static files are served
        browser.post(
            "/admin/login/?next=/admin/",
            {"username": "admin", "password": PASSWORD, "next": "/admin/"},
        )
        assert "Site administration" in browser.get("/admin/")

        browser.get("/admin/tasks_app/task/add/")
        browser.post(
            "/admin/tasks_app/task/add/",
            {
                "id": "demo-echo",
                "name": "Demo",
                "action": "echo",
                "payload": '{"message": "hello from make run"}',
                "schedule_type": "none",
                "timezone": "UTC",
                "queue": "celery",
                "priority": "5",
                "max_retries": "0",
                "retry_backoff_seconds": "10",
                "jitter_seconds": "0",
                "overlap_policy": "allow",
                "catchup": "skip",
                "catchup_window_seconds": "3600",
            },
        )
        assert "demo-echo" in browser.get("/admin/tasks_app/task/"), "the task was not saved"
        browser.post(
            "/admin/tasks_app/task/", {"action": "run_now", "_selected_action": ["demo-echo"]}
        )

        def completed_run() -> str | None:
            page = browser.get("/admin/tasks_app/run/?q=demo-echo&status__exact=completed")
            match = re.search(r'href="/admin/tasks_app/run/([0-9a-f-]{36})/change/', page)
            return match.group(1) if match else None

        run_id = wait_until(completed_run, timeout=60, interval=0.5, message="a completed run")
        detail = browser.get(f"/admin/tasks_app/run/{run_id}/change/")
        assert "hello from make run" in detail
        group = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True)
        members = [int(pid) for pid in group.stdout.split()]
        assert len(members) >= 4, "make, honcho, web, worker and beat should be running"
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does in a terminal
        try:
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(1)
    assert proc.returncode is not None
    assert not up(f"http://127.0.0.1:{port}/admin/login/"), "web still serving after Ctrl-C"
    alive = [
        pid
        for pid in members
        if Path(f"/proc/{pid}").exists()
        and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    ]
    assert not alive, f"processes left after Ctrl-C: {alive}"
