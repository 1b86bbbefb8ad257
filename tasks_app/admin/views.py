"""Admin pages beyond Django's CRUD, and how the admin shows things.

- **Presentation rules, one place each**: the texts of instants, durations and schedules
  are ``tasks_app.vocabulary.display``'s (the CLI's too); here :func:`instant` wraps an instant in a
  ``<time>`` element (``admin.js`` adds the viewer's local time and "3 min ago" on hover),
  :func:`badge` shows a status (colours live in ``admin.css`` only, charts included) and
  :func:`next_run_state` says what "Next run" truthfully is for each kind of task.
- **Endpoints**: the schedule preview and the payload check the task form calls as you type
  (both answer JSON and save nothing), and the overview page with two server-side SVG
  charts (no CDN: the deployment may be offline).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from .. import __version__, selectors
from ..conf import app_settings
from ..models import RECURRING, RunStatus, ScheduleType, Task
from ..runtime import clock
from ..selectors import overview
from ..services import permissions
from ..services.task_rules import validate_task
from ..timing import scheduling
from ..vocabulary import secret_fields, validation
from ..vocabulary.display import duration, instant_text, schedule_in_words, zoned_instant_text

PREVIEW_COUNT = 5


# --- how values are shown ------------------------------------------------------------------


def instant(value: datetime | None, *, empty: str = "-") -> SafeString | str:
    """An instant as a ``<time>`` element: UTC text to the second, ISO in ``datetime`` for
    ``admin.js``, which puts the viewer's local time and the relative time in the tooltip."""
    if value is None:
        return empty
    return format_html(
        '<time class="tasks-time" datetime="{}" title="{}">{}</time>',
        value.astimezone(UTC).isoformat(),
        instant_text(value),
        instant_text(value),
    )


def badge(status: str, *, title: str = "") -> SafeString:
    """A status badge; its colour comes from ``admin.css`` (``.tasks-<status>``); ``title``
    is shown on hover."""
    if title:
        return format_html(
            '<span class="tasks-badge tasks-{}" title="{}">{}</span>', status, title, status
        )
    return format_html('<span class="tasks-badge tasks-{}">{}</span>', status, status)


def next_run_state(
    task: Task, *, now: datetime | None = None, compact: bool = False
) -> SafeString | str:
    """What "Next run" truthfully is.

    ``next_run_at`` is what beat will fire next; after downtime or a resume it can be an
    instant in the past until beat's next tick applies the catch-up policy. Then the next
    fire from now is shown, with the missed one and what the policy does with it. A task
    without a recurring schedule has no fires: its next run is its earliest waiting run.
    """
    now = now or clock.now()
    next_run_at = selectors.task_next_run_at(task)
    if task.paused:
        return selectors.NEXT_RUN_PAUSED_SHORT if compact else selectors.NEXT_RUN_PAUSED
    if task.schedule_type not in RECURRING:
        if next_run_at is None:
            return "none waiting" if task.schedule_type == ScheduleType.NONE else "none planned"
        if next_run_at <= now:
            return format_html("{}, due now: a worker takes it next", instant(next_run_at))
        return instant(next_run_at)
    if next_run_at is None:
        return "none planned"
    if next_run_at > now:
        return instant(next_run_at)
    try:
        upcoming = selectors.task_preview(task=task, count=1, now=now)
    except ValidationError:
        upcoming = []
    replay = "replays it now" if task.catchup != "skip" else "skips it"
    if compact:  # a list cell: the upcoming fire, the missed one on hover
        return format_html(
            '{} <span class="tasks-muted" title="the fire of {} was missed; catch-up {} {}">'
            "(1 missed)</span>",
            instant(upcoming[0].utc) if upcoming else "none planned",
            instant_text(next_run_at),
            task.catchup,
            replay,
        )
    return format_html(
        '{} <span class="tasks-muted">(the fire of {} was missed; catch-up "{}" {})</span>',
        instant(upcoming[0].utc) if upcoming else "none planned",
        instant(next_run_at),
        task.catchup,
        replay,
    )


# --- schedule in words and preview ---------------------------------------------------------


def preview_of(task: Task, *, now: datetime | None = None) -> dict[str, Any]:
    """The JSON the task page shows: the schedule in words and the next fire times."""
    fires = selectors.task_preview(task=task, count=PREVIEW_COUNT, now=now)
    words = schedule_in_words(task)
    if task.paused:  # never a task not saved yet
        words += "; paused: these fires come only once it is resumed"
    return {
        "schedule_type": task.schedule_type,
        "description": words,
        "timezone": task.timezone or "UTC",
        "fires": [
            {
                "utc": f.utc.isoformat(),
                "local": f.local.isoformat(),
                "utc_text": zoned_instant_text(f.utc),
                "local_text": zoned_instant_text(f.local),
            }
            for f in fires
        ],
    }


class PreviewForm(forms.Form):
    """The schedule fields of the task form, as the preview script sends them."""

    schedule_type = forms.ChoiceField(choices=ScheduleType.choices)
    cron = forms.CharField(required=False)
    timezone = forms.CharField(required=False)
    interval_seconds = forms.IntegerField(required=False, min_value=1)
    run_at = forms.SplitDateTimeField(required=False)
    end_at = forms.SplitDateTimeField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        zone = data.get("timezone") or "UTC"
        try:
            scheduling.get_zone(zone)
        except scheduling.ZoneError as exc:
            raise ValidationError({"timezone": str(exc)}) from exc
        kind = data.get("schedule_type")
        if kind in (ScheduleType.CRON, ScheduleType.INTERVAL):
            field, required = validation.REQUIRED_FOR_SCHEDULE[ScheduleType(kind)]
            if not data.get(field):
                raise ValidationError({field: required})
        if kind == ScheduleType.CRON:
            try:
                scheduling.parse_cron(data["cron"])
            except scheduling.CronError as exc:
                raise ValidationError({"cron": validation.cron_problem(exc)}) from exc
        return data


def authorize_form(user: Any, *, stored: Task | None, action: str = "") -> None:
    """Refuse the task form's helpers (the schedule preview, the payload check) to a user
    whose save of the form would be refused: they change ``stored`` (or add a task when it
    is ``None``) and use its action and ``action``. Asked before any form work, as Django's
    ``has_*_permission`` hooks are; what refuses is the services' one table."""
    names = tuple(a for a in (stored.action if stored else "", action) if a)
    permissions.authorize(user, "create" if stored is None else "update", action=names)


def preview_view(request: HttpRequest) -> JsonResponse:
    """``GET /admin/tasks_app/task/preview/?schedule_type=cron&cron=...&timezone=...``

    Answers ``{"description", "fires": [{"utc", "local", ...}]}`` or 400 with
    ``{"errors": {field: [message]}}``. Nothing is saved. The task form calls it as you
    type: it needs what saving the form needs (changing tasks, or adding one). A stored
    task's next fires are on its page, for whoever may read it.
    """
    if not permissions.allows(request.user, "update"):
        authorize_form(request.user, stored=None)
    data = request.GET.copy()
    for name in ("run_at", "end_at"):  # the admin's split widgets send _0 (date) and _1 (time)
        if f"{name}_0" not in data:
            data[f"{name}_0"], data[f"{name}_1"] = "", ""
    form = PreviewForm(data)
    if not form.is_valid():
        # Plain text: the page puts messages in with ``textContent``, never as HTML.
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    values = form.cleaned_data
    task = Task(
        schedule_type=values["schedule_type"],
        cron=values.get("cron") or "",
        timezone=values.get("timezone") or "UTC",
        interval_seconds=values.get("interval_seconds"),
        run_at=values.get("run_at"),
        end_at=values.get("end_at"),
    )
    try:
        return JsonResponse(preview_of(task))
    except ValidationError as exc:  # e.g. an end_at in year 9999: out of the instants' range
        errors = {
            field: [{"message": m} for m in messages]
            for field, messages in exc.message_dict.items()
        }
        return JsonResponse({"errors": errors}, status=400)


def payload_check_view(request: HttpRequest) -> JsonResponse:
    """``POST /admin/tasks_app/task/payload-check/`` with ``action`` and ``payload`` (JSON
    text): ``{"ok": bool, "errors": [message]}`` from the very check a save runs
    (``services.task_rules.validate_task``: the action's schema, then its own rules such as
    refused addresses). The task form calls it as you type; nothing is saved.

    Authorized first, as the form's save would be (:func:`authorize_form`: change the task
    of ``?task=``, or add one, and use the action), so nothing of the payload is looked at,
    imported or resolved for a user who could not save it (403)."""
    action = request.POST.get("action", "")
    stored_id = request.GET.get("task")
    stored = Task.objects.filter(pk=stored_id).first() if stored_id else None
    authorize_form(request.user, stored=stored, action=action)
    if request.method != "POST":
        return JsonResponse({"error": "POST action and payload"}, status=405)
    try:
        payload = validation.read_json(request.POST.get("payload") or "{}")
    except validation.JSONProblem as exc:
        return JsonResponse({"ok": False, "errors": [exc.at("payload")]})
    if stored is not None:
        # The form holds "set" for each secret: check the value it stands for.
        try:
            payload = secret_fields.payload_merged(
                action, payload, stored_action=stored.action, stored=stored.payload
            )
        except ValidationError as exc:
            return JsonResponse({"ok": False, "errors": exc.message_dict.get("payload", [])})
    task = Task(action=action, payload=payload)
    try:
        validation.check_storable(task)  # what Postgres cannot store, then the save's rules
        validate_task(task)
    except ValidationError as exc:
        errors = [m for field in ("action", "payload") for m in exc.message_dict.get(field, [])]
        return JsonResponse({"ok": not errors, "errors": errors})
    return JsonResponse({"ok": True, "errors": []})


# --- overview ------------------------------------------------------------------------------


def svg_runs_per_minute(per_minute: list[tuple[datetime, dict[str, int]]]) -> SafeString:
    """A stacked bar per minute, one colour per status."""
    width, height, pad = 720, 160, 24
    peak = max((sum(c.values()) for _, c in per_minute), default=0) or 1
    bar = (width - pad) / max(len(per_minute), 1)
    parts: list[str] = []
    for i, (minute, counts) in enumerate(per_minute):
        y = float(height - pad)
        x = pad + i * bar
        for status in overview.CHART_STATUSES:
            n = counts.get(status, 0)
            if not n:
                continue
            h = n / peak * (height - 2 * pad)
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar - 1, 1):.1f}" height="{h:.1f}" '
                f'class="tasks-{status}"><title>{minute:%H:%M} UTC {status}: {n}</title></rect>'
            )
    return _svg(
        width,
        height,
        pad,
        peak,
        "runs",
        parts,
        per_minute[0][0] if per_minute else None,
        per_minute[-1][0] if per_minute else None,
        "Runs per minute by status",
    )


def svg_lateness(points: list[overview.MinuteLateness], minutes: list[datetime]) -> SafeString:
    """p50 and p99 start lateness per minute (ms), two lines on the same minute axis."""
    width, height, pad = 720, 160, 24
    peak = max((p.p99_ms for p in points), default=0) or 1
    index = {m: i for i, m in enumerate(minutes)}
    step = (width - pad) / max(len(minutes), 1)
    parts: list[str] = []
    for attr, line in (("p99_ms", "tasks-p99"), ("p50_ms", "tasks-p50")):
        coords = []
        for p in points:
            i = index.get(p.minute.replace(second=0, microsecond=0))
            if i is None:
                continue
            x = pad + i * step + step / 2
            y = height - pad - getattr(p, attr) / peak * (height - 2 * pad)
            coords.append(f"{x:.1f},{y:.1f}")
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" class="{line}"><title>'
                f"{p.minute:%H:%M} UTC {attr[:3]} {duration(getattr(p, attr))} ({p.count} run{pluralize(p.count)})"
                "</title></circle>"
            )
        if coords:
            parts.append(
                f'<polyline class="{line}" fill="none" stroke-width="1.5" '
                f'points="{" ".join(coords)}"/>'
            )
    return _svg(
        width,
        height,
        pad,
        peak,
        "ms",
        parts,
        minutes[0] if minutes else None,
        minutes[-1] if minutes else None,
        "Start lateness p50 and p99 per minute",
    )


def _svg(
    width: int,
    height: int,
    pad: int,
    peak: float,
    unit: str,
    parts: list[str],
    first: datetime | None,
    last: datetime | None,
    label: str,
) -> SafeString:
    axis = (
        f'<line x1="{pad}" y1="{height - pad}" x2="{width}" y2="{height - pad}" stroke="#999"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#999"/>'
        f'<text x="2" y="{pad - 6}" font-size="10" fill="#666">{round(peak, 1):g} {unit}</text>'
    )
    start = (
        (f'<text x="{pad}" y="{height - 6}" font-size="10" fill="#666">{first:%H:%M} UTC</text>')
        if first
        else ""
    )
    end = (
        (
            f'<text x="{width - 60}" y="{height - 6}" font-size="10" fill="#666">'
            f"{last:%H:%M} UTC</text>"
        )
        if last
        else ""
    )
    # Every value interpolated above is a number, a status name or a formatted time.
    return mark_safe(  # noqa: S308
        f'<svg role="img" aria-label="{label}" viewBox="0 0 {width} {height}" '
        f'width="100%" style="max-width:{width}px" xmlns="http://www.w3.org/2000/svg">'
        f"{axis}{start}{''.join(parts)}{end}</svg>"
    )


def status_legend() -> SafeString:
    return format_html_join(" ", "{}", ((badge(s),) for s in overview.CHART_STATUSES))


def overview_view(request: HttpRequest) -> HttpResponse:
    """``/admin/overview/``: what is happening now, for the operator on call (who may read
    tasks and runs)."""
    permissions.authorize(request.user, "overview")
    data = overview.overview_get(with_health=False)
    # The worker ping waits its whole timeout for replies: unless a fresh result is cached,
    # the page shows the four quick checks at once and fetches the workers' row after.
    cached = overview.health_cached()
    data.health = cached or overview.health_get(quick=True)
    minutes = [m for m, _ in data.per_minute]
    context = {
        **admin.site.each_context(request),
        "title": "Overview",
        "data": data,
        "statuses": [s for s in RunStatus.values],
        "runs_chart": svg_runs_per_minute(data.per_minute),
        "lateness_chart": svg_lateness(data.lateness, minutes),
        "legend": status_legend(),
        "health_complete": cached is not None,
        "worker_timeout": app_settings.HEALTH_WORKER_TIMEOUT_SECONDS,
        "now": clock.now(),
        "version": __version__,
    }
    return TemplateResponse(request, "tasks_app/overview.html", context)


def overview_health_view(request: HttpRequest) -> JsonResponse:
    """``/admin/overview/health/``: the health table's data (refreshed at most every 10 s),
    for whoever may read the overview."""
    permissions.authorize(request.user, "overview")
    return JsonResponse({"health": overview.health_get()})
