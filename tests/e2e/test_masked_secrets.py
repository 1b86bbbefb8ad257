"""No password in what Celery prints or answers: ``celery -A project report`` (run for real,
with passwords in every URL) and a real worker's ``inspect conf`` answer, which Flower's
worker pages show."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest

from project.celery import app
from tests import processes
from tests.processes import ROOT, start_worker

SECRETS = {
    "DATABASE_URL": "postgres://app:db-pw-0f3a@db.internal:5432/tasks",
    "CELERY_BROKER_URL": "amqp://app:broker-pw-77c1@mq.internal:5672/tasks",
    "REDIS_URL": "redis://:redis-pw-9e2d@cache.internal:6379/0",
    "DJANGO_SECRET_KEY": "secret-key-5b8e-" + "x" * 40,
    "EMAIL_HOST_PASSWORD": "smtp-pw-c4d0",
}
PASSWORDS = ["db-pw-0f3a", "broker-pw-77c1", "redis-pw-9e2d", "secret-key-5b8e", "smtp-pw-c4d0"]


def report(**env: str) -> str:
    clean = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8", **env}
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "project", "report"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_celery_report_shows_no_password() -> None:
    out = report(**SECRETS)
    assert "broker_url: 'amqp://app:********@mq.internal:5672/tasks'" in out
    # Only Celery's own settings: not Django's caches, database or secret key, masked or not.
    assert "CACHES" not in out and "DATABASES" not in out and "SECRET_KEY" not in out
    assert [p for p in PASSWORDS if p in out] == []


def test_celery_report_masks_the_postgres_broker_too() -> None:
    # No CELERY_BROKER_URL: the database URL (with its password) is the broker's.
    out = report(**{k: v for k, v in SECRETS.items() if k != "CELERY_BROKER_URL"})
    assert "broker_url: 'postgres://app:********@db.internal:5432/tasks'" in out
    assert [p for p in PASSWORDS if p in out] == []


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "root"
    netloc = f"{user}:{password}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_workers_conf_answer_shows_no_password(_session_queue, process_logs) -> None:
    # The local Postgres trusts any password and RabbitMQ's is guest's: real passwords in
    # real URLs the worker connects with.
    broker = app.conf.broker_url
    password = urlsplit(broker).password
    assert password
    name = "masked@harden-test"
    worker = start_worker(
        process_logs,
        hostname=name,
        DATABASE_URL=with_password(processes.test_database_url(), "db-pw-0f3a"),
        DJANGO_SECRET_KEY=SECRETS["DJANGO_SECRET_KEY"],
    )
    try:
        answers = app.control.inspect(destination=[name], timeout=10).conf() or {}
    finally:
        worker.stop()
    text = repr(answers[name])
    assert "broker_url" in text.lower() and "********" in text  # CELERY_BROKER_URL, masked
    assert f":{password}@" not in text
    assert "db-pw-0f3a" not in text and "secret-key-5b8e" not in text
