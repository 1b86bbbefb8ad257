"""Every operation × every way in (admin pages, buttons and bulk actions; the API, HEAD and
OPTIONS included; the CLI with ``--as``) × users of graded permissions: they all agree.

Each cell does the operation as the user and reads the outcome from what a user sees: for a
write, whether the rows changed (a task, a run, a name, a pause); for a read, whether the
page or the answer came back. A refusal must also be told (API 403 naming the permission,
CLI one line and exit status 1, admin 403 or an error message) and write nothing. The
expected grid is written out below, not derived from the permission table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from io import StringIO
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import QueuePause, Run, RunStatus, Task
from tasks_app.worker import run_execution
from tests.shared import form, queued_run
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

VIEW = ["view_task", "view_run"]
# The six users. Besides "none" and the superuser, each holds the two view permissions (so
# that what differs is the one write permission named) — "change_task" is a task editor
# (add, change, delete tasks) who may not create runs.
GRADES: dict[str, list[str] | None] = {
    "none": [],
    "view": VIEW,
    "change_task": [*VIEW, "add_task", "change_task", "delete_task"],
    "change_run": [*VIEW, "change_run"],
    "add_run": [*VIEW, "add_run"],
    "superuser": None,
}
READERS = {"view", "change_task", "change_run", "add_run", "superuser"}
# Who may do each operation: what every entry point must agree on.
ALLOWED: dict[str, set[str]] = {
    "list": READERS,
    "get": READERS,
    "preview": READERS,
    # The task form's helpers as you type authorize as the form's save would (add or change,
    # and the action's own permission): a viewer gets nothing checked, nothing imported.
    "form_preview": {"change_task", "superuser"},
    "check": {"change_task", "superuser"},
    "actions": READERS,
    "overview": READERS,
    "runs": READERS,
    "show": READERS,
    "wait": READERS,
    "task_runs": READERS,
    "create": {"change_task", "superuser"},
    "create_with_run": {"superuser"},  # a delay of 0 creates a run: add_run too
    "update": {"change_task", "superuser"},
    "update_to_once": {"superuser"},  # a once schedule creates its run: add_run too
    # A recurring schedule set or changed makes runs come into being: add_run too.
    "create_recurring": {"superuser"},
    "update_to_recurring": {"superuser"},
    "delete": {"superuser"},  # the task's runs go with it: delete_run too
    "duplicate": {"change_task", "superuser"},
    "duplicate_once": {"superuser"},  # the copy of a once task gets its own run
    "pause": {"change_task", "superuser"},
    "resume": {"change_task", "superuser"},
    "execute": {"add_run", "superuser"},
    "schedule": {"superuser"},  # change_task and add_run
    "backfill": {"add_run", "superuser"},
    "cancel": {"change_run", "superuser"},
    "cancel_running": {"change_run", "superuser"},  # asks it to stop: the same permission
    "retry": {"add_run", "superuser"},
    "prune": {"superuser"},
    # A queue's pause has permissions of its own (view/add/delete_queuepause), which none of
    # the task and run grades hold.
    "queues": {"superuser"},
    "pause-queue": {"superuser"},
    "resume-queue": {"superuser"},
}


HELD_QUEUE = "held-queue"


@pytest.fixture(autouse=True)
def _quick_health(settings: Any) -> None:
    settings.TASKS_HEALTH_WORKER_TIMEOUT_SECONDS = 0.2
    settings.TASKS_QUEUES = [settings.CELERY_TASK_DEFAULT_QUEUE, HELD_QUEUE]


def make_user(grade: str) -> User:
    codenames = GRADES[grade]
    if codenames is None:
        return User.objects.create_superuser(grade, f"{grade}@example.com", None)
    user = User.objects.create_user(username=grade, password=None, is_staff=True)
    found = Permission.objects.filter(content_type__app_label="tasks_app", codename__in=codenames)
    assert found.count() == len(codenames)
    user.user_permissions.set(found)
    return User.objects.get(pk=user.pk)


@dataclass
class World:
    """What each cell acts on, made fresh for each cell by the trusted operator."""

    task: Task
    paused: Task
    recurring: Task
    once: Task
    pending: Run
    failed: Run
    old: Run
    future: str = field(default="")
    running: Run | None = None
    paused_queue: str = ""


def world() -> World:
    task = services.task_create(id="daily", action="echo", payload={"message": "hi"})
    paused = services.task_create(id="held", action="noop")
    services.task_pause(task=paused, note="held for the test")
    recurring = services.task_create(
        id="hourly", action="noop", schedule_type="interval", interval_seconds=3600
    )
    future = timezone.now() + timedelta(days=2)
    once = services.task_create(id="once", action="noop", schedule_type="once", run_at=future)
    pending = services.task_schedule_once(task=task, delay_seconds=3600)
    failed = services.task_execute(task=task)
    run_set(failed.pk, status=RunStatus.FAILED, finished_at=timezone.now())
    old = services.task_execute(task=task)
    long_ago = timezone.now() - timedelta(days=400)
    run_set(
        old.pk,
        status=RunStatus.COMPLETED,
        finished_at=long_ago,
        created_at=long_ago,
        due_at=long_ago,
    )
    running = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w@host")
    # A second configured queue, paused: the default one stays free for the pause cells.
    services.queue_pause(queue=HELD_QUEUE, note="held for the test")
    return World(
        task, paused, recurring, once, pending, failed, old, future.isoformat(), running, HELD_QUEUE
    )


def runs() -> int:
    return Run.objects.count()


def paused_queues() -> set[str]:
    return set(QueuePause.objects.values_list("queue", flat=True))


def name(task_id: str) -> str:
    return Task.objects.get(pk=task_id).name


def is_paused(task_id: str) -> bool:
    return Task.objects.get(pk=task_id).paused


def schedule(task_id: str) -> tuple[Any, ...]:
    task = Task.objects.get(pk=task_id)
    return (task.schedule_type, task.interval_seconds, task.cron)


def status(run: Run) -> str:
    return Run.objects.get(pk=run.pk).status


def asked_to_stop(run: Run | None) -> bool:
    assert run is not None
    return Run.objects.get(pk=run.pk).cancel_requested_at is not None


# -- the ways in ---------------------------------------------------------------------------


class Admin:
    def __init__(self, user: User) -> None:
        self.client = Client()
        self.client.force_login(user)

    def page(self, url: str, **query: str) -> bool:
        code = self.client.get(url, query).status_code
        assert code in (200, 403), (url, code)
        return code == 200

    def post(self, url: str, data: dict[str, Any] | None = None) -> None:
        response = self.client.post(url, data or {})
        # 302: done, or refused with an error message; 200: a form with its errors; 403.
        assert response.status_code in (200, 302, 403), (url, response.status_code)
        if response.status_code == 302:
            self.client.get(response["Location"])  # shows the messages, clears them

    def button(self, name: str, object_id: Any, data: dict[str, Any] | None = None) -> None:
        self.post(reverse(f"admin:tasks_app_{name}", args=[object_id]), data)

    def bulk(self, model: str, action: str, *ids: Any) -> None:
        url = reverse(f"admin:tasks_app_{model}_changelist")
        self.post(url, {"action": action, "_selected_action": [str(i) for i in ids]})

    def checked(self, action: str, payload: Any, **query: str) -> bool:
        """Whether the payload check answered (200 with its verdict) rather than 403."""
        url = reverse("admin:tasks_app_task_payload_check")
        response = self.client.post(
            f"{url}?{urlencode(query)}" if query else url,
            {"action": action, "payload": json.dumps(payload)},
        )
        assert response.status_code in (200, 403), response.content
        return response.status_code == 200

    def save(self, task: Task, **changes: str) -> None:
        data = form(id=task.pk, action=task.action, payload=json.dumps(task.payload))
        data.update(changes)
        self.post(reverse("admin:tasks_app_task_change", args=[task.pk]), data)


class Api:
    def __init__(self, user: User) -> None:
        self.client = APIClient()
        self.client.force_authenticate(user)

    def call(self, method: str, path: str, body: Any = None) -> bool:
        response = getattr(self.client, method)(path, body, format="json")
        if response.status_code == 403:
            if method != "head":
                assert "permission" in response.json()["error"], response.content
            return False
        assert response.status_code < 300, (method, path, response.content)
        return True


class Cli:
    def __init__(self, user: User) -> None:
        self.username = user.username

    def call(self, *args: str) -> bool:
        try:
            call_command("tasks", *args, "--as", self.username, stdout=StringIO())
        except CommandError as exc:
            assert exc.returncode == 1, exc
            assert str(exc).startswith("permission denied: "), exc
            assert "\n" not in str(exc)
            return False
        return True


def _pk(run: Run | None) -> Any:
    assert run is not None
    return run.pk


def changed(before: Callable[[], Any], act: Callable[[], Any]) -> bool:
    """Whether ``act`` changed what ``before`` reads."""
    first = before()
    act()
    return bool(before() != first)


# -- the cells: operation → {way in: do it as the user, answer whether it happened} --------

Cell = Callable[[User, World], bool]


def _admin(user: User) -> Admin:
    return Admin(user)


CELLS: dict[str, dict[str, Cell]] = {
    "list": {
        "admin": lambda u, w: _admin(u).page(reverse("admin:tasks_app_task_changelist")),
        "api": lambda u, w: Api(u).call("get", "/api/tasks"),
        "api-head": lambda u, w: Api(u).call("head", "/api/tasks"),
        "api-options": lambda u, w: Api(u).call("options", "/api/tasks"),
        "cli": lambda u, w: Cli(u).call("list"),
    },
    "get": {
        "admin": lambda u, w: _admin(u).page(
            reverse("admin:tasks_app_task_change", args=[w.task.pk])
        ),
        "api": lambda u, w: Api(u).call("get", f"/api/tasks/{w.task.pk}"),
        "api-head": lambda u, w: Api(u).call("head", f"/api/tasks/{w.task.pk}"),
        "cli": lambda u, w: Cli(u).call("get", w.task.pk),
    },
    "preview": {
        "admin": lambda u, w: _admin(u).page(
            reverse("admin:tasks_app_task_change", args=[w.recurring.pk])
        ),
        "api": lambda u, w: Api(u).call("get", f"/api/tasks/{w.recurring.pk}/preview"),
        "cli": lambda u, w: Cli(u).call("preview", w.recurring.pk),
    },
    "form_preview": {
        "admin": lambda u, w: _admin(u).page(
            reverse("admin:tasks_app_task_preview"),
            schedule_type="cron",
            cron="0 9 * * *",
            timezone="UTC",
        ),
    },
    "check": {
        "admin-add": lambda u, w: _admin(u).checked("echo", {"message": 1}),
        "admin-change": lambda u, w: _admin(u).checked("echo", {"message": 1}, task=w.task.pk),
    },
    "actions": {
        "api": lambda u, w: Api(u).call("get", "/api/actions"),
        "api-head": lambda u, w: Api(u).call("head", "/api/actions"),
    },
    "overview": {
        "admin": lambda u, w: _admin(u).page(reverse("tasks-overview")),
        "admin-health": lambda u, w: _admin(u).page("/admin/overview/health/"),
    },
    "runs": {
        "admin": lambda u, w: _admin(u).page(reverse("admin:tasks_app_run_changelist")),
        "admin-page": lambda u, w: _admin(u).page(
            reverse("admin:tasks_app_run_change", args=[w.failed.pk])
        ),
        "api": lambda u, w: Api(u).call("get", "/api/runs"),
        "api-one": lambda u, w: Api(u).call("get", f"/api/runs/{w.failed.pk}"),
        "api-dead": lambda u, w: Api(u).call("head", "/api/runs/dead"),
        "cli": lambda u, w: Cli(u).call("runs"),
    },
    "show": {"cli": lambda u, w: Cli(u).call("show", str(w.failed.pk))},
    "wait": {"cli": lambda u, w: Cli(u).call("wait", str(w.old.pk))},  # completed: exit 0
    "task_runs": {
        "admin": lambda u, w: _admin(u).page(
            reverse("admin:tasks_app_run_changelist"), task__id__exact=w.task.pk
        ),
        "api": lambda u, w: Api(u).call("get", f"/api/tasks/{w.task.pk}/runs"),
        "api-head": lambda u, w: Api(u).call("head", f"/api/tasks/{w.task.pk}/runs?status=failed"),
        "api-options": lambda u, w: Api(u).call("options", f"/api/tasks/{w.task.pk}/runs"),
        "cli": lambda u, w: Cli(u).call("runs", w.task.pk),
    },
    "create": {
        "admin": lambda u, w: changed(
            Task.objects.count,
            lambda: _admin(u).post(reverse("admin:tasks_app_task_add"), form(id="made")),
        ),
        "api": lambda u, w: changed(
            Task.objects.count,
            lambda: Api(u).call("post", "/api/tasks", {"id": "made", "action": "noop"}),
        ),
        "cli": lambda u, w: changed(
            Task.objects.count, lambda: Cli(u).call("create", "made", "--action", "noop")
        ),
    },
    "create_with_run": {
        "admin": lambda u, w: changed(
            runs,
            lambda: _admin(u).post(
                reverse("admin:tasks_app_task_add"), form(id="made", delay_seconds="0")
            ),
        ),
        "api": lambda u, w: changed(
            runs,
            lambda: Api(u).call(
                "post", "/api/tasks", {"id": "made", "action": "noop", "delay_seconds": 0}
            ),
        ),
        "cli": lambda u, w: changed(
            runs, lambda: Cli(u).call("create", "made", "--action", "noop", "--in", "0s")
        ),
    },
    "update": {
        "admin": lambda u, w: changed(
            lambda: name(w.task.pk), lambda: _admin(u).save(w.task, name="renamed")
        ),
        "api": lambda u, w: changed(
            lambda: name(w.task.pk),
            lambda: Api(u).call("patch", f"/api/tasks/{w.task.pk}", {"name": "renamed"}),
        ),
        "api-put": lambda u, w: changed(
            lambda: name(w.task.pk),
            lambda: Api(u).call(
                "put",
                f"/api/tasks/{w.task.pk}",
                {"name": "renamed", "action": "echo", "payload": {"message": "hi"}},
            ),
        ),
        "cli": lambda u, w: changed(
            lambda: name(w.task.pk), lambda: Cli(u).call("update", w.task.pk, "--name", "renamed")
        ),
    },
    "update_to_once": {
        "admin": lambda u, w: changed(
            runs,
            lambda: _admin(u).save(
                w.task,
                schedule_type="once",
                run_at_0=w.future[:10],
                run_at_1=w.future[11:19],
            ),
        ),
        "api": lambda u, w: changed(
            runs,
            lambda: Api(u).call(
                "patch",
                f"/api/tasks/{w.task.pk}",
                {"schedule_type": "once", "run_at": w.future},
            ),
        ),
    },
    "create_recurring": {
        "admin": lambda u, w: changed(
            Task.objects.count,
            lambda: _admin(u).post(
                reverse("admin:tasks_app_task_add"),
                form(id="made", schedule_type="interval", interval_seconds="1"),
            ),
        ),
        "api": lambda u, w: changed(
            Task.objects.count,
            lambda: Api(u).call(
                "post",
                "/api/tasks",
                {
                    "id": "made",
                    "action": "noop",
                    "schedule_type": "interval",
                    "interval_seconds": 1,
                },
            ),
        ),
        "api-cron": lambda u, w: changed(
            Task.objects.count,
            lambda: Api(u).call(
                "post",
                "/api/tasks",
                {"id": "made", "action": "noop", "schedule_type": "cron", "cron": "* * * * *"},
            ),
        ),
        "cli": lambda u, w: changed(
            Task.objects.count,
            lambda: Cli(u).call("create", "made", "--action", "noop", "--every", "1s"),
        ),
    },
    "update_to_recurring": {
        "admin": lambda u, w: changed(
            lambda: schedule(w.task.pk),
            lambda: _admin(u).save(w.task, schedule_type="interval", interval_seconds="1"),
        ),
        "admin-faster": lambda u, w: changed(
            lambda: schedule(w.recurring.pk),
            lambda: _admin(u).save(w.recurring, schedule_type="interval", interval_seconds="1"),
        ),
        "api": lambda u, w: changed(
            lambda: schedule(w.task.pk),
            lambda: Api(u).call(
                "patch",
                f"/api/tasks/{w.task.pk}",
                {"schedule_type": "interval", "interval_seconds": 1},
            ),
        ),
        "api-faster": lambda u, w: changed(
            lambda: schedule(w.recurring.pk),
            lambda: Api(u).call("patch", f"/api/tasks/{w.recurring.pk}", {"interval_seconds": 1}),
        ),
        "api-put": lambda u, w: changed(
            lambda: schedule(w.task.pk),
            lambda: Api(u).call(
                "put",
                f"/api/tasks/{w.task.pk}",
                {
                    "action": "echo",
                    "payload": {"message": "hi"},
                    "schedule_type": "cron",
                    "cron": "* * * * *",
                },
            ),
        ),
        "api-schedule": lambda u, w: changed(
            lambda: schedule(w.task.pk),
            lambda: Api(u).call(
                "post",
                f"/api/tasks/{w.task.pk}/schedule",
                {"schedule_type": "interval", "interval_seconds": 1},
            ),
        ),
        "cli": lambda u, w: changed(
            lambda: schedule(w.task.pk), lambda: Cli(u).call("update", w.task.pk, "--every", "1s")
        ),
        "cli-schedule": lambda u, w: changed(
            lambda: schedule(w.task.pk),
            lambda: Cli(u).call("schedule", w.task.pk, "--cron", "* * * * *"),
        ),
    },
    "delete": {
        "admin": lambda u, w: changed(
            Task.objects.count,
            lambda: _admin(u).post(
                reverse("admin:tasks_app_task_delete", args=[w.task.pk]), {"post": "yes"}
            ),
        ),
        "admin-action": lambda u, w: changed(
            Task.objects.count,
            lambda: _admin(u).post(
                reverse("admin:tasks_app_task_changelist"),
                {"action": "delete_selected", "_selected_action": [w.task.pk], "post": "yes"},
            ),
        ),
        "api": lambda u, w: changed(
            Task.objects.count, lambda: Api(u).call("delete", f"/api/tasks/{w.task.pk}")
        ),
        "cli": lambda u, w: changed(Task.objects.count, lambda: Cli(u).call("delete", w.task.pk)),
    },
    "duplicate": {
        "admin": lambda u, w: changed(
            Task.objects.count, lambda: _admin(u).button("task_duplicate", w.task.pk)
        ),
    },
    "duplicate_once": {
        "admin": lambda u, w: changed(runs, lambda: _admin(u).button("task_duplicate", w.once.pk)),
    },
    "pause": {
        "admin": lambda u, w: changed(
            lambda: is_paused(w.task.pk),
            lambda: _admin(u).button("task_pause", w.task.pk, {"note": "why"}),
        ),
        "admin-action": lambda u, w: changed(
            lambda: is_paused(w.task.pk), lambda: _admin(u).bulk("task", "pause", w.task.pk)
        ),
        "api": lambda u, w: changed(
            lambda: is_paused(w.task.pk),
            lambda: Api(u).call("post", f"/api/tasks/{w.task.pk}/pause", {"note": "why"}),
        ),
        "cli": lambda u, w: changed(
            lambda: is_paused(w.task.pk), lambda: Cli(u).call("pause", w.task.pk)
        ),
    },
    "resume": {
        "admin": lambda u, w: changed(
            lambda: is_paused(w.paused.pk), lambda: _admin(u).button("task_resume", w.paused.pk)
        ),
        "admin-action": lambda u, w: changed(
            lambda: is_paused(w.paused.pk), lambda: _admin(u).bulk("task", "resume", w.paused.pk)
        ),
        "api": lambda u, w: changed(
            lambda: is_paused(w.paused.pk),
            lambda: Api(u).call("post", f"/api/tasks/{w.paused.pk}/resume"),
        ),
        "cli": lambda u, w: changed(
            lambda: is_paused(w.paused.pk), lambda: Cli(u).call("resume", w.paused.pk)
        ),
    },
    "execute": {
        "admin": lambda u, w: changed(runs, lambda: _admin(u).button("task_run_now", w.task.pk)),
        "admin-action": lambda u, w: changed(
            runs, lambda: _admin(u).bulk("task", "run_now", w.task.pk)
        ),
        "api": lambda u, w: changed(
            runs, lambda: Api(u).call("post", f"/api/tasks/{w.task.pk}/execute")
        ),
        "api-options": lambda u, w: Api(u).call("options", f"/api/tasks/{w.task.pk}/execute"),
        "cli": lambda u, w: changed(runs, lambda: Cli(u).call("execute", w.task.pk)),
    },
    "schedule": {
        "admin": lambda u, w: changed(runs, lambda: _admin(u).save(w.task, delay_seconds="60")),
        "api": lambda u, w: changed(
            runs,
            lambda: Api(u).call("post", f"/api/tasks/{w.task.pk}/schedule", {"delay_seconds": 60}),
        ),
        "cli": lambda u, w: changed(
            runs, lambda: Cli(u).call("schedule", w.task.pk, "--in", "60s")
        ),
    },
    "backfill": {
        "api": lambda u, w: changed(
            runs,
            lambda: Api(u).call(
                "post",
                f"/api/tasks/{w.recurring.pk}/backfill",
                {
                    "start": (timezone.now() - timedelta(hours=3)).isoformat(),
                    "end": timezone.now().isoformat(),
                },
            ),
        ),
        "cli": lambda u, w: changed(
            runs,
            lambda: Cli(u).call(
                "backfill",
                w.recurring.pk,
                "--start",
                (timezone.now() - timedelta(hours=3)).isoformat(),
                "--end",
                timezone.now().isoformat(),
            ),
        ),
    },
    "cancel": {
        "admin": lambda u, w: changed(
            lambda: status(w.pending), lambda: _admin(u).button("run_cancel", w.pending.pk)
        ),
        "admin-action": lambda u, w: changed(
            lambda: status(w.pending), lambda: _admin(u).bulk("run", "cancel", w.pending.pk)
        ),
        "api": lambda u, w: changed(
            lambda: status(w.pending),
            lambda: Api(u).call("post", f"/api/runs/{w.pending.pk}/cancel"),
        ),
        "cli": lambda u, w: changed(
            lambda: status(w.pending), lambda: Cli(u).call("cancel", str(w.pending.pk))
        ),
    },
    "cancel_running": {
        "admin": lambda u, w: changed(
            lambda: asked_to_stop(w.running),
            lambda: _admin(u).button("run_cancel", _pk(w.running)),
        ),
        "admin-action": lambda u, w: changed(
            lambda: asked_to_stop(w.running),
            lambda: _admin(u).bulk("run", "cancel", _pk(w.running)),
        ),
        "api": lambda u, w: changed(
            lambda: asked_to_stop(w.running),
            lambda: Api(u).call("post", f"/api/runs/{_pk(w.running)}/cancel"),
        ),
        "cli": lambda u, w: changed(
            lambda: asked_to_stop(w.running), lambda: Cli(u).call("cancel", str(_pk(w.running)))
        ),
    },
    "retry": {
        "admin": lambda u, w: changed(runs, lambda: _admin(u).button("run_retry", w.failed.pk)),
        "admin-action": lambda u, w: changed(
            runs, lambda: _admin(u).bulk("run", "retry", w.failed.pk)
        ),
        "api": lambda u, w: changed(
            runs, lambda: Api(u).call("post", f"/api/runs/{w.failed.pk}/retry")
        ),
        "cli": lambda u, w: changed(runs, lambda: Cli(u).call("retry", str(w.failed.pk))),
    },
    "prune": {
        "cli": lambda u, w: changed(runs, lambda: Cli(u).call("prune")),
    },
    "queues": {
        "admin": lambda u, w: _admin(u).page(reverse("admin:tasks_app_queuepause_changelist")),
        "api": lambda u, w: Api(u).call("get", "/api/queues"),
        "api-head": lambda u, w: Api(u).call("head", "/api/queues"),
        "cli": lambda u, w: Cli(u).call("queues"),
    },
    "pause-queue": {
        "admin": lambda u, w: changed(
            paused_queues,
            lambda: _admin(u).post(
                reverse("admin:tasks_app_queuepause_add"),
                {"queue": settings.CELERY_TASK_DEFAULT_QUEUE, "note": "down"},
            ),
        ),
        "api": lambda u, w: changed(
            paused_queues,
            lambda: Api(u).call("post", f"/api/queues/{settings.CELERY_TASK_DEFAULT_QUEUE}/pause"),
        ),
        "cli": lambda u, w: changed(
            paused_queues, lambda: Cli(u).call("pause-queue", settings.CELERY_TASK_DEFAULT_QUEUE)
        ),
    },
    "resume-queue": {
        "admin": lambda u, w: changed(
            paused_queues,
            lambda: _admin(u).post(
                reverse("admin:tasks_app_queuepause_delete", args=[w.paused_queue]),
                {"post": "yes"},
            ),
        ),
        "admin-action": lambda u, w: changed(
            paused_queues, lambda: _admin(u).bulk("queuepause", "resume", w.paused_queue)
        ),
        "api": lambda u, w: changed(
            paused_queues,
            lambda: Api(u).call("post", f"/api/queues/{w.paused_queue}/resume"),
        ),
        "cli": lambda u, w: changed(
            paused_queues, lambda: Cli(u).call("resume-queue", w.paused_queue)
        ),
    },
}


def test_the_grid_covers_every_operation_and_cli_verb() -> None:
    """No operation of the permission table and no CLI verb is left out of the matrix."""
    from tasks_app.management.commands.tasks import Command
    from tasks_app.services import permissions

    assert set(permissions.OPERATION_PERMISSIONS) <= set(CELLS)
    assert set(CELLS) == set(ALLOWED)
    parser = Command().create_parser("manage.py", "tasks")
    verbs = next(a for a in parser._actions if a.dest == "verb").choices
    assert verbs is not None
    in_cells = {op for op, ways in CELLS.items() if "cli" in ways}
    # ``sync`` applies the schedules declared in code: the release step's, run by the
    # deployment and never on a user's behalf (it refuses --as).
    assert set(verbs) - {"sync"} <= in_cells


@pytest.mark.parametrize("grade", list(GRADES))
@pytest.mark.parametrize("operation", list(CELLS))
def test_every_way_in_agrees(operation: str, grade: str) -> None:
    user = make_user(grade)
    outcomes = {}
    for way, cell in CELLS[operation].items():
        with transaction.atomic():  # each way in acts on a world of its own
            outcomes[way] = cell(user, world())
            transaction.set_rollback(True)
    expected = grade in ALLOWED[operation]
    assert outcomes == dict.fromkeys(CELLS[operation], expected)
