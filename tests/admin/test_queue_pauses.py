"""The paused queues page: pausing with a note, an unknown name as an error on the field, the
list with its waiting runs, resuming (the list action and deleting the pause), what a user
without the pause's permissions is offered, and the overview's paused queues."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tasks_app import services
from tasks_app.models import QueuePause, Run, RunStatus

pytestmark = pytest.mark.django_db

ADD = "admin:tasks_app_queuepause_add"
LIST = "admin:tasks_app_queuepause_changelist"


@pytest.fixture
def queue() -> str:
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


def test_pause_from_the_admin_then_see_it_listed_with_its_waiting_runs(operator, queue) -> None:
    response = operator.post(reverse(ADD), {"queue": queue, "note": "db failover"}, follow=True)
    assert response.status_code == 200
    pause = QueuePause.objects.get(queue=queue)
    assert (pause.note, pause.paused_by) == ("db failover", "ops")
    task = services.task_create(id="admin-held", action="noop")
    services.task_execute(task=task)
    page = operator.get(reverse(LIST)).content.decode()
    assert queue in page and "db failover" in page
    assert '<td class="field-waiting_runs">1</td>' in page


def test_an_unknown_queue_is_an_error_on_the_field_and_nothing_is_written(operator) -> None:
    response = operator.post(reverse(ADD), {"queue": "no-such-queue", "note": ""})
    assert response.status_code == 200  # the form again, with its error
    errors = response.context["adminform"].form.errors
    assert "is not a configured queue" in " ".join(errors["queue"])
    assert not QueuePause.objects.exists()


def test_resume_with_the_list_action_releases_the_waiting_runs(
    operator, queue, django_capture_on_commit_callbacks
) -> None:
    services.queue_pause(queue=queue, note="down")
    task = services.task_create(id="admin-resume", action="noop")
    run = services.task_execute(task=task)
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(
            reverse(LIST), {"action": "resume", "_selected_action": [queue]}, follow=True
        )
    assert f"1 queue(s) resumed: {queue}." in response.content.decode()
    assert not QueuePause.objects.exists()
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_deleting_the_pause_resumes_the_queue(operator, queue) -> None:
    services.queue_pause(queue=queue)
    url = reverse("admin:tasks_app_queuepause_delete", args=[queue])
    operator.post(url, {"post": "yes"})
    assert not QueuePause.objects.exists()


def test_a_task_editor_is_offered_nothing_and_cannot_pause(client, queue) -> None:
    editor = User.objects.create_user("editor", password="pw-editor-1", is_staff=True)
    editor.user_permissions.set(
        Permission.objects.filter(codename__in=["view_task", "change_task"])
    )
    client.force_login(editor)
    assert client.get(reverse(LIST)).status_code == 403
    assert client.post(reverse(ADD), {"queue": queue}).status_code == 403
    assert not QueuePause.objects.exists()


def test_the_overview_shows_paused_queues_and_their_waiting_runs(operator, queue) -> None:
    task = services.task_create(id="overview-held", action="noop")
    services.queue_pause(queue=queue, note="vendor outage")
    for _ in range(2):
        services.task_execute(task=task)
    page = operator.get(reverse("tasks-overview")).content.decode()
    section = page[page.index('id="paused-queues"') :]
    section = section[: section.index("</div>")]
    assert queue in section and "vendor outage" in section
    assert "<td>2</td>" in section
    services.queue_resume(queue=queue)
    page = operator.get(reverse("tasks-overview")).content.decode()
    assert "No paused queue." in page
