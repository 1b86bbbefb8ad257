"""Fuzzed admin forms (hypothesis): the task add and change forms, "Run now with…" and the
API token form, given JSON that is not, numbers that are not finite, nesting past any limit,
NUL and lone surrogates, numbers out of range. Every answer is a page (200, the form with
errors on named fields) or a redirect with a message naming the field: never a 5xx, never a
traceback, and a refused input writes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from knox.models import AuthToken

from tasks_app import services
from tasks_app.models import Run, Task
from tests.fuzzing import numbers, payload_texts
from tests.shared import form as task_form

pytestmark = pytest.mark.django_db

EXAMPLES = 40
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def no_server_error(response: Any) -> None:
    assert response.status_code < 500, response.status_code
    text = response.content.decode("utf-8", "replace")
    assert "Traceback" not in text and "psycopg" not in text


def form_errors_name_fields(response: Any) -> None:
    form = response.context["adminform"].form
    assert form.errors, "a page again, but no error on it"
    for name in form.errors:
        assert name == "__all__" or name in form.fields, name


@pytest.fixture
def boss(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-Boss-2026"))
    return client


@FUZZ
@given(
    payload=payload_texts,
    action=st.sampled_from(["echo", "noop", "http", "django_task", "no-such-action"]),
    priority=numbers,
    interval=numbers,
    delay=numbers,
)
def test_the_task_add_form(boss: Client, payload, action, priority, interval, delay) -> None:
    before = Task.objects.count()
    response = boss.post(
        reverse("admin:tasks_app_task_add"),
        task_form(
            id="fuzzed",
            action=action,
            payload=payload,
            priority=priority,
            schedule_type="interval",
            interval_seconds=interval,
            delay_seconds=delay,
        ),
    )
    no_server_error(response)
    if response.status_code == 200:
        form_errors_name_fields(response)
        assert Task.objects.count() == before
    else:  # through the service: its beat entry goes with it
        services.task_delete(task=Task.objects.get(pk="fuzzed"))


@FUZZ
@given(payload=payload_texts, priority=numbers, jitter=numbers)
def test_the_task_change_form(boss: Client, payload, priority, jitter) -> None:
    task = Task.objects.filter(pk="fuzz-change").first() or services.task_create(
        id="fuzz-change", action="echo", payload={"message": "hi"}
    )
    stored = Task.objects.values().get(pk=task.pk)
    response = boss.post(
        reverse("admin:tasks_app_task_change", args=[task.pk]),
        task_form(id=task.pk, payload=payload, priority=priority, jitter_seconds=jitter),
    )
    no_server_error(response)
    if response.status_code == 200:
        form_errors_name_fields(response)
        assert Task.objects.values().get(pk=task.pk) == stored


@FUZZ
@given(payload=payload_texts)
def test_run_now_with(boss: Client, payload) -> None:
    task = Task.objects.filter(pk="fuzz-run").first() or services.task_create(
        id="fuzz-run", action="echo", payload={"message": "hi"}
    )
    runs = Run.objects.count()
    response = boss.post(
        reverse("admin:tasks_app_task_run_now", args=[task.pk]), {"payload": payload}
    )
    no_server_error(response)
    assert response.status_code == 302
    said = [str(m) for m in get_messages(response.wsgi_request)]
    if Run.objects.count() == runs:
        assert any(m.startswith("Task fuzz-run not run: payload: ") for m in said), said
    else:
        assert any(m.startswith("Run ") for m in said), said


@FUZZ
@given(
    user=st.one_of(st.just("holder"), st.text(max_size=6)),
    day=st.one_of(st.dates().map(str), st.text(max_size=12), st.just("")),
    time=st.one_of(
        st.times().map(lambda t: t.strftime("%H:%M:%S")), st.text(max_size=8), st.just("")
    ),
)
def test_the_token_add_form(boss: Client, user, day, time) -> None:
    holder = User.objects.filter(username="holder").first() or User.objects.create_user(
        "holder", password="pw-Holder-2026"
    )
    before = AuthToken.objects.count()
    response = boss.post(
        reverse("admin:knox_authtoken_add"),
        {"user": holder.pk if user == "holder" else user, "expiry_0": day, "expiry_1": time},
    )
    no_server_error(response)
    if response.status_code == 200:
        form_errors_name_fields(response)
        assert AuthToken.objects.count() == before
    else:
        newest = AuthToken.objects.latest("created")
        assert newest.expiry is not None
        assert timezone.now() < newest.expiry <= timezone.now() + timedelta(days=366)
