"""The field rules: what one value must be, whatever the other fields say.

Pure: no ORM, no queries, no task state read; the models import these (their field
validators), and so do the services, whose cross-field and state rules
(``tasks_app.services.task_rules``) build on them. Each check raises Django's
``ValidationError`` keyed by the field it is about, so the admin shows it next to the field,
the API returns it in ``detail`` and the CLI prints it. A rule is worded once, here: every
entry point shows the same sentence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.utils import timezone

from ..conf import app_settings
from ..timing import scheduling
from .choices import ScheduleType

if TYPE_CHECKING:
    from ..models import Task

# --- numeric bounds -------------------------------------------------------------------------
# Every number a task carries has a range that its integer column and Python's date
# arithmetic (years 1..9999) can hold. The model fields take their validators from here
# (so the admin form, the API serializers and the services refuse the same values with the
# same message), and the database enforces the same ranges with CHECK constraints.

# Durations (seconds) that are added to or subtracted from instants: at most a year
# (catchup_window_seconds 10**15 overflowed date arithmetic). A fixed bound, not
# TASKS_MAX_DELAY_SECONDS: the defaults (catchup window one hour) must stay valid however short
# a deployment sets its maximum delay.
MAX_DURATION_SECONDS = 366 * 86400
MAX_JITTER_SECONDS = 86400
# An integer column (Postgres ``integer``) holds at most this.
MAX_INTEGER = 2**31 - 1

# A task's priority when none is given (within NUMERIC_BOUNDS["priority"]).
DEFAULT_PRIORITY = 5


@dataclass(frozen=True)
class Bounds:
    low: int
    high: int
    why: str


# A task's id: slug characters, starting with a letter or digit (``models.task_id_validator``).
TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
TASK_ID_MAX_LENGTH = 100

NUMERIC_BOUNDS: dict[str, Bounds] = {
    "priority": Bounds(0, 9, "the broker's priority levels"),  # default: DEFAULT_PRIORITY
    "max_retries": Bounds(0, 100, "retries of one run"),
    "retry_backoff_seconds": Bounds(0, MAX_DURATION_SECONDS, "366 days"),
    "timeout_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    "expires_after_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    # The upper bound is TASKS_MAX_DELAY_SECONDS too (check_interval: a setting).
    "interval_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    "max_runs": Bounds(1, MAX_INTEGER, "an integer column"),
    "jitter_seconds": Bounds(0, MAX_JITTER_SECONDS, "one day"),
    "catchup_window_seconds": Bounds(0, MAX_DURATION_SECONDS, "366 days"),
    "pause_after_failures": Bounds(1, 10_000, "consecutive failures"),
    "alert_after_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    # Retention: a cutoff further back than the date arithmetic reaches overflowed there.
    "keep_runs_days": Bounds(1, 36_525, "100 years"),
    "keep_runs_count": Bounds(1, MAX_INTEGER, "an integer column"),
    "concurrency_limit": Bounds(1, 100_000, "runs at once"),
    "concurrency_limit_per_key": Bounds(1, 100_000, "runs at once"),
    "unique_for_seconds": Bounds(0, MAX_DURATION_SECONDS, "366 days"),
}

# Unique calls (docs/flow-control.md): a call's key, what a task's policy names as its key,
# and what a call does when the key is held by a waiting run.
UNIQUE_KEY_MAX_LENGTH = 200
UNIQUE_ON_MAX_LENGTH = 100
UNIQUE_ON_WHOLE_CALL = "*"
ON_DUPLICATE_RETURN = "return"
ON_DUPLICATE_REPLACE = "replace"
ON_DUPLICATE_CHOICES = (ON_DUPLICATE_RETURN, ON_DUPLICATE_REPLACE)
UNIQUE_ON_PATTERN = r"^(\*|[A-Za-z_][A-Za-z0-9_]*)$"
NEEDS_UNIQUE_ON = "needs unique_on: without it the task's calls have no key"
UNIQUE_ON_RULE = (
    "must be blank, '*' (the whole call's arguments) or the name of a keyword argument "
    "or payload field (letters, digits and '_', not starting with a digit)"
)


def bounds_validators(name: str) -> list[MinValueValidator | MaxValueValidator]:
    """The model field validators of ``NUMERIC_BOUNDS[name]`` (DRF reads them as the
    serializer's ``min_value``/``max_value``, so the OpenAPI schema shows them too)."""
    bounds = NUMERIC_BOUNDS[name]
    return [MinValueValidator(bounds.low), MaxValueValidator(bounds.high)]


# Instants a schedule may name: from the Unix epoch to 100 years ahead. Wider ones are
# refused here rather than overflowing date arithmetic later (a start_at in year 9999 made
# the next-fire computation, and the preview, fail with a 500).
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_AHEAD = timedelta(days=36525)
NAIVE_INSTANT = "must include a time-zone offset (e.g. 'Z' or '+02:00')"

# --- schedules ------------------------------------------------------------------------------
# The field each kind of schedule needs, and how its absence is worded (the task's own
# rules in tasks_app.services.task_rules and the admin's live preview both say it so).
REQUIRED_FOR_SCHEDULE = {
    ScheduleType.ONCE: ("run_at", "is required for a 'once' schedule"),
    ScheduleType.INTERVAL: ("interval_seconds", "is required for an 'interval' schedule"),
    ScheduleType.CRON: ("cron", "is required for a 'cron' schedule"),
}


def between(low: int, high: int) -> str:
    """How a count asked for outside its range is worded (``--count``, ``?count=``)."""
    return f"must be between {low:,} and {high:,}"


def not_both(first: str, second: str) -> str:
    """How two fields that exclude each other are worded when both are given."""
    return f"give either {first} or {second}, not both"


def cron_problem(exc: Exception) -> str:
    """How a cron expression that does not parse is worded."""
    return f"invalid cron expression: {exc}"


# --- text and JSON -------------------------------------------------------------------------
# What Postgres cannot store, or Python cannot walk, is refused as bad input naming the
# field (and, inside a payload, the path), rather than failing at the INSERT with a 500:
# - U+0000 (NUL): Postgres text and jsonb cannot hold it;
# - a lone surrogate ("\ud800", a legal JSON escape, and what Python makes of bytes that are
#   not UTF-8 in a command-line argument): it cannot be encoded as UTF-8 for the database;
# - a number that is not finite (NaN, Infinity, or 1e400, which Python reads as infinity):
#   JSON has no such number, and jsonb refuses it;
# - JSON nested deeper than MAX_JSON_DEPTH levels: deep enough for any payload, shallow
#   enough that validation and serialization never reach Python's recursion limit;
# - JSON longer than MAX_JSON_BYTES (UTF-8): a payload is carried by every run and message.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"nests deeper than {MAX_JSON_DEPTH} levels"
MAX_JSON_BYTES = 1024 * 1024
TOO_LARGE = f"is larger than {MAX_JSON_BYTES:,} bytes as JSON"
NOT_FINITE = "numbers must be finite (NaN, Infinity and numbers beyond ±1.8e308 are not JSON)"
TEXT_FIELDS = ("id", "name", "description", "action", "queue", "cron", "timezone")


def string_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as it is, or None."""
    if "\x00" in text:
        return "must not contain NUL (\\u0000) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone surrogates (\\ud800-\\udfff): they are not Unicode text"
    return None


def json_problem(value: Any, path: str = "", depth: int = 0) -> tuple[str, str] | None:
    """The first ``(where, what)`` that makes a parsed JSON value unstorable, or None.

    ``where`` is a dotted path (``payload.items.0``); nesting too deep is reported at the
    top-level field it is under (``""`` for the value itself)."""
    if depth > MAX_JSON_DEPTH:
        return path.split(".")[0], TOO_DEEP
    if isinstance(value, str):
        problem = string_problem(value)
        return None if problem is None else (path, problem)
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, NOT_FINITE)
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            problem = string_problem(str(key))
            if problem is not None:
                return path, f"keys {problem}"
            found = json_problem(item, where, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = json_problem(item, f"{path}.{index}" if path else str(index), depth + 1)
            if found is not None:
                return found
    return None


def json_value_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """:func:`json_problem`, then the size: the one check of a JSON value every way in
    shares (a parsed body, a form's text, a command-line option, a call's arguments)."""
    found = json_problem(value, path)
    if found is not None:
        return found
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError):  # not JSON at all: the caller's own check words it
        return None
    return (path, TOO_LARGE) if size > MAX_JSON_BYTES else None


class JSONProblem(ValueError):
    """Why JSON text cannot be taken: ``where`` (a dotted path inside the value, ``""`` for
    the value itself) and ``what``; ``unreadable`` when the text is not JSON at all."""

    def __init__(self, where: str, what: str, *, unreadable: bool = False) -> None:
        super().__init__(f"{where}: {what}" if where else what)
        self.where, self.what, self.unreadable = where, what, unreadable

    def at(self, field: str) -> str:
        """The message on ``field`` (a form's field, a command-line option)."""
        if not self.where or self.what == TOO_DEEP:  # depth is the whole field's
            return self.what
        return f"at {field}.{self.where}: {self.what}"


def read_json(text: str | bytes, *, content: bool = True, sized: bool = True) -> Any:
    """The value of the JSON ``text`` a person gave, read with every guard, or
    :class:`JSONProblem`: not UTF-8 or not JSON, longer than ``MAX_JSON_BYTES``, nested
    deeper than ``MAX_JSON_DEPTH`` (past the parser's own limit, 100,000 levels raise
    ``RecursionError`` inside it: caught, and the place found by a scan that does not
    recurse), or holding what Postgres cannot store, a number that is not finite included
    (Python reads ``NaN``, ``Infinity`` and ``1e400`` as floats; :func:`json_problem` then
    names where they are, so the message says which field).

    The one entrance of JSON text: the API's body, the admin's payload fields and "Run now
    with..." (:func:`parse_json`), the CLI's ``--payload``. ``content=False`` reads only
    (not JSON, too large, too deep for the parser), for a caller whose value goes to a
    service that checks the content with :func:`storable_errors` (the CLI: a refused value
    is then its field's error, exit status 1, not a usage error). ``sized=False`` leaves the
    size to the caller (the API: its body limit, and the services' check of the payload)."""
    if isinstance(text, bytes):
        if sized and len(text) > MAX_JSON_BYTES:
            raise JSONProblem("", TOO_LARGE)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONProblem("", f"not UTF-8: {exc}", unreadable=True) from None
    if sized and len(text.encode("utf-8", "surrogatepass")) > MAX_JSON_BYTES:
        raise JSONProblem("", TOO_LARGE)
    try:
        value = json.loads(text)
    except RecursionError:  # the parser's own limit (about 1,000 levels): name where it is
        raise JSONProblem(_too_deep(text)[1] or "", TOO_DEEP) from None
    except ValueError as exc:
        raise JSONProblem("", f"not valid JSON: {exc}", unreadable=True) from None
    found = None if not content else json_value_problem(value) if sized else json_problem(value)
    if found is not None:
        raise JSONProblem(*found)
    return value


def parse_json(text: str | bytes, *, field: str) -> Any:
    """:func:`read_json`, its refusal a ``ValidationError`` on ``field`` (``at
    payload.items.0: ...`` for a place inside the value)."""
    try:
        return read_json(text)
    except JSONProblem as exc:
        raise ValidationError({field: [exc.at(field)]}) from None


def string_problem_of(value: Any) -> str | None:
    return string_problem(value) if isinstance(value, str) else None


def check_text(value: Any, *, field: str) -> None:
    """Refuse a string the database cannot store (``ValidationError`` naming ``field``)."""
    if (problem := string_problem_of(value)) is not None:
        raise ValidationError({field: [problem]})


def storable_errors(task: Task) -> dict[str, list[str]]:
    """What of ``task``'s text fields and payload Postgres cannot store, by field (empty:
    all of it can). Nothing else may walk or store a payload this reports."""
    errors: dict[str, list[str]] = {}
    for name in TEXT_FIELDS:
        if (problem := string_problem_of(getattr(task, name))) is not None:
            errors[name] = [problem]
    found = json_value_problem(task.payload, "payload")
    if found is not None:  # reported on the field (a form has no "payload.items.0")
        where, what = found
        errors["payload"] = [what if where == "payload" else f"at {where}: {what}"]
    return errors


def check_storable(task: Task) -> None:
    """Refuse a task whose text or payload Postgres cannot store (``Task.clean``)."""
    if errors := storable_errors(task):
        raise ValidationError(errors)


# --- the pause note ---------------------------------------------------------------------------
# Optional (a pause from a script or a bulk action need not explain itself), at most
# PAUSE_NOTE_MAX_LENGTH characters whoever writes it: a person through the admin, the API or
# the CLI, or the engine's auto-pause, whose note is shortened to fit (fit_pause_note).
PAUSE_NOTE_MAX_LENGTH = 2000
PAUSE_NOTE_TOO_LONG = f"must be at most {PAUSE_NOTE_MAX_LENGTH:,} characters"


def check_pause_note(note: str, *, field: str = "note") -> str:
    """The note as stored (surrounding white space dropped), or ``ValidationError``."""
    check_text(note, field=field)
    text = note.strip()
    if len(text) > PAUSE_NOTE_MAX_LENGTH:
        raise ValidationError({field: [PAUSE_NOTE_TOO_LONG]})
    return text


def fit_pause_note(text: str) -> str:
    """``text`` shortened to the pause note's length, marked with an ellipsis when cut."""
    text = text.strip()
    if len(text) <= PAUSE_NOTE_MAX_LENGTH:
        return text
    return text[: PAUSE_NOTE_MAX_LENGTH - 1].rstrip() + "…"


# --- queues ---------------------------------------------------------------------------------
# Queue names every transport takes as they are (a name is also a file name on Kombu's
# filesystem transport and a routing key elsewhere): no '/', '\\', whitespace or control
# characters, and not '.' or '..'; 'amq.' is RabbitMQ's reserved prefix.
QUEUE_NAME_RE = r"^(?!amq\.)(?!\.\.?\Z)[^\s/\\\x00-\x1f\x7f]+\Z"
# A rate limit: "<starts>/<period>", the period s, m, h or d (Celery's spelling, and a day);
# the spacing of starts it asks for is tasks_app_rate_step (store/schema.sql).
RATE_PATTERN = r"^([1-9][0-9]{0,5})/([smhd])$"
rate_validator = RegexValidator(
    RATE_PATTERN,
    "Use <starts>/<period>: a whole number from 1 to 999999, then /s, /m, /h or /d "
    "(e.g. 10/s, 100/m).",
)
# A task's flow_key: the name of a payload field (a @task function's argument), or a dotted
# path into nested objects (customer.id).
flow_key_validator = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$",
    "Use a payload field name (letters, digits and '_'), or a dotted path such as customer.id.",
)


queue_name_validator = RegexValidator(
    QUEUE_NAME_RE,
    "No spaces, '/', '\\' or control characters; not '.' or '..', and not starting with "
    "'amq.' (reserved by RabbitMQ).",
)


def configured_queues() -> list[str]:
    """The queues a task may name: ``TASKS_QUEUES`` (the queues the workers consume)."""
    return list(app_settings.QUEUES)


def check_queue(value: str) -> None:
    """A queue name the broker takes and a worker consumes (in ``TASKS_QUEUES``); a run
    sent anywhere else would wait forever."""
    queue_name_validator(value)
    allowed = configured_queues()
    if value not in allowed:
        raise ValidationError(
            f"{value!r} is not a configured queue; configured (TASKS_QUEUES): {', '.join(allowed)}"
        )


def seconds_text(seconds: float) -> str:
    """A span of seconds as every message words it: ``365 days (31,536,000 s)``, ``90 s``."""
    exact = f"{seconds:,.0f} s" if float(seconds).is_integer() else f"{seconds:,} s"
    days, rest = divmod(float(seconds), 86400)
    if days < 1 or rest:
        return exact
    return f"{days:,.0f} day{'' if days == 1 else 's'} ({exact})"


def max_delay_message(*, ahead: bool = False) -> str:
    """The rule of ``TASKS_MAX_DELAY_SECONDS``, one sentence for every field it bounds (a
    delay, an expiry, an interval; ``ahead``: an instant, measured from now)."""
    limit = seconds_text(app_settings.MAX_DELAY_SECONDS)
    return f"must be at most {limit}{' from now' if ahead else ''}, the TASKS_MAX_DELAY_SECONDS setting"


def max_delay() -> timedelta:
    return timedelta(seconds=app_settings.MAX_DELAY_SECONDS)


NEGATIVE_DELAY = "must not be negative"


def delay_bounds() -> tuple[float, float]:
    """A delay's bounds in seconds, ``[0, TASKS_MAX_DELAY_SECONDS]``: :func:`check_delay`
    checks them, the API's fields of seconds show them in the schema."""
    return 0.0, float(app_settings.MAX_DELAY_SECONDS)


# A one-off run needs its instant: after a delay or at a time (exactly one of them).
ONE_RUN_WHEN = "give delay_seconds or run_at"


def priority_text() -> str:
    """The priority's range and default, for a help text."""
    bounds = NUMERIC_BOUNDS["priority"]
    return f"{bounds.low}-{bounds.high} (default {DEFAULT_PRIORITY})"


def check_delay(delay_seconds: float, *, field: str = "delay_seconds") -> timedelta:
    """A delay must be a finite number of seconds in ``[0, TASKS_MAX_DELAY_SECONDS]``."""
    try:
        value = float(delay_seconds)
    except (TypeError, ValueError) as exc:
        raise ValidationError({field: ["must be a number of seconds"]}) from exc
    if value != value or value in (float("inf"), float("-inf")):
        raise ValidationError({field: ["must be a finite number of seconds"]})
    low, high = delay_bounds()
    if value < low:
        raise ValidationError({field: [NEGATIVE_DELAY]})
    if value > high:
        raise ValidationError({field: [max_delay_message()]})
    return timedelta(seconds=value)


def check_interval(interval_seconds: int, *, field: str = "interval_seconds") -> None:
    """A recurring interval is a delay between fires: ``TASKS_MAX_DELAY_SECONDS`` bounds it
    too (above the field's own bound, the field validator speaks)."""
    if app_settings.MAX_DELAY_SECONDS < interval_seconds <= NUMERIC_BOUNDS["interval_seconds"].high:
        raise ValidationError({field: [max_delay_message()]})


def check_run_at(run_at: datetime, *, now: datetime, field: str = "run_at") -> datetime:
    """``run_at`` must be aware, not in the past beyond a small grace, nor too far ahead."""
    if timezone.is_naive(run_at):
        raise ValidationError({field: [NAIVE_INSTANT]})
    grace = timedelta(seconds=app_settings.RUN_AT_GRACE_SECONDS)
    if run_at < now - grace:
        raise ValidationError(
            {field: [f"is in the past ({run_at.isoformat()}); give a future instant"]}
        )
    if run_at > now + max_delay():
        raise ValidationError({field: [max_delay_message(ahead=True)]})
    return run_at


def check_instant(value: datetime, *, field: str, now: datetime | None = None) -> datetime:
    """An aware instant between ``EARLIEST_INSTANT`` and ``LATEST_AHEAD`` from now."""
    if timezone.is_naive(value):
        raise ValidationError({field: [NAIVE_INSTANT]})
    # A bound of centuries: the host's clock is as good as the database's for it.
    latest = (now or timezone.now()) + LATEST_AHEAD
    if not EARLIEST_INSTANT <= value <= latest:
        raise ValidationError(
            {field: [f"must be between 1970-01-01 and {latest.year - 1}-12-31 (UTC)"]}
        )
    return value


def check_stored_schedule(task: Task, *, next_run_at: datetime | None, now: datetime) -> None:
    """What the schedule arithmetic needs of a task as it is (stored, maybe before today's
    rules): a known zone, a cron that parses, instants within the range, ``next_run_at`` (the
    stored next fire, as beat will plan from it; ``None`` for an unsaved task) included.
    Raises ``ValidationError`` naming the field, so a preview answers 400, not 500."""
    errors: dict[str, list[str]] = {}
    try:
        scheduling.get_zone(task.timezone or "UTC")
    except scheduling.ZoneError as exc:
        errors["timezone"] = [str(exc)]
    if task.schedule_type == ScheduleType.CRON:
        try:
            scheduling.parse_cron(task.cron)
        except scheduling.CronError as exc:
            errors["cron"] = [cron_problem(exc)]
    instants = {name: getattr(task, name) for name in ("start_at", "end_at", "run_at")}
    if task.schedule_type != ScheduleType.ONCE:
        del instants["run_at"]
    instants["next_run_at"] = next_run_at
    for name, value in instants.items():
        if value is not None:
            try:
                check_instant(value, field=name, now=now)
            except ValidationError as exc:
                errors[name] = list(exc.messages)
    if errors:
        raise ValidationError(errors)


def too_deep_at(text: str) -> str | None:
    """The top-level key of the JSON object ``text`` whose value nests deeper than
    ``MAX_JSON_DEPTH`` (the field :func:`json_problem` names), found without recursion;
    ``None`` when the culprit is not under a key of a top-level object."""
    return _too_deep(text)[1]


def _too_deep(text: str) -> tuple[bool, str | None]:
    """Whether ``text`` nests deeper than ``MAX_JSON_DEPTH`` (read without recursion, so
    before any parser recurses) and, if so, the top-level key it is under (or ``None``)."""
    depth, in_string, escaped = 0, False, False
    last = ""  # the last character outside strings that is not white space
    key_start, key = -1, None
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string, last = False, '"'
                if key_start >= 0:
                    key, key_start = text[key_start:index], -1
        elif char == '"':
            in_string = True
            if depth == 1 and last in "{,":
                key_start = index + 1
        elif not char.isspace():
            last = char
            if char in "{[":
                depth += 1
                if depth > MAX_JSON_DEPTH + 1:
                    return True, key
            elif char in "}]":
                depth -= 1
    return False, None


def check_unique_key(key: Any, *, field: str = "unique_key") -> str:
    """A call's uniqueness key: text of 1 to ``UNIQUE_KEY_MAX_LENGTH`` characters that
    Postgres stores. ``ValidationError`` on ``field`` otherwise."""
    if not isinstance(key, str) or not key:
        raise ValidationError({field: ["must be a non-empty text"]})
    if len(key) > UNIQUE_KEY_MAX_LENGTH:
        raise ValidationError(
            {field: [f"must be at most {UNIQUE_KEY_MAX_LENGTH} characters (it has {len(key)})"]}
        )
    check_text(key, field=field)
    return key


def check_unique_for(seconds: Any, *, field: str = "unique_for_seconds") -> int:
    """A key's window in whole seconds, within ``NUMERIC_BOUNDS["unique_for_seconds"]``."""
    bounds = NUMERIC_BOUNDS["unique_for_seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise ValidationError({field: ["must be a whole number of seconds"]})
    if not bounds.low <= seconds <= bounds.high:
        raise ValidationError({field: [between(bounds.low, bounds.high)]})
    return seconds


def check_on_duplicate(value: Any, *, field: str = "on_duplicate") -> str:
    """What a call does when its key is held: ``return`` or ``replace``."""
    if value not in ON_DUPLICATE_CHOICES:
        raise ValidationError(
            {field: [f"must be one of {', '.join(ON_DUPLICATE_CHOICES)} (got {value!r})"]}
        )
    return str(value)


# --- a refusal as text -----------------------------------------------------------------------


def one_line(exc: ValidationError) -> str:
    """A ``ValidationError`` as one line, as the admin's messages, the CLI and the tasks
    framework's ``InvalidTask`` word it: ``note: must be at most 2,000 characters``, each
    field's messages after its name, fields apart by ``; ``; a message tied to no field
    (``__all__``, or an error without fields) without a name."""
    if hasattr(exc, "error_dict"):
        parts = [f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()]
        return "; ".join(parts).replace("__all__: ", "")
    return " ".join(exc.messages)
