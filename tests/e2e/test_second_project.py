"""``tasks_app`` installed into a second Django project, as a team would install it.

The project (tests/e2e/second_project: its own settings, URLs and Celery app; ``project``
made unimportable) is copied to a temporary directory, migrates a database of its own, and
runs a task created through its own URLs on a real ``celery -A shop worker``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from tests.processes import delete_queue, spawn

SOURCE = Path(__file__).with_name("second_project")


def _server_url(dbname: str) -> str:
    cfg = connection.settings_dict
    user = cfg.get("USER") or ""
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{cfg.get('HOST') or '127.0.0.1'}:{cfg.get('PORT') or 5432}/{dbname}"


@pytest.fixture
def second_project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The project's directory and the environment its processes run with; its database
    and broker queue are made for the test and dropped after it."""
    root = tmp_path / "second"
    shutil.copytree(SOURCE, root)
    suffix = uuid.uuid4().hex[:8]
    dbname, queue = f"second_project_{suffix}", f"second-project-{suffix}"
    admin_url = _server_url("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TASKS_", "DJANGO_", "CELERY_", "DATABASE_", "REDIS_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="shop.settings",
        SHOP_DATABASE_URL=_server_url(dbname),
        SHOP_BROKER_URL=settings.CELERY_BROKER_URL,
        SHOP_QUEUE=queue,
        PYTHONUNBUFFERED="1",
    )
    try:
        yield root, env
    finally:
        delete_queue(queue)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def _run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_second_project_installs_the_app_and_runs_a_task(
    second_project: tuple[Path, dict[str, str]], process_logs: Path
) -> None:
    root, env = second_project
    migrated = _run(root, env, "manage.py", "migrate", "--noinput")
    assert "Applying tasks_app.0001_initial... OK" in migrated.stdout
    _run(root, env, "manage.py", "check", "--fail-level", "WARNING")

    worker = spawn(
        "second-worker",
        [
            sys.executable,
            *("-m", "celery", "-A", "shop", "worker", "-l", "info"),
            *("--pool", "prefork", "--concurrency", "1"),
            *("--without-gossip", "--without-mingle", "--without-heartbeat"),
            *("-n", f"second-{time.time_ns()}@%h"),
        ],
        process_logs,
        env,
        cwd=root,
    )
    try:
        worker.wait_for_log("ready.", timeout=60)
        seen = json.loads(_run(root, env, "drive.py").stdout.strip().splitlines()[-1])
    finally:
        worker.stop()

    # Anonymous callers are refused by the app itself, whatever the project's DRF defaults.
    assert seen["anonymous"] in (401, 403)
    assert seen["create"] == 201
    assert seen["execute"] == 202
    run = seen["run"]
    assert run["status"] == "completed", run
    # TASKS_OUTPUT_LIMIT_BYTES = 10 in the second project's settings reached its worker.
    assert (run["output"], run["truncated"]) == ("hello from", True)
    assert str(run["worker"]).startswith("second-")
    assert seen["overview"] == 200
