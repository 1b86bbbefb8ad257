"""The embedded stack's parts: the settings flag, Postgres as the broker, the launcher's
``manage`` with a var/ too deep for a unix socket. ``make run`` end to end:
tests/e2e/test_make_run.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection
from kombu import Connection, Exchange, Queue

from tasks_app import broker
from tests import processes
from tests.processes import ROOT


def settings_of(tmp_path: Path, names: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TASKS_VAR_DIR": str(tmp_path)}
    code = (
        "import django, json; from django.conf import settings; django.setup(); "
        f"print(json.dumps({{n: str(getattr(settings, n)) for n in {names!r}}}))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_database_url_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    done = settings_of(tmp_path, ["DATABASES"], TASKS_EMBEDDED="1")
    assert done.returncode != 0
    assert "DATABASE_URL is not set. `make run` starts an embedded Postgres" in done.stderr


def test_the_embedded_flag_not_a_missing_url_selects_developer_defaults(tmp_path: Path) -> None:
    names = ["SECURE_SSL", "CELERY_BROKER_TRANSPORT", "EMAIL_BACKEND"]
    url = "postgres://postgres@/tasks?host=/somewhere/var/postgres"
    embedded = settings_of(tmp_path, names, TASKS_EMBEDDED="1", DATABASE_URL=url)
    assert embedded.returncode == 0, embedded.stderr
    assert '"SECURE_SSL": "False"' in embedded.stdout
    assert '"CELERY_BROKER_TRANSPORT": "tasks_app.broker:Transport"' in embedded.stdout
    assert "console" in embedded.stdout
    key = (tmp_path / "secret_key").read_text().strip()
    assert len(key) >= 50 and (tmp_path / "secret_key").stat().st_mode & 0o077 == 0

    deployed = settings_of(tmp_path / "other", names, DATABASE_URL=url)
    assert deployed.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in deployed.stderr
    assert not (tmp_path / "other" / "secret_key").exists()


@pytest.mark.django_db
def test_postgres_broker_delivers_each_message_once_and_keeps_no_row() -> None:
    queue = Queue(f"embedded-test-{uuid.uuid4().hex[:8]}", Exchange("embedded-test"), "k")
    options = {"polling_interval": 0.01}
    try:
        _round_trip(queue, options)
    finally:  # the engine's pooled connections would keep the test database from being dropped
        for engine, _session in broker.Channel._engines.values():
            engine.dispose()
        broker.Channel._engines.clear()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM kombu_message")
        assert cursor.fetchone() == (0,)  # delivered rows are deleted, not hidden


def _round_trip(queue: Queue, options: dict[str, float]) -> None:
    with Connection(
        processes.test_database_url(),
        transport="tasks_app.broker:Transport",
        transport_options=options,
    ) as conn:
        assert conn.transport.polling_interval == 0.01  # the option reaches the transport
        producer = conn.Producer()
        for n in range(20):
            producer.publish({"n": n}, exchange=queue.exchange, routing_key="k", declare=[queue])
        received: list[int] = []

        def on_message(body: dict[str, int], message: object) -> None:
            received.append(body["n"])
            message.ack()  # type: ignore[attr-defined]

        deadline = time.monotonic() + 30
        with conn.Consumer(queue, callbacks=[on_message], prefetch_count=1):
            while len(received) < 20 and time.monotonic() < deadline:
                conn.drain_events(timeout=1)
        assert received == list(range(20))  # in order, once each
        channel = conn.default_channel
        assert channel.queue_declare(queue=queue.name, passive=True).message_count == 0


def test_manage_starts_and_stops_postgres_with_a_deep_var_dir(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / "var"
    assert len(str(deep / "postgres" / ".s.PGSQL.5432")) > 107
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    env["TASKS_VAR_DIR"] = str(deep)
    done = subprocess.run(
        [sys.executable, "-m", "project.embedded", "manage", "showmigrations", "tasks_app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tasks_app" in done.stdout and "[ ]" in done.stdout  # a fresh database
    assert (deep / "postgres" / "PG_VERSION").exists()  # the data is under var/
    assert not (deep / "postgres" / "postmaster.pid").exists()  # started for it, stopped after
