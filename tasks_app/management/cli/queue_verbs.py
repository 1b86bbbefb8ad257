"""The queue verbs of ``manage.py tasks``: queues, pause-queue, resume-queue."""

from __future__ import annotations

from typing import Any

from tasks_app import selectors, services
from tasks_app.selectors.representations import QueueSerializer
from tasks_app.vocabulary.display import relative

from .base import CliCommand
from .output import table


class QueueVerbs(CliCommand):
    def do_queues(self, o: dict[str, Any]) -> None:
        queues = selectors.queue_list()
        rows = [
            [
                q.name,
                "paused" if q.paused else "running",
                str(q.waiting),
                relative(q.paused_at, self.now) if q.paused else "-",
                q.paused_by or "-",
                q.note or "-",
            ]
            for q in queues
        ]
        self.out(
            QueueSerializer(queues, many=True).data,
            table(rows, ["QUEUE", "STATE", "WAITING", "PAUSED", "BY", "NOTE"]),
        )

    def do_pause_queue(self, o: dict[str, Any]) -> None:
        pause = services.queue_pause(queue=o["name"], note=o["note"], by=self.by)
        state = selectors.queue_state(pause.queue)
        self.out(
            QueueSerializer(state).data,
            f"paused queue {state.name}; {state.waiting} run(s) waiting",
        )

    def do_resume_queue(self, o: dict[str, Any]) -> None:
        was_paused = services.queue_resume(queue=o["name"], by=self.by)
        state = selectors.queue_state(o["name"].strip())
        text = (
            f"resumed queue {state.name}; waiting runs released"
            if was_paused
            else f"queue {state.name} was not paused"
        )
        self.out(QueueSerializer(state).data, text)
