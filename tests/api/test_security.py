"""The security pass: production settings, the secret key, and no shell anywhere.

Settings are tested in fresh subprocesses with a clean environment, exactly as a deployment
would start (nothing leaks in from the test runner's environment).
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from tests.processes import ROOT
from tests.shared import manage

PRODUCTION = {
    "DATABASE_URL": "postgres://app@db.internal:5432/tasks",
    "DJANGO_ALLOWED_HOSTS": "tasks.example.com",
    "CELERY_BROKER_URL": "amqp://app@mq.internal:5672//",
}


def test_check_deploy_passes_with_the_production_environment() -> None:
    done = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        **PRODUCTION,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_catches_a_weakened_deployment() -> None:
    # The same check fails when HTTPS hardening is switched off or the key is weak, so the
    # passing test above is measuring something.
    no_https = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECURE_SSL="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        **PRODUCTION,
    )
    assert no_https.returncode != 0
    assert "security.W008" in no_https.stderr and "security.W004" in no_https.stderr
    weak_key = manage(
        "check", "--deploy", "--fail-level", "WARNING", DJANGO_SECRET_KEY="short", **PRODUCTION
    )
    assert weak_key.returncode != 0 and "security.W009" in weak_key.stderr


PROXY_PROBE = (
    "from django.conf import settings; "
    "print(settings.SECURE_PROXY_SSL_HEADER, settings.REST_FRAMEWORK['NUM_PROXIES'])"
)


def test_forwarded_headers_are_believed_only_behind_a_declared_proxy() -> None:
    key = secrets.token_urlsafe(50)
    alone = manage("shell", "-v", "0", "-c", PROXY_PROBE, DJANGO_SECRET_KEY=key, **PRODUCTION)
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.split() == ["None", "0"]  # X-Forwarded-Proto/-For ignored
    behind = manage(
        "shell",
        "-v",
        "0",
        "-c",
        PROXY_PROBE,
        DJANGO_SECRET_KEY=key,
        TASKS_TRUSTED_PROXIES="1",
        **PRODUCTION,
    )
    assert behind.stdout.split() == ["('HTTP_X_FORWARDED_PROTO',", "'https')", "1"]
    # The PaaS set-up (one router in front) passes the deployment check as well.
    check = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=key,
        TASKS_TRUSTED_PROXIES="1",
        **PRODUCTION,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    bad = manage("check", DJANGO_SECRET_KEY=key, TASKS_TRUSTED_PROXIES="-1", **PRODUCTION)
    assert bad.returncode != 0 and "TASKS_TRUSTED_PROXIES must be a whole number >= 0" in bad.stderr


def test_every_page_carries_the_content_security_policy(client, admin_client) -> None:
    pages = [(client, "/admin/login/"), (client, "/api/auth/login/")] + [
        (admin_client, path) for path in ("/admin/", "/admin/tasks_app/task/add/", "/api/docs")
    ]
    for browser, path in pages:
        response = browser.get(path)
        assert response.status_code == 200, path
        # The header's directives come in no fixed order: compared by name.
        policy = dict(
            d.strip().split(" ", 1)
            for d in response["Content-Security-Policy"].split(";")
            if d.strip()
        )
        assert policy["default-src"] == policy["script-src"] == "'self'", (path, policy)
        assert policy["frame-ancestors"] == policy["object-src"] == "'none'", (path, policy)


def test_refuses_to_start_without_a_secret_key() -> None:
    done = manage("check", **PRODUCTION)
    assert done.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in done.stderr
    assert done.stdout == ""


SHELL_PATTERNS = [
    re.compile(r"shell\s*=\s*True"),
    re.compile(r"\bos\.(system|popen|exec\w*|spawn\w*)\s*\("),
    re.compile(r"""["'](/bin/)?(ba|z|da)?sh["']\s*,\s*["']-c["']"""),
    re.compile(r"""["'](/bin/)?(ba|z|da)?sh -c"""),
    re.compile(r"\bcommands\.getoutput|\bsubprocess\.getoutput|\bsubprocess\.getstatusoutput"),
]


def shipped_python_files() -> list[Path]:
    files = [ROOT / "manage.py"]
    for package in ("project", "tasks_app"):
        files += [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    return files


def test_no_shell_anywhere_in_shipped_code() -> None:
    files = shipped_python_files()
    assert any(p.name == "program.py" for p in files)  # the scan sees the exec action
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if any(pattern.search(line) for pattern in SHELL_PATTERNS)
    ]
    assert hits == []


def test_celery_accepts_json_only() -> None:
    from project.celery import app

    assert list(app.conf.accept_content) == ["json"]
    assert app.conf.task_serializer == app.conf.result_serializer == "json"
