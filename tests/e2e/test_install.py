"""docs/install.md, run as written: the wheel in a new virtualenv, a project made by
``django-admin startproject``, then the page's steps in order, then a real worker, beat and
web server of that project.

Nothing of the checkout is on the new project's ``sys.path``: the package is the wheel built
from this checkout (``python -m build``), installed non-editable into a virtualenv of the
interpreter running the tests (so the suite's Python 3.11 run installs Django 5.2 there, its
Python 3.12 run Django 6.0), and the project runs from a temporary directory with an
environment of its own. The page's blocks are applied as a reader applies them:

- an ``sh`` block is one bash script (``set -euo pipefail``) in the reader's terminal: the
  virtualenv first on ``PATH``, the directory a ``cd`` left; the package name in its
  ``pip install`` line stands for the wheel's path;
- a ``python`` block starts with ``# <file> — <how>``: ``add at the end``, ``new file`` or
  ``the whole file``;
- a block under ``<!-- not run: REASON -->`` is what the test does itself (start the
  processes, make the user, mint the token), with the same commands.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import django
import psycopg
import pytest
from django.db import connection

from tasks_app import __version__
from tests.markdown import Block, fenced_blocks
from tests.processes import ROOT, Proc, ensure_vhost, server_url, spawn, wait_until
from tests.web import Browser, free_port

pytestmark = pytest.mark.e2e

DOC = ROOT / "docs" / "install.md"
DISTRIBUTION = "django-scheduled-runs"
HEADER = re.compile(r"^# (\S+) — (add at the end|new file|the whole file)$")
PASSWORD = "install-test-password-42"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_carries_the_app_alone_with_its_files(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"tasks_app"}  # no demo project, no tests
    for needed in (
        "tasks_app/templates/admin/tasks_app/task/change_form.html",
        "tasks_app/templates/tasks_app/overview.html",
        "tasks_app/static/tasks_app/admin.css",
        "tasks_app/static/tasks_app/admin.js",
        "tasks_app/store/queries.sql",
        "tasks_app/migrations/sql/0014_store_schema.sql",
    ):
        assert needed in names


class Reader:
    """The reader's terminal: the new virtualenv first on ``PATH``, the current directory,
    and the project's environment (its database, broker vhost and Redis database)."""

    def __init__(self, root: Path, env: dict[str, str], wheel: Path) -> None:
        self.cwd = root
        self.env = env
        self.wheel = wheel

    def sh(self, script: str, *, timeout: float = 600) -> str:
        script = re.sub(rf"(pip install .*){DISTRIBUTION}\b", rf"\g<1>{self.wheel}", script)
        marker = "__cwd__"
        done = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{script}\necho {marker}$(pwd)"],  # noqa: S607
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (
            f"{script}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        output, _, cwd = done.stdout.rpartition(marker)
        self.cwd = Path(cwd.strip())
        return output

    def write(self, block: Block) -> None:
        first, _, body = block.text.partition("\n")
        header = HEADER.match(first)
        assert header, f"install.md:{block.line}: a python block starts with '# <file> — <how>'"
        path, how = self.cwd / header.group(1), header.group(2)
        if how == "add at the end":
            assert path.exists(), f"install.md:{block.line}: {path} does not exist"
            path.write_text(path.read_text() + "\n" + body)
        else:
            assert (how == "new file") != path.exists(), f"install.md:{block.line}: {how}: {path}"
            path.write_text(body)

    def manage(self, *args: str, timeout: float = 120) -> str:
        return self.sh(shlex.join(["python", "manage.py", *args]), timeout=timeout)

    def python(self, code: str) -> str:
        """The last line ``code`` printed, run by ``manage.py shell``."""
        output = self.sh(f"python manage.py shell -v 0 <<'EOF'\n{code}\nEOF")
        return output.strip().splitlines()[-1]

    def spawn(self, name: str, command: str, log_dir: Path) -> Proc:
        return spawn(name, ["bash", "-c", f"exec {command}"], log_dir, self.env, cwd=self.cwd)


@pytest.fixture
def reader(tmp_path: Path, wheel: Path) -> Iterator[Reader]:
    """A new virtualenv and empty directory, a database, broker vhost and Redis database of
    their own (dropped after the test)."""
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=120)
    suffix = uuid.uuid4().hex[:8]
    dbname = f"install_{suffix}"
    broker = "amqp://guest:guest@127.0.0.1:5672/install-test"
    ensure_vhost(broker)
    admin_url = server_url("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    cfg = connection.settings_dict
    env = {
        key: value
        for key, value in os.environ.items()
        if key in ("HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_INDEX_URL", "PIP_CACHE_DIR")
    }
    env.update(
        PATH=f"{venv / 'bin'}:{os.environ['PATH']}",
        VIRTUAL_ENV=str(venv),
        PYTHONUNBUFFERED="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        SHOP_DB_NAME=dbname,
        SHOP_DB_USER=cfg.get("USER") or "",
        SHOP_DB_PASSWORD=cfg.get("PASSWORD") or "",
        SHOP_DB_HOST=cfg.get("HOST") or "127.0.0.1",
        SHOP_BROKER_URL=broker,
        SHOP_REDIS_URL="redis://127.0.0.1:6379/9",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    workdir = tmp_path / "projects"
    workdir.mkdir()
    try:
        yield Reader(workdir, env, wheel)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


ENQUEUE = """
from datetime import timedelta
from django.utils import timezone
from shop.tasks import send_welcome_email
result = send_welcome_email.using(run_after=timezone.now() + timedelta(seconds=3)).enqueue(42)
print(result.id)
"""
RESULT = """
from shop.tasks import send_welcome_email
result = send_welcome_email.get_result({run_id!r})
print(result.status, result.return_value if result.is_finished else None)
"""


def test_install_md_as_written_gives_a_working_project(
    reader: Reader, tmp_path: Path, process_logs: Path
) -> None:
    steps = fenced_blocks(DOC)
    runnable = [b for b in steps if b.not_run is None]
    assert runnable[0].language == "sh" and "pip install" in runnable[0].text
    for block in steps:
        if block.not_run is not None:
            continue
        if block.language == "sh":
            reader.sh(block.text)
            if block is runnable[0]:  # the package is in: the project the page speaks of
                reader.sh("django-admin startproject shop\ncd shop")
        else:
            assert block.language == "python", f"install.md:{block.line}: {block.language}?"
            reader.write(block)

    # The wheel alone: no demo project, and Django as the interpreter allows.
    assert reader.sh(
        "python -c 'import tasks_app, django; print(django.VERSION[:2])'"
    ).strip() == str(django.VERSION[:2])
    no_demo = subprocess.run(
        ["python", "-c", "import project"], cwd=reader.cwd, env=reader.env, capture_output=True
    )
    assert no_demo.returncode != 0
    assert "site-packages" in reader.sh("python -c 'import tasks_app; print(tasks_app.__file__)'")
    assert reader.manage("check", "--fail-level", "WARNING").strip() == (
        "System check identified no issues (0 silenced)."
    )

    port = free_port()
    reader.manage("createsuperuser", "--noinput", "--username", "admin", "--email", "a@example.com")
    token = reader.manage("api_token", "create", "admin").strip().splitlines()[-1]
    worker = reader.spawn(
        "install-worker",
        f"celery -A shop worker -l info --concurrency 1 -n install-{time.time_ns()}@%h",
        process_logs,
    )
    beat = reader.spawn("install-beat", "celery -A shop beat -l info", process_logs)
    web = reader.spawn(
        "install-web", f"python manage.py runserver --noreload 127.0.0.1:{port}", process_logs
    )
    try:
        worker.wait_for_log("ready.", timeout=90)
        web.wait_for_log("Quit the server", timeout=60)

        # A @task function enqueued with run_after runs on the worker when it comes due.
        run_id = reader.python(ENQUEUE)
        outcome: list[str] = []

        def finished() -> bool:
            outcome[:] = [reader.python(RESULT.format(run_id=run_id))]
            return not outcome[0].startswith(("READY", "RUNNING"))

        wait_until(finished, timeout=90, message="the enqueued function to finish")
        assert outcome[0] == "SUCCESSFUL sent to user 42"

        # The API takes the token it minted, and refuses an anonymous call with a 401.
        browser = Browser(f"http://127.0.0.1:{port}")
        assert browser.fetch("/api/tasks")[0] == 401
        auth = {"Authorization": f"Token {token}"}
        status, body = browser.fetch("/api/tasks", auth)
        assert status == 200, body
        assert "heartbeat" in {t["id"] for t in json.loads(body)["results"]}

        # The declared schedule fires on beat and its run completes.
        def heartbeat_ran() -> bool:
            status, body = browser.fetch("/api/tasks/heartbeat/runs", auth)
            return status == 200 and any(
                r["status"] == "completed" for r in json.loads(body)["results"]
            )

        wait_until(heartbeat_ran, timeout=120, message="the declared schedule to run")

        # The admin's pages of the app, with the app's styles and script.
        browser.get("/admin/login/")
        signed_in = browser.post(
            "/admin/login/?next=/admin/",
            {"username": "admin", "password": PASSWORD, "next": "/admin/"},
        )
        assert "Site administration" in signed_in  # the admin's index, after the redirect

        # The web process's log names who asked for a run, with the line's level and logger
        # (install.md's LOGGING; without it Python drops the app's INFO lines).
        made = browser.api("POST", "/api/tasks/heartbeat/execute")
        web.wait_for_log(f"run {made['id']} of task heartbeat created by admin", timeout=10)
        assert re.search(
            rf"INFO tasks_app\.services\.run_create run {made['id']} of task heartbeat "
            "created by admin",
            web.log(),
        ), web.log()[-2000:]
        for path in (
            "/admin/tasks_app/task/heartbeat/change/",
            f"/admin/tasks_app/run/{run_id}/change/",
            "/admin/overview/",
        ):
            status, body = browser.fetch(path)
            assert status == 200, f"{path}: {status}\n{body[-2000:]}"
            for asset in ("tasks_app/admin.css", "tasks_app/admin.js"):
                url = re.search(rf'"([^"]*{re.escape(asset)})"', body)
                assert url, f"{path} does not load {asset}"
                assert browser.fetch(url.group(1))[0] == 200, url.group(1)
            assert 'id="api-docs-link"' in body
        assert f"django-scheduled-runs {__version__}" in browser.fetch("/admin/overview/")[1]
        # The project's admin stays the project's own.
        status, body = browser.fetch("/admin/")
        assert status == 200 and "Django administration" in body
    finally:
        for proc in (web, beat, worker):
            proc.stop()
