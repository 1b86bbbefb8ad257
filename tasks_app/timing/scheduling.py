"""Pure schedule arithmetic: given a schedule and an instant, the next fire times.

No ORM and no clock reads: every function takes the instants it needs. This is the one
place where cron parsing, time zones and daylight-saving transitions are decided.

Time-zone rules (documented in docs/how-it-works.md):

* Interval schedules are in absolute time: fires are ``anchor + k * interval`` in UTC and
  never move with DST.
* Cron expressions are matched against wall-clock time in the schedule's IANA zone.
* Spring forward (a local time that does not exist): the fire happens once, at the first
  valid instant after the gap (e.g. 02:30 in New York on the spring-forward day fires at
  03:00 EDT). Several missing wall times collapse into that one fire.
* Fall back (a local time that happens twice): the fire happens once, at the first
  occurrence (``fold=0``).
"""

from __future__ import annotations

import calendar
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

__all__ = [
    "CronError",
    "CronExpression",
    "IntervalSchedule",
    "CronSchedule",
    "Schedule",
    "parse_cron",
    "expand_macro",
    "resolve_wall_time",
    "get_zone",
    "fires_between",
]

MAX_SEARCH_YEARS = 8  # a valid cron fires at least once in 8 years (covers Feb 29 + weekday)

_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DOW_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class CronError(ValueError):
    """A cron expression that cannot be parsed or never fires."""


class ZoneError(ValueError):
    """An unknown IANA time-zone name."""


def get_zone(name: str) -> ZoneInfo:
    """Return the IANA zone ``name`` or raise :class:`ZoneError`."""
    if not name or name != name.strip() or name not in _zone_names():
        raise ZoneError(f"unknown time zone {name!r}; use an IANA name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:  # pragma: no cover - guarded above
        raise ZoneError(f"unknown time zone {name!r}") from exc


_ZONES: frozenset[str] | None = None


def _zone_names() -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones() | {"UTC"})
    return _ZONES


@dataclass(frozen=True)
class CronExpression:
    """A parsed 5-field cron expression (minute hour day-of-month month day-of-week)."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_restricted: bool
    dow_restricted: bool

    def matches_day(self, day: date) -> bool:
        """Vixie-cron day rule: when both day fields are restricted, either may match."""
        if day.month not in self.months:
            return False
        dom_ok = day.day in self.days
        dow_ok = (day.isoweekday() % 7) in self.weekdays
        if self.dom_restricted and self.dow_restricted:
            return dom_ok or dow_ok
        return dom_ok and dow_ok


def _is_ascii_number(text: str) -> bool:
    """Digits 0-9 only: ``str.isdigit`` (and ``int``) also take other scripts' digits
    ("١" is Arabic-Indic one), which no other cron implementation reads."""
    return text.isascii() and text.isdigit()


def _parse_value(token: str, index: int, lo: int, hi: int) -> int:
    names = _MONTH_NAMES if index == 3 else _DOW_NAMES if index == 4 else {}
    key = token.lower()
    if key in names:
        return names[key]
    if not _is_ascii_number(token):
        raise CronError(f"{_FIELDS[index][0]}: {token!r} is not a number (digits 0-9)")
    value = int(token)
    if not lo <= value <= hi:
        raise CronError(f"{_FIELDS[index][0]}: {value} is outside {lo}-{hi}")
    return value


def _parse_field(text: str, index: int) -> tuple[set[int], bool]:
    label, lo, hi = _FIELDS[index]
    values: set[int] = set()
    restricted = True
    for part in text.split(","):
        if not part:
            raise CronError(f"{label}: empty list item in {text!r}")
        step = 1
        if "/" in part:
            part, _, step_text = part.partition("/")
            if not _is_ascii_number(step_text) or int(step_text) == 0:
                raise CronError(f"{label}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if part == "*":
            start, end = lo, hi
            if step == 1 and text == "*":
                restricted = False
        elif "-" in part:
            a, _, b = part.partition("-")
            start, end = _parse_value(a, index, lo, hi), _parse_value(b, index, lo, hi)
            if start > end:
                raise CronError(f"{label}: range {part!r} runs backwards")
        else:
            start = _parse_value(part, index, lo, hi)
            end = hi if step > 1 else start
        values.update(range(start, end + 1, step))
    return values, restricted


def expand_macro(text: str) -> str:
    """``@daily`` and friends as their 5-field form; other text unchanged."""
    source = text.strip()
    return _MACROS.get(source.lower(), source)


@functools.lru_cache(maxsize=4096)  # pure and immutable: beat parses each task's cron per fire
def parse_cron(text: str) -> CronExpression:
    """Parse a 5-field cron expression (names and ``@daily``-style macros allowed).

    Raises :class:`CronError` naming the field and the rule that was broken, or when the
    expression can never fire (``0 0 30 2 *``).
    """
    source = (text or "").strip()
    expanded = expand_macro(source)
    parts = expanded.split()
    if len(parts) != 5:
        raise CronError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
        )
    fields = [_parse_field(part, i) for i, part in enumerate(parts)]
    weekdays = {0 if d == 7 else d for d in fields[4][0]}
    expr = CronExpression(
        text=source,
        minutes=tuple(sorted(fields[0][0])),
        hours=tuple(sorted(fields[1][0])),
        days=frozenset(fields[2][0]),
        months=frozenset(fields[3][0]),
        weekdays=frozenset(weekdays),
        dom_restricted=fields[2][1],
        dow_restricted=fields[4][1],
    )
    if not any(_matching_days(expr, date(2024, 1, 1), years=MAX_SEARCH_YEARS)):
        raise CronError(f"{source!r} never fires (no such day)")
    return expr


def _matching_days(expr: CronExpression, start: date, *, years: int) -> Iterator[date]:
    day = start
    end = start.replace(year=start.year + years)
    while day < end:
        if expr.matches_day(day):
            yield day
        day += timedelta(days=1)


def resolve_wall_time(wall: datetime, zone: tzinfo) -> datetime:
    """Map a naive local wall time to one aware UTC instant, applying the DST rules.

    A repeated wall time resolves to its first occurrence; a missing one to the first
    valid instant after the gap.
    """
    first = wall.replace(tzinfo=zone, fold=0)
    instant = first.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant
    # The wall time falls in a gap: walk forward to the first wall time that exists.
    probe = wall.replace(second=0, microsecond=0)
    for _ in range(24 * 60):
        probe += timedelta(minutes=1)
        candidate = probe.replace(tzinfo=zone, fold=0).astimezone(UTC)
        if candidate.astimezone(zone).replace(tzinfo=None) == probe:
            return candidate
    raise CronError(f"no valid local time after {wall.isoformat()}")  # pragma: no cover


@dataclass(frozen=True)
class CronSchedule:
    """Fires at every wall-clock minute matched by ``expression`` in ``zone``."""

    expression: CronExpression
    zone: ZoneInfo

    @classmethod
    def parse(cls, text: str, zone_name: str) -> CronSchedule:
        return cls(parse_cron(text), get_zone(zone_name))

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire instant strictly after ``after`` (aware), in UTC."""
        local = after.astimezone(self.zone)
        start_wall = local.replace(tzinfo=None, second=0, microsecond=0)
        start_day = start_wall.date()
        for day in _matching_days(self.expression, start_day, years=MAX_SEARCH_YEARS):
            for hour in self.expression.hours:
                for minute in self.expression.minutes:
                    wall = datetime(day.year, day.month, day.day, hour, minute)
                    if wall < start_wall:
                        continue
                    instant = resolve_wall_time(wall, self.zone)
                    if instant > after:
                        return instant
        return None


@dataclass(frozen=True)
class IntervalSchedule:
    """Fires every ``seconds`` in absolute time, aligned on ``anchor``."""

    seconds: float
    anchor: datetime

    def next_fire(self, after: datetime) -> datetime | None:
        step = timedelta(seconds=self.seconds)
        if after < self.anchor:
            return self.anchor
        elapsed = after - self.anchor
        count = elapsed // step + 1
        return self.anchor + count * step


Schedule = CronSchedule | IntervalSchedule


def fires_between(
    schedule: Schedule, start: datetime, end: datetime, *, limit: int
) -> list[datetime]:
    """Fire instants in ``(start, end]``, at most ``limit`` of them (in order)."""
    fires: list[datetime] = []
    current = start
    while len(fires) < limit:
        nxt = schedule.next_fire(current)
        if nxt is None or nxt > end:
            break
        fires.append(nxt)
        current = nxt
    return fires


def next_fires(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire instants after ``after``."""
    return fires_between(schedule, after, datetime.max.replace(tzinfo=UTC), limit=count)
