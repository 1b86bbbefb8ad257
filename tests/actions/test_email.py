"""The ``email`` action: addresses checked at save time, delivery through Django's backend."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from tasks_app import services
from tasks_app.models import RunStatus
from tests.actions.helpers import execute_in_process

pytestmark = pytest.mark.django_db


def test_email_is_sent_through_the_configured_backend(settings: object) -> None:
    # pytest-django switches EMAIL_BACKEND to the in-memory backend (mail.outbox).
    settings.DEFAULT_FROM_EMAIL = "scheduler@example.com"  # type: ignore[attr-defined]
    task = services.task_create(
        id="send-reminder",
        action="email",
        payload={
            "to": ["ana@example.com", "bo@example.org"],
            "subject": "Reminder",
            "body": "Your report is due.",
        },
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.COMPLETED
    assert run.output == "sent to ana@example.com, bo@example.org"
    [message] = mail.outbox
    assert message.to == ["ana@example.com", "bo@example.org"]
    assert message.subject == "Reminder" and message.body == "Your report is due."
    assert message.from_email == "scheduler@example.com"
    assert message.extra_headers["X-Task-Run-Id"] == str(run.id)


def test_a_single_address_may_be_a_string() -> None:
    task = services.task_create(
        action="email", payload={"to": "ana@example.com", "subject": "Hi", "body": "."}
    )
    execute_in_process(services.task_execute(task=task))
    assert mail.outbox[0].to == ["ana@example.com"]


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        ({"to": "not-an-address", "subject": "s", "body": "b"}, "'not-an-address' is not a valid"),
        ({"to": ["ok@example.com", "bad@"], "subject": "s", "body": "b"}, "'bad@' is not a valid"),
        ({"to": "a@example.com\nBcc: x@evil.test", "subject": "s", "body": "b"}, "is not a valid"),
        ({"to": "a@example.com", "subject": "s\nBcc: x@evil.test", "body": "b"}, "single line"),
        ({"to": [], "subject": "s", "body": "b"}, "to"),
        ({"to": "a@example.com", "body": "b"}, "'subject' is a required property"),
    ],
)
def test_bad_addresses_and_headers_are_refused_when_saved(
    payload: dict[str, object], text: str
) -> None:
    with pytest.raises(ValidationError) as info:
        services.task_create(action="email", payload=payload)
    assert text in " ".join(info.value.message_dict["payload"])
    assert mail.outbox == []
