"""The OpenAPI document: valid, complete, served to logged-in users, and fuzzed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import override_settings
from jsonschema import Draft4Validator
from rest_framework.test import APIClient
from schemathesis.specs.openapi.definitions import OPENAPI_30

from tasks_app import services
from tasks_app.api.schema import RUN_OPERATIONS, TASK_OPERATIONS
from tasks_app.services.tokens import token_create
from tests.shared import STATIC

pytestmark = pytest.mark.django_db


def schema(api: APIClient) -> dict:
    response = api.get("/api/schema", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_openapi_document_validates_and_covers_the_contract(api: APIClient) -> None:
    doc = schema(api)
    errors = [
        e.message for e in Draft4Validator(OPENAPI_30).iter_errors(doc)
    ]  # the OpenAPI 3.0 meta-schema
    assert errors == []
    paths = doc["paths"]
    for path, verbs in {
        "/api/tasks": {"get", "post"},
        "/api/tasks/{task_id}": {"get", "put", "patch", "delete"},
        "/api/tasks/{task_id}/execute": {"post"},
        "/api/tasks/{task_id}/schedule": {"post"},
        "/api/tasks/{task_id}/pause": {"post"},
        "/api/tasks/{task_id}/resume": {"post"},
        "/api/tasks/{task_id}/backfill": {"post"},
        "/api/tasks/{task_id}/runs": {"get"},
        "/api/runs": {"get"},
        "/api/runs/{run_id}": {"get"},
        "/api/runs/{run_id}/cancel": {"post"},
        "/api/runs/{run_id}/retry": {"post"},
        "/api/actions": {"get"},
        "/api/health": {"get"},
    }.items():
        assert verbs <= set(paths[path]), path
    create = paths["/api/tasks"]["post"]
    assert {"201", "400", "401", "403", "409", "413"} <= set(create["responses"])
    assert create["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/Error"
    )
    assert paths["/api/runs/{run_id}/cancel"]["post"]["responses"]["409"]
    assert "delay_seconds" in doc["components"]["schemas"]["TaskCreateRequest"]["properties"]


def test_swagger_ui_is_served_without_a_cdn_or_inline_script(api: APIClient) -> None:
    # Plain static storage: this test must not depend on a prior `collectstatic` (make test
    # runs one; the manifest storage then serves the same sidecar files).
    with override_settings(STORAGES=STATIC):
        response = api.get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page
    assert "cdn.jsdelivr.net" not in page and "unpkg.com" not in page
    # Every script is a file from this origin (the CSP allows no other), the start-up one too.
    scripts = re.findall(r"<script([^>]*)>", page)
    assert scripts and all('src="/' in attrs for attrs in scripts), scripts
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline' " not in policy.split("style-src")[0]
    start = re.search(r'<script src="(/api/docs\?[^"]*script=[^"]*)"', page)
    assert start is not None
    script = api.get(start.group(1).replace("&amp;", "&"))
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert "/api/schema" in script.content.decode()


# Operations whose bodies carry rules a JSON Schema cannot state (a registered action, a
# payload fitting that action's own schema — a task's, or a run's own on execute —, cron
# syntax, an IANA zone, "delay_seconds or run_at, not both", end after start): a
# schema-valid body may still be a 400 there, and only there. Everywhere else a
# schema-valid request must be accepted.
BUSINESS_RULES = [
    "tasks_execute",
    "tasks_create",
    "tasks_update",
    "tasks_partial_update",
    "tasks_schedule",
    "tasks_backfill",
]
SEEDED_TASK = "fuzz-seed"
# The operations on one queue: on a configured queue (TASKS_QUEUES, which the schema cannot
# list), so they reach their logic instead of answering 400 to random names.
QUEUE_OPERATIONS = ["queues_pause", "queues_resume"]


def schemathesis_config(run_id: str) -> str:
    """Checks' expectations, and a task and a run that exist, so the operations on one
    task or run reach their logic instead of answering 404 to random ids (DELETE keeps
    random ids: it would remove the seed)."""
    task_ops = ", ".join(f'"{op}"' for op in TASK_OPERATIONS if op != "tasks_destroy")
    run_ops = ", ".join(f'"{op}"' for op in RUN_OPERATIONS)
    queue_ops = ", ".join(f'"{op}"' for op in QUEUE_OPERATIONS)
    return f"""
[[operations]]
include-path = "/api/health"
# 503 is health's documented answer when a dependency is down (no worker runs here).
checks.not_a_server_error.expected-statuses = ["2xx", "4xx", "503"]

[[operations]]
include-operation-id = [{", ".join(f'"{op}"' for op in BUSINESS_RULES)}]
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]

[[operations]]
include-operation-id = [{task_ops}]
parameters = {{ "path.task_id" = "{SEEDED_TASK}" }}

[[operations]]
include-operation-id = [{run_ops}]
parameters = {{ "path.run_id" = "{run_id}" }}

[[operations]]
include-operation-id = [{queue_ops}]
parameters = {{ "path.queue" = "{settings.CELERY_TASK_DEFAULT_QUEUE}" }}
"""


@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_failure_with_all_checks(live_server, operator, tmp_path) -> None:
    """Schemathesis (examples, coverage, fuzzing and stateful phases, every check: server
    errors, status codes, content types, response schemas and headers, positive and
    negative data, auth, unsupported methods, use after free, ...) finds nothing."""
    operator.is_staff = True  # a staff token: what the admin's staff hold, all task and run perms
    operator.save()
    # ... and the queues' pause, so those operations are tested too, not refused.
    operator.user_permissions.add(
        *Permission.objects.filter(
            codename__endswith="_queuepause", content_type__app_label="tasks_app"
        )
    )
    token = token_create(user=operator).token
    task = services.task_create(id=SEEDED_TASK, action="noop")
    run = services.task_schedule_once(task=task, delay_seconds=3600)
    config = tmp_path / "schemathesis.toml"
    config.write_text(schemathesis_config(str(run.id)))
    rates = {"user": "1000000/minute", "anon": "1000000/minute"}
    with override_settings(REST_FRAMEWORK={**settings_rest(), "DEFAULT_THROTTLE_RATES": rates}):
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("st")),
                "--config-file",
                str(config),
                "run",
                f"{live_server.url}/api/schema?format=json",
                "--header",
                f"Authorization: Token {token}",
                "--checks",
                "all",
                "--max-examples",
                "3",  # per operation and phase
                "--seed",
                "20261130",
                "--workers",
                "2",
                "--generation-database",
                "none",
                "--continue-on-failure",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=540,
            cwd=tmp_path,  # its cache directory (.schemathesis/) goes there, not in the checkout
        )
    output = done.stdout + done.stderr
    print(output[-3000:])
    assert done.returncode == 0, output[-8000:]
    generated, passed = map(int, re.search(r"(\d+) generated, (\d+) passed", output).groups())
    assert generated == passed and generated >= 1000, output[-3000:]
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in output, output[-3000:]


def settings_rest() -> dict:
    from django.conf import settings

    return dict(settings.REST_FRAMEWORK)
