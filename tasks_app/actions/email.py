"""The ``email`` action: one message through Django's e-mail backend.

The backend is ``EMAIL_BACKEND`` (``DJANGO_EMAIL_BACKEND``): the console in embedded mode,
SMTP (``EMAIL_HOST``...) in a deployment. Addresses are checked with Django's
``validate_email`` when the task is saved; the subject must be one line (no header
injection). Connection failures are retried; refused recipients are not.
"""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email

from .base import JSON, ActionError, Outcome, PayloadError, RunContext, register

MAX_RECIPIENTS = 100

SCHEMA: dict[str, JSON] = {
    "type": "object",
    "properties": {
        "to": {
            "oneOf": [
                {"type": "string", "minLength": 3, "maxLength": 320},
                {
                    "type": "array",
                    "items": {"type": "string", "minLength": 3, "maxLength": 320},
                    "minItems": 1,
                    "maxItems": MAX_RECIPIENTS,
                },
            ]
        },
        "subject": {"type": "string", "maxLength": 998},
        "body": {"type": "string", "maxLength": 1_000_000},
    },
    "required": ["to", "subject", "body"],
    "additionalProperties": False,
}


def recipients(payload: dict[str, JSON]) -> list[str]:
    to = payload["to"]
    return [to] if isinstance(to, str) else [str(address) for address in to]


def check_payload(payload: dict[str, JSON]) -> None:
    """Every address valid; a one-line subject."""
    messages = []
    for address in recipients(payload):
        try:
            validate_email(address)
        except ValidationError:
            messages.append(f"to: {address!r} is not a valid e-mail address")
    if "\n" in payload["subject"] or "\r" in payload["subject"]:
        messages.append("subject: must be a single line")
    if messages:
        raise PayloadError(messages)


@register(
    "email",
    schema=SCHEMA,
    description="Sends an e-mail (to, subject, body) through Django's e-mail backend.",
    validate=check_payload,
    permission="tasks_app.use_action_email",
)
def send_email(payload: dict[str, JSON], ctx: RunContext) -> Outcome:
    to = recipients(payload)
    message = EmailMessage(
        subject=str(payload["subject"]),
        body=str(payload["body"]),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=to,
        headers={"X-Task-Run-Id": ctx.run_id},
    )
    try:
        sent = message.send(fail_silently=False)
    except smtplib.SMTPRecipientsRefused as exc:
        raise ActionError(
            f"recipients refused: {', '.join(exc.recipients)}", retryable=False
        ) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise ActionError(f"sending failed: {type(exc).__name__}: {exc}") from exc
    return Outcome(output=f"sent to {', '.join(to)}", result={"to": to, "sent": sent})
