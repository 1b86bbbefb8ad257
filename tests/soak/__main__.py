"""``make soak``: the fault soak on a database, broker vhost and cache prefix of its own.

Settings (environment): ``SOAK_MINUTES`` (30), ``SOAK_SEED`` (random; printed first, give it
again to replay the fault schedule), ``SOAK_DATABASE_URL`` (default: ``DATABASE_URL``'s
server, database ``<name>_soak``, created if missing), ``SOAK_BROKER_URL`` (default:
``CELERY_BROKER_URL``'s server, vhost ``<vhost>-soak``, created with ``rabbitmqctl`` if
missing), ``SOAK_REDIS_URL`` (default ``REDIS_URL``; the soak's keys under a prefix of their
own). ``SOAK_PRIVATE_SERVICES=1``: Postgres, RabbitMQ and Redis of the soak's own on other
ports (``tests/soak/services.py``), and their restarts among the faults. The report is printed and written to ``var/soak/<seed>.json``; the exit status is 1
when a check failed.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.processes import ensure_vhost
from tests.soak.harness import PROCESS_FAULTS, ROOT, SERVICE_FAULTS, SOAK_ENV, Soak, summary


def _with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + path))


def _ensure_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(_with_path(url, "postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def main() -> int:
    seed = int(os.environ.get("SOAK_SEED") or secrets.randbelow(10**6))
    minutes = float(os.environ.get("SOAK_MINUTES", "30"))
    print(
        f"soak: SOAK_SEED={seed} SOAK_MINUTES={minutes:g} (replay: make soak SOAK_SEED={seed})",
        flush=True,
    )
    services = None
    faults: tuple[str, ...] = PROCESS_FAULTS
    if os.environ.get("SOAK_PRIVATE_SERVICES") == "1":
        from tests.soak.services import PrivateServices

        services = PrivateServices()
        print(f"soak: starting Postgres, RabbitMQ and Redis of its own under {services.base}")
        services.start()
        os.environ.update(services.urls)
        faults = PROCESS_FAULTS + SERVICE_FAULTS
    try:
        return _soak(seed, minutes, faults, services)
    finally:
        if services is not None:
            services.stop()


def _soak(seed: int, minutes: float, faults: tuple[str, ...], services: Any) -> int:
    base_db = os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/tasks")
    db = os.environ.get("SOAK_DATABASE_URL") or _with_path(
        base_db, urlsplit(base_db).path.lstrip("/") + "_soak"
    )
    base_broker = os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
    vhost = urlsplit(base_broker).path.lstrip("/")
    broker = os.environ.get("SOAK_BROKER_URL") or _with_path(
        base_broker, f"{vhost if vhost not in ('', '/') else 'tasks'}-soak"
    )
    redis = os.environ.get("SOAK_REDIS_URL") or os.environ.get(
        "REDIS_URL", "redis://127.0.0.1:6379/1"
    )
    _ensure_database(db)
    if services is None:
        ensure_vhost(broker)
    queue = f"soak-{seed}"
    env = {
        **os.environ,
        **SOAK_ENV,
        "DATABASE_URL": db,
        "CELERY_BROKER_URL": broker,
        "REDIS_URL": redis,
        "CACHE_KEY_PREFIX": f"soak-{seed}-{secrets.token_hex(3)}",
        "TASKS_DEFAULT_QUEUE": queue,
        "TASKS_QUEUES": queue,
        "TASKS_EXTRA_APPS": "tests.effects",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL": "0",
        "PYTHONUNBUFFERED": "1",
    }
    env.setdefault("DJANGO_SECRET_KEY", "soak-secret-not-for-production")
    os.environ.update(env)
    # The release step, as the Procfile runs it.
    for args in (["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    logging.getLogger("tasks_app").setLevel(logging.WARNING)  # the report, not each run
    log_dir = (
        Path(os.environ.get("TASKS_VAR_DIR", ROOT / "var")) / "soak" / f"{seed}-{int(time.time())}"
    )
    soak = Soak(
        seed=seed,
        minutes=minutes,
        log_dir=log_dir,
        env=env,
        faults=faults,
        service_restart=services.restart if services is not None else None,
        say=lambda text: print(text, flush=True),
    )
    report = soak.run()
    out = log_dir.parent / f"{seed}.json"
    out.write_text(json.dumps(report, indent=2, default=str))
    print(summary(report))
    print(f"soak: report {out}, process logs {log_dir}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
