"""The run page's outcome and attempts: what the run's id answers over all its attempts
(``tasks_app.selectors.run_outcome``), the same as ``GET /api/runs/{id}``."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..models import Run
from ..selectors import RunOutcome
from .views import badge, duration, instant


def outcome_block(outcome: RunOutcome) -> SafeString:
    """The outcome badge and which attempt decided it; "not yet" while one is to come."""
    latest = outcome.latest
    link = reverse("admin:tasks_app_run_change", args=[latest.pk])
    if outcome.status is None:
        return format_html(
            "<span class='tasks-outcome tasks-muted'>not yet</span>: "
            "<a href='{}'>attempt {}</a> is {}",
            link,
            latest.attempt,
            latest.status,
        )
    return format_html(
        "<span class='tasks-outcome'>{}</span> on <a href='{}'>attempt {}</a> of {}",
        badge(outcome.status),
        link,
        latest.attempt,
        len(outcome.attempts),
    )


def status_block(run: Run, outcome: RunOutcome) -> SafeString:
    """The run's status on its page, in agreement with its outcome: once its attempts have
    ended, an earlier attempt (``retrying``, ``interrupted``) shows the outcome and says
    what it was itself; otherwise its own status."""
    if outcome.status is None or outcome.latest.pk == run.pk:
        return badge(run.status)
    return format_html(
        "{} <span class='tasks-muted'>(this attempt, {} of {}: {})</span>",
        badge(outcome.status),
        run.attempt,
        len(outcome.attempts),
        run.status,
    )


def attempts_table(run: Run, outcome: RunOutcome) -> SafeString:
    """Every attempt, first to latest, each linked but the one on this page."""
    rows = format_html_join(
        "",
        "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>",
        (
            (
                format_html(" class='{}'", "tasks-this-attempt") if a.pk == run.pk else "",
                a.attempt
                if a.pk == run.pk
                else format_html(
                    "<a href='{}'>{}</a>",
                    reverse("admin:tasks_app_run_change", args=[a.pk]),
                    a.attempt,
                ),
                a.trigger,
                badge(a.status),
                instant(a.started_at),
                instant(a.finished_at),
                duration(a.duration_ms),
                a.worker or "-",
                a.error.strip().splitlines()[0] if a.error.strip() else "-",
            )
            for a in outcome.attempts
        ),
    )
    return format_html(
        "<table class='tasks-attempts'><thead><tr><th>attempt</th><th>trigger</th>"
        "<th>status</th><th>started</th><th>finished</th><th>took</th><th>worker</th>"
        "<th>error</th></tr></thead><tbody>{}</tbody></table>",
        rows,
    )
