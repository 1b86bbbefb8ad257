"""The app's settings (tasks_app/conf.py): defaults when a project sets nothing, a clear
``ImproperlyConfigured`` naming the setting for a bad value, the environment's spelling of
each type, and the docs' settings table written from the same declarations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from tasks_app.conf import (
    AppSettings,
    DeploymentSettings,
    app_settings,
    environ_settings,
    settings_table,
)
from tests.shared import manage

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
DECLARED = {setting.name: setting for setting in AppSettings.declared()}


def test_a_project_that_sets_nothing_gets_the_documented_defaults(settings: Any) -> None:
    for name in DECLARED:
        if hasattr(settings, name):
            delattr(settings, name)
    settings.CELERY_TASK_DEFAULT_QUEUE = "work"
    assert app_settings.MAX_DELAY_SECONDS == 365 * 24 * 3600
    assert app_settings.DEFAULT_TIMEOUT_SECONDS == 3600
    assert app_settings.OUTPUT_LIMIT_BYTES == 64 * 1024
    assert app_settings.EXEC_ALLOWLIST == []  # exec disabled unless a project enables it
    assert app_settings.COMMAND_ALLOWLIST == ["check", "clearsessions", "showmigrations"]
    assert app_settings.METRICS_ALLOWED_NETWORKS == ["127.0.0.0/8", "::1/128"]
    assert app_settings.QUEUE_TYPE == "classic"
    # The queues a task may name follow the project's Celery default queue.
    assert app_settings.QUEUES == ["work"]


def test_a_changed_setting_is_used_at_once(settings: Any) -> None:
    settings.TASKS_MAX_DELAY_SECONDS = 60
    assert app_settings.MAX_DELAY_SECONDS == 60.0
    settings.TASKS_MAX_DELAY_SECONDS = 120
    assert app_settings.MAX_DELAY_SECONDS == 120.0


BAD_VALUES = {
    "a word for a number": (
        "TASKS_STALL_SECONDS",
        "soon",
        "TASKS_STALL_SECONDS must be a number > 0, not 'soon'",
    ),
    "zero where it must be positive": (
        "TASKS_BEAT_TICK_SECONDS",
        0,
        "TASKS_BEAT_TICK_SECONDS must be a number > 0, not 0",
    ),
    "a share above one": (
        "TASKS_RETENTION_SHARE",
        2,
        "TASKS_RETENTION_SHARE must be a number between 0.01 and 1, not 2",
    ),
    "NaN, which every comparison lets through": (
        "TASKS_API_TOKEN_DAYS",
        float("nan"),
        "TASKS_API_TOKEN_DAYS must be a number between 0 and 366, not nan",
    ),
    "infinity for a number without an upper bound": (
        "TASKS_BEAT_TICK_SECONDS",
        float("inf"),
        "TASKS_BEAT_TICK_SECONDS must be a number > 0, not inf",
    ),
    "a fraction for a whole number": (
        "TASKS_DEFAULT_TIMEOUT_SECONDS",
        0.5,
        "TASKS_DEFAULT_TIMEOUT_SECONDS must be a whole number >= 1, not 0.5",
    ),
    "a string for a flag": (
        "TASKS_BEAT_LOG_TICKS",
        "yes",
        "TASKS_BEAT_LOG_TICKS must be True or False, not 'yes'",
    ),
    "an unknown queue type": (
        "TASKS_QUEUE_TYPE",
        "mirrored",
        "TASKS_QUEUE_TYPE must be 'classic' or 'quorum', not 'mirrored'",
    ),
    "a number in a list of names": (
        "TASKS_QUEUES",
        ["celery", 7],
        "TASKS_QUEUES must be a list of strings (or one comma-separated string), not ['celery', 7]",
    ),
    "a network that is not one": (
        "TASKS_HTTP_ALLOWED_NETWORKS",
        ["10.0.0.0/8", "10.0.0.300/32"],
        "TASKS_HTTP_ALLOWED_NETWORKS must be a list of networks in CIDR notation "
        "(e.g. 10.0.0.0/8); '10.0.0.300/32' is not a network",
    ),
}


@pytest.mark.parametrize(("name", "value", "message"), BAD_VALUES.values(), ids=BAD_VALUES)
def test_a_bad_value_is_refused_naming_the_setting_and_the_rule(
    settings: Any, name: str, value: object, message: str
) -> None:
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured) as info:
        getattr(app_settings, name.removeprefix("TASKS_"))
    assert message in str(info.value)
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        app_settings.check()  # what the app runs when Django starts


def test_the_environment_spells_each_type() -> None:
    values = environ_settings(
        {
            "TASKS_STALL_SECONDS": "90",
            "TASKS_MAX_INTERRUPTIONS": "5",
            "TASKS_BEAT_LOG_TICKS": "yes",
            "TASKS_COMMAND_ALLOWLIST": "check, migrate,",
            "TASKS_EXEC_ALLOWLIST": "",  # empty list: exec stays disabled
            "TASKS_RELEASE_BATCH": "",  # an empty number counts as unset
            "TASKS_QUEUE_TYPE": " Quorum ",
            "HOME": "/root",  # not the app's
        }
    )
    assert values == {
        "TASKS_STALL_SECONDS": 90.0,
        "TASKS_MAX_INTERRUPTIONS": 5,
        "TASKS_BEAT_LOG_TICKS": True,
        "TASKS_COMMAND_ALLOWLIST": ["check", "migrate"],
        "TASKS_EXEC_ALLOWLIST": [],
        "TASKS_QUEUE_TYPE": "quorum",
    }


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("TASKS_MAX_INTERRUPTIONS", "three", "must be a whole number >= 0, not 'three'"),
        ("TASKS_STALL_SECONDS", "-1", "must be a number > 0, not '-1'"),
        ("TASKS_API_TOKEN_DAYS", "nan", "must be a number between 0 and 366, not 'nan'"),
        ("TASKS_STALL_SECONDS", "inf", "must be a number > 0, not 'inf'"),
        ("TASKS_BEAT_LOG_TICKS", "maybe", "must be one of 1, true, yes, on, 0, false, no, off"),
    ],
)
def test_a_bad_environment_variable_is_refused_naming_it(
    name: str, text: str, message: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=f"^{name} {re.escape(message)}"):
        environ_settings({name: text})


def test_a_bad_value_stops_the_process_at_start_in_one_line() -> None:
    done = manage(
        "check",
        DATABASE_URL="postgres://app@db.internal:5432/tasks",
        DJANGO_SECRET_KEY="test-secret-not-for-production",
        TASKS_STALL_SECONDS="soon",
    )
    assert done.returncode != 0
    assert (
        "ImproperlyConfigured: TASKS_STALL_SECONDS must be a number > 0, not 'soon'"
        in done.stderr.strip().splitlines()[-1]
    )


def test_the_docs_settings_table_is_the_declared_one() -> None:
    text = OPERATIONS.read_text()
    block = re.search(
        r"<!-- BEGIN settings table[^\n]*-->\n(.*?)<!-- END settings table -->", text, re.S
    )
    assert block is not None, "docs/operations.md has no settings table block"
    assert block.group(1) == settings_table(), (
        "docs/operations.md's settings table differs from tasks_app/conf.py; paste the output "
        "of `python -m tasks_app.conf` between its BEGIN and END lines"
    )


def _deployment_variables() -> set[str]:
    """The TASKS_* variables of the deployment (project/settings.py), declared in the app."""
    return {setting.name for setting in DeploymentSettings.declared()}


def test_the_project_reads_no_tasks_variable_but_through_the_app() -> None:
    """Every TASKS_* variable is parsed by tasks_app.conf: the demo project's code reads
    none of them from the environment itself."""
    offenders = [
        f"{path.name}: {name}"
        for path in sorted((ROOT / "project").glob("*.py"))
        for name in re.findall(
            r"(?:environ(?:\.get\(|\[)|env_\w+\()\s*[\"'](TASKS_[A-Z0-9_]+)", path.read_text()
        )
    ]
    assert offenders == []


def test_every_setting_the_docs_name_exists_with_the_default_they_give() -> None:
    known = set(DECLARED) | _deployment_variables()
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text()
        for name in set(re.findall(r"\bTASKS_[A-Z0-9_]*[A-Z0-9]\b", text)):
            assert name in known, f"{path.name} names {name}, which no setting declares"
        # A table row "| `TASKS_X` | default ... | ..." anywhere starts with the declared default.
        for name, cell in re.findall(r"^\| `(TASKS_[A-Z0-9_]+)` \| ([^|]+) \|", text, re.M):
            setting = DECLARED.get(name)
            if setting is None or callable(setting.default):
                continue
            declared = setting.show(setting.default_value())
            assert cell.strip().startswith(declared), (
                f"{path.name} gives {name} the default {cell.strip()}, not {declared}"
            )
