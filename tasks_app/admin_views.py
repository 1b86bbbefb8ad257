"""Admin pages beyond Django's CRUD: the schedule preview endpoint and the overview page.

Both are thin: the preview builds an unsaved :class:`Task` from the form's schedule fields
and asks ``selectors.task_preview``; the overview renders ``overview.overview_get`` with two
server-side SVG charts (no script, no CDN: the deployment may be offline).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cron_descriptor import get_description
from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from . import overview, scheduling, selectors
from .models import RunStatus, ScheduleType, Task

PREVIEW_COUNT = 5
STATUS_COLORS: dict[str, str] = {
    RunStatus.COMPLETED: "#2e7d32",
    RunStatus.RUNNING: "#1565c0",
    RunStatus.QUEUED: "#6a1b9a",
    RunStatus.PENDING: "#757575",
    RunStatus.RETRYING: "#ef6c00",
    RunStatus.FAILED: "#c62828",
    RunStatus.EXPIRED: "#8d6e63",
    RunStatus.CANCELLED: "#9e9e9e",
    RunStatus.SKIPPED: "#bdbdbd",
}


# --- schedule in words and preview ---------------------------------------------------------


def _seconds_in_words(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0 and seconds >= size:
            n = seconds // size
            return f"every {n} {unit}{'s' if n != 1 else ''}" if n != 1 else f"every {unit}"
    return f"every {seconds} seconds" if seconds != 1 else "every second"


def schedule_in_words(task: Task) -> str:
    """'At 09:00 AM, Monday through Friday (Europe/Paris)', 'Every 5 minutes', ..."""
    kind = task.schedule_type
    if kind == ScheduleType.CRON and task.cron:
        text = scheduling.expand_macro(task.cron.strip())
        try:
            words = get_description(text)
        except Exception:  # cron-descriptor refuses some forms the parser accepts
            words = f"cron {task.cron}"
        return f"{words} ({task.timezone or 'UTC'})"
    if kind == ScheduleType.INTERVAL and task.interval_seconds:
        return _seconds_in_words(task.interval_seconds).capitalize()
    if kind == ScheduleType.ONCE:
        return (
            f"Once, at {task.run_at:%Y-%m-%d %H:%M:%S %Z}" if task.run_at else "Once (no time set)"
        )
    return "On demand: Run now, a delay, or the API"


def _fire_text(moment: datetime) -> str:
    return f"{moment:%a %Y-%m-%d %H:%M:%S} {moment.tzname()}"


def preview_of(task: Task, *, now: datetime | None = None) -> dict[str, Any]:
    """The JSON the task page shows: the schedule in words and the next fire times."""
    fires = selectors.task_preview(task=task, count=PREVIEW_COUNT, now=now)
    return {
        "schedule_type": task.schedule_type,
        "description": schedule_in_words(task),
        "timezone": task.timezone or "UTC",
        "fires": [
            {
                "utc": f.utc.isoformat(),
                "local": f.local.isoformat(),
                "utc_text": _fire_text(f.utc),
                "local_text": _fire_text(f.local),
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
        if data.get("schedule_type") == ScheduleType.CRON:
            if not data.get("cron"):
                raise ValidationError({"cron": "is required for a 'cron' schedule"})
            try:
                scheduling.parse_cron(data["cron"])
            except scheduling.CronError as exc:
                raise ValidationError({"cron": f"invalid cron expression: {exc}"}) from exc
        if data.get("schedule_type") == ScheduleType.INTERVAL and not data.get("interval_seconds"):
            raise ValidationError({"interval_seconds": "is required for an 'interval' schedule"})
        return data


def preview_view(request: HttpRequest) -> JsonResponse:
    """``GET /admin/tasks_app/task/preview/?schedule_type=cron&cron=...&timezone=...``

    Answers ``{"description", "fires": [{"utc", "local", ...}]}`` or 400 with
    ``{"errors": {field: [message]}}``. Nothing is saved.
    """
    data = request.GET.copy()
    for name in ("run_at", "end_at"):  # the admin's split widgets send _0 (date) and _1 (time)
        if f"{name}_0" not in data:
            data[f"{name}_0"], data[f"{name}_1"] = "", ""
    form = PreviewForm(data)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data(escape_html=True)}, status=400)
    values = form.cleaned_data
    task = Task(
        schedule_type=values["schedule_type"],
        cron=values.get("cron") or "",
        timezone=values.get("timezone") or "UTC",
        interval_seconds=values.get("interval_seconds"),
        run_at=values.get("run_at"),
        end_at=values.get("end_at"),
    )
    return JsonResponse(preview_of(task))


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
                f'fill="{STATUS_COLORS[status]}"><title>{minute:%H:%M} {status}: {n}</title></rect>'
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
    for attr, colour in (("p99_ms", "#c62828"), ("p50_ms", "#1565c0")):
        coords = []
        for p in points:
            i = index.get(p.minute.replace(second=0, microsecond=0))
            if i is None:
                continue
            x = pad + i * step + step / 2
            y = height - pad - getattr(p, attr) / peak * (height - 2 * pad)
            coords.append(f"{x:.1f},{y:.1f}")
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"><title>'
                f"{p.minute:%H:%M} {attr[:3]} {getattr(p, attr):.1f} ms ({p.count} runs)</title></circle>"
            )
        if coords:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
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
    return format_html_join(
        " ",
        '<span class="tasks-badge" style="background:{}">{}</span>',
        ((STATUS_COLORS[s], s) for s in overview.CHART_STATUSES),
    )


def overview_view(request: HttpRequest) -> HttpResponse:
    """``/admin/overview/``: what is happening now, for the operator on call."""
    data = overview.overview_get(with_health=False)
    # Health waits up to a second for worker pings: render it when cached, else the page
    # fetches it from ``health/`` after it has been shown.
    data.health = overview.health_cached() or {}
    minutes = [m for m, _ in data.per_minute]
    context = {
        **admin.site.each_context(request),
        "title": "Overview",
        "data": data,
        "statuses": [s for s in RunStatus.values],
        "runs_chart": svg_runs_per_minute(data.per_minute),
        "lateness_chart": svg_lateness(data.lateness, minutes),
        "legend": status_legend(),
        "now": timezone.now(),
    }
    return TemplateResponse(request, "tasks_app/overview.html", context)


def overview_health_view(request: HttpRequest) -> JsonResponse:
    """``/admin/overview/health/``: the health table's data (refreshed at most every 10 s)."""
    return JsonResponse({"health": overview.health_get()})


def badge(status: str) -> SafeString:
    return format_html(
        '<span class="tasks-badge tasks-{}" style="background:{}">{}</span>',
        status,
        STATUS_COLORS.get(status, "#607d8b"),
        status,
    )
