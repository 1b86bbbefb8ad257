"""A client generated from ``/api/schema`` drives the seed workflow against a live server.

The client is generated at test time by ``openapi-python-client`` (a standard generator,
from PyPI) from the document the running server publishes, then imported and used as a
user would: create a task, schedule it with a delay, poll the run to completion, list runs
with a filter, cancel a pending run, read the dead-run list. The generated code parses
every answer with the documented schema of its status code, and ``raise_on_unexpected_
status`` makes any status the document does not list an error: if the document and the
API disagree (a list documented as an array, an undocumented 409, an error body of another
shape), this test fails.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tasks_app.services.tokens import token_create
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PACKAGE = "generated_tasks_client"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


def generate_client(schema_url: str, token: str, out: Path) -> ModuleType:
    """Fetch the live document, generate a client package into ``out`` and import it."""
    document = httpx.get(schema_url, headers={"Authorization": f"Token {token}"}, timeout=30)
    assert document.status_code == 200, document.text
    (out / "openapi.json").write_text(document.text)
    # No post hooks: the default ones run ruff on the output, which this test does not need.
    (out / "config.json").write_text(
        json.dumps({"post_hooks": [], "package_name_override": PACKAGE})
    )
    done = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(out / "openapi.json"),
            "--config",
            str(out / "config.json"),
            "--meta",
            "none",
            "--output-path",
            str(out / PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The generator warns about every part of the document it could not turn into code.
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(out))
    return importlib.import_module(PACKAGE)


@pytest.fixture
def generated(live_server: Any, operator: Any, tmp_path: Path) -> Iterator[Any]:
    token = token_create(user=operator).token
    package = generate_client(f"{live_server.url}/api/schema?format=json", token, tmp_path)
    client = package.AuthenticatedClient(
        base_url=live_server.url,
        token=token,
        prefix="Token",
        raise_on_unexpected_status=True,
        timeout=httpx.Timeout(30),
        # One request per connection: the live server closes its database connection when
        # a client connection ends, so none is left open when the test database is dropped.
        headers={"Connection": "close"},
    )
    yield package, client
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def api(name: str) -> ModuleType:
    """One generated operation module, e.g. ``api("tasks.tasks_create")``."""
    return importlib.import_module(f"{PACKAGE}.api.{name}")


def test_a_generated_client_drives_the_seed_workflow(generated: Any, worker: Any) -> None:
    package, client = generated
    models = importlib.import_module(f"{PACKAGE}.models")

    # Create.
    created = api("tasks.tasks_create").sync_detailed(
        client=client,
        body=models.TaskCreateRequest(
            id="client-1",
            name="From a generated client",
            action="echo",
            payload=models.TaskCreateRequestPayload.from_dict({"message": "hello"}),
        ),
    )
    assert created.status_code == 201, created.content
    task = created.parsed
    assert isinstance(task, models.TaskCreated)
    assert (task.id, task.status, task.run) == ("client-1", models.TaskStatusEnum.CREATED, None)
    assert task.payload.to_dict() == {"message": "hello"}

    # Schedule one run after a delay; the answer is the run, still pending.
    run = api("tasks.tasks_schedule").sync(
        "client-1", client=client, body=models.ScheduleRequest(delay_seconds=1.0)
    )
    assert isinstance(run, models.RunOutput), run
    assert run.trigger == models.TriggerEnum.DELAY and run.status == models.RunStatusEnum.PENDING

    # Poll the run until it has an outcome (the worker runs it once it is due).
    def finished() -> Any:
        got = api("runs.runs_retrieve").sync(str(run.id), client=client)
        assert isinstance(got, models.RunDetail), got
        return got if got.outcome is not None else None

    done = wait_until(finished, timeout=30, interval=0.1, message="the scheduled run to finish")
    assert done.outcome == models.OutcomeEnum.COMPLETED, done.error
    assert done.status == models.RunStatusEnum.COMPLETED
    assert [a.id for a in done.attempts] == [run.id] and done.outcome_attempt == run.id
    assert done.output == "hello" and done.started_at >= done.due_at and done.lateness_ms >= 0

    # List runs with a filter: the envelope parses, and the filter filters.
    page = api("runs.runs_list").sync(
        client=client, task="client-1", status=[models.RunsListStatusItem.COMPLETED]
    )
    assert isinstance(page, models.PaginatedRunOutputList), page
    assert [r.id for r in page.results] == [run.id]  # keyset pages: no count
    assert page.next_ is None and page.previous is None
    none = api("runs.runs_list").sync(
        client=client, task="client-1", status=[models.RunsListStatusItem.FAILED]
    )
    assert none.results == []
    tasks = api("tasks.tasks_list").sync(client=client, search="client")
    assert [t.id for t in tasks.results] == ["client-1"]

    # Cancel a pending run.
    later = api("tasks.tasks_schedule").sync(
        "client-1", client=client, body=models.ScheduleRequest(delay_seconds=600.0)
    )
    assert later.status == models.RunStatusEnum.PENDING
    cancelled = api("runs.runs_cancel").sync(str(later.id), client=client)
    assert (
        isinstance(cancelled, models.RunOutput)
        and cancelled.status == models.RunStatusEnum.CANCELLED
    )
    again = api("runs.runs_cancel").sync_detailed(str(later.id), client=client)
    assert again.status_code == 409 and isinstance(again.parsed, models.Error)
    assert "cancelled" in again.parsed.error

    # A run that fails for good shows in the dead-run list.
    api("tasks.tasks_create").sync(
        client=client,
        body=models.TaskCreateRequest(
            id="client-fails",
            action="fail",
            payload=models.TaskCreateRequestPayload.from_dict({"message": "boom"}),
            max_retries=0,
        ),
    )
    failing = api("tasks.tasks_execute").sync("client-fails", client=client)
    assert isinstance(failing, models.RunOutput) and failing.trigger == models.TriggerEnum.API
    wait_until(
        lambda: (
            api("runs.runs_retrieve").sync(str(failing.id), client=client).status
            == models.RunStatusEnum.FAILED
        ),
        timeout=30,
        message="the failing run to fail",
    )
    dead = api("runs.runs_dead_list").sync(client=client)
    assert isinstance(dead, models.PaginatedRunOutputList)
    assert [(r.id, r.status) for r in dead.results] == [(failing.id, models.RunStatusEnum.FAILED)]
    assert "boom" in dead.results[0].error


def test_generated_client_parses_documented_errors(generated: Any) -> None:
    package, client = generated
    models = importlib.import_module(f"{PACKAGE}.models")

    bad = api("tasks.tasks_create").sync_detailed(
        client=client,
        body=models.TaskCreateRequest(
            id="bad", action="echo", payload=models.TaskCreateRequestPayload.from_dict({})
        ),
    )
    assert bad.status_code == 400 and isinstance(bad.parsed, models.Error)
    assert "payload" in bad.parsed.detail.to_dict()

    missing = api("runs.runs_retrieve").sync_detailed(str(uuid.uuid4()), client=client)
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Error)

    past_the_end = api("tasks.tasks_list").sync_detailed(client=client, page=7)
    assert past_the_end.status_code == 404 and isinstance(past_the_end.parsed, models.Error)

    anonymous = package.Client(
        base_url=client._base_url, raise_on_unexpected_status=True, headers={"Connection": "close"}
    )
    refused = api("tasks.tasks_list").sync_detailed(client=anonymous)
    assert refused.status_code == 401 and isinstance(refused.parsed, models.Error)
