"""``TASKS_QUEUE_TYPE`` (tasks_app/messaging/queues.py): what each process declares, and the settings it
refuses. In fresh subprocesses with a clean environment, as a deployment starts (the real
quorum queue at work: tests/e2e/test_quorum_queues.py)."""

from __future__ import annotations

import json

from tests.shared import manage

RABBITMQ = {
    "DATABASE_URL": "postgres://app@db.internal:5432/tasks",
    "CELERY_BROKER_URL": "amqp://app@mq.internal:5672//",
    "DJANGO_SECRET_KEY": "test-secret-not-for-production",
}
# The declaration of the default queue and of a task's own queue, as JSON (no broker needed).
SHOW_DECLARATIONS = """
import json
from project.celery import app
print(json.dumps({
    name: [q.queue_arguments, q.exchange.type]
    for name in ("celery", "reports") for q in [app.amqp.queues[name]]
}))
"""


def declarations(**env: str) -> dict[str, list[object]]:
    done = manage("shell", "-c", SHOW_DECLARATIONS, **RABBITMQ, **env)
    assert done.returncode == 0, done.stderr
    result: dict[str, list[object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_quorum_declares_every_queue_quorum_with_a_delivery_limit_on_a_topic_exchange() -> None:
    quorum = {"x-queue-type": "quorum", "x-delivery-limit": 20}
    assert declarations(TASKS_QUEUE_TYPE="quorum") == {
        "celery": [quorum, "topic"],
        "reports": [quorum, "topic"],
    }
    limited = declarations(TASKS_QUEUE_TYPE="quorum", TASKS_QUEUE_DELIVERY_LIMIT="7")
    assert limited["reports"][0] == {"x-queue-type": "quorum", "x-delivery-limit": 7}


def test_classic_keeps_celerys_priority_queues() -> None:
    classic = [{"x-max-priority": 10}, "direct"]
    assert declarations() == {"celery": classic, "reports": classic}


def test_refuses_an_unknown_queue_type_in_one_line() -> None:
    done = manage("check", **RABBITMQ, TASKS_QUEUE_TYPE="mirrored")
    assert done.returncode != 0
    assert (
        "ImproperlyConfigured: TASKS_QUEUE_TYPE must be 'classic' or 'quorum', not 'mirrored'"
        in done.stderr
    )


def test_refuses_quorum_on_the_postgres_broker() -> None:
    env = {**RABBITMQ, "TASKS_QUEUE_TYPE": "quorum"}
    del env["CELERY_BROKER_URL"]  # the embedded stack's broker: Postgres
    done = manage("check", **env)
    assert done.returncode != 0
    assert "TASKS_QUEUE_TYPE=quorum needs RabbitMQ" in done.stderr


def test_refuses_a_delivery_limit_that_is_not_a_whole_number_from_one() -> None:
    for value in ("0", "-1", "ten"):
        done = manage("check", **RABBITMQ, TASKS_QUEUE_DELIVERY_LIMIT=value)
        assert done.returncode != 0
        assert f"TASKS_QUEUE_DELIVERY_LIMIT must be a whole number >= 1, not {value!r}" in (
            done.stderr
        )
