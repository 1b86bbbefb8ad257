"""The task form: the action select (only the actions the user may use), the payload as
JSON text, and the optional one-off delay."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.forms.fields import InvalidJSONInput, JSONString

from .. import actions, services
from ..models import Task
from ..services import django_task_paths, permissions
from ..services.task_operations import schedule_makes_runs
from ..services.task_rules import validate_task
from ..vocabulary import secret_fields, validation


def _action_choices(user: Any = None) -> list[tuple[str, str]]:
    """Each registered action (that ``user``, if given, may use) with its one-line
    description, as the select shows it."""
    offered = actions.all_actions() if user is None else permissions.usable_actions(user)
    return [(a.name, f"{a.name} — {a.description}") for a in offered]


def action_schemas() -> dict[str, dict[str, Any]]:
    """What the payload form is built from: each action's description and payload schema."""
    return {
        a.name: {"description": a.description, "schema": a.schema_for_form()}
        for a in actions.all_actions()
    }


def _on_the_form(exc: ValidationError, fields: dict[str, Any]) -> ValidationError:
    """``exc`` with each error on a field the form does not show (read-only: a task declared
    in code) moved to the form's own errors, naming the field: the page says it, where
    Django would raise for an error on a field it does not have."""
    if not hasattr(exc, "error_dict"):
        return exc
    shown: dict[str, list[str]] = {}
    for name, messages in exc.message_dict.items():
        if name in fields or name == NON_FIELD_ERRORS:
            shown.setdefault(name, []).extend(messages)
        else:
            shown.setdefault(NON_FIELD_ERRORS, []).extend(f"{name}: {m}" for m in messages)
    return ValidationError(shown)


class ActionField(forms.ChoiceField):
    """A select of the registered actions. Whether a name is registered is decided by
    ``services.task_rules.validate_task`` (one rule, one message naming the known actions)."""

    def valid_value(self, value: str) -> bool:
        return True


class PayloadField(forms.JSONField):
    """The payload as JSON text, read by ``validation.read_json`` (the one reader of JSON
    text: what cannot be stored — lone surrogates, NUL, numbers that are not finite, nesting
    past ``MAX_JSON_DEPTH``, more than ``MAX_JSON_BYTES`` — is a form error on the field), and
    a refused payload is shown again as it was typed (re-encoding it would fail)."""

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values:
            return None
        if isinstance(value, list | dict | int | float | JSONString):
            return value
        try:
            data = validation.read_json(value)
        except validation.JSONProblem as exc:
            raise ValidationError(exc.at("payload")) from None
        return JSONString(data) if isinstance(data, str) else data

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled:
            return initial
        return None if data is None else InvalidJSONInput(data)


class TaskForm(forms.ModelForm):
    action = ActionField(
        choices=_action_choices,
        help_text="What a run does. The payload form below follows the action's schema.",
    )
    delay_seconds = forms.FloatField(
        required=False,
        label="Run once after (seconds)",
        help_text="Optional: on save, also schedule one run this many seconds from now.",
    )

    class Meta:
        model = Task
        fields = ("id", *services.TASK_FIELDS)
        field_classes = {"payload": PayloadField}
        widgets = {
            "timezone": forms.TextInput(attrs={"list": "tasks-zones", "autocomplete": "off"}),
            "cron": forms.TextInput(
                attrs={"size": 30, "class": "tasks-mono", "placeholder": "*/5 * * * *"}
            ),
            "payload": forms.Textarea(attrs={"rows": 6, "cols": 60, "class": "tasks-mono"}),
        }

    # The user the form is for (set by ``TaskAdmin.get_form``): the actions they may use.
    user: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields.get("action")
        if field is None:  # read-only: the task is declared in code
            return
        assert isinstance(field, ActionField)
        current = self.instance.action if self.instance else ""
        offered = _action_choices(self.user)
        if current and current not in {a.name for a in actions.all_actions()}:
            # Keep an action that is no longer registered visible; saving it is refused.
            field.choices = [(current, f"{current} — not registered"), *offered]
        elif current and current not in {name for name, _ in offered}:
            # Shown as it is; saving is refused unless the user picks one they may use.
            needs = permissions.required_permission(current)
            field.choices = [(current, f"{current} — needs the permission {needs}"), *offered]
        elif not current:
            field.choices = [("", "— choose an action —"), *offered]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.user is not None and "action" in cleaned:
            stored = None if self.instance._state.adding else self.initial.get("action")
            try:
                permissions.check_actions(self.user, *filter(None, (stored, cleaned["action"])))
            except permissions.ActionNotPermitted as exc:
                self.add_error("action", exc.sentence)
        if self.user is not None and cleaned.get("delay_seconds") is not None:
            self._check_runs_created("delay_seconds")
        return cleaned

    def _check_runs_created(self, field: str) -> None:
        """A delay, or a schedule that makes runs, creates runs: the services refuse it
        without the run permission, so say it on the field before saving anything."""
        missing = permissions.missing_permissions(self.user, "execute")
        if missing:
            self.add_error(
                field if field in self.fields else None,
                f"This creates runs, which needs {', '.join(missing)}.",
            )

    def _update_errors(self, errors: ValidationError) -> None:
        # Every error, the model's own checks' (``Task.clean``) included, on a field the
        # form shows, or else on the form naming the field: a task declared in code has its
        # definition read-only, and Django raises for an error on a field the form lacks.
        super()._update_errors(_on_the_form(errors, self.fields))  # type: ignore[misc]

    def clean_payload(self) -> Any:
        # The form shows each stored secret as "set" (``TaskAdmin.get_object``): sent back
        # as "set", it stands for the stored value, which the model's checks must see.
        payload = self.cleaned_data.get("payload")
        stored = None if self.instance._state.adding else Task.objects.filter(pk=self.instance.pk)
        row = stored.values("action", "payload").first() if stored is not None else None
        if row is None:
            return payload
        try:  # a secret does not follow a URL to another origin (secret_fields)
            return secret_fields.payload_merged(
                self.cleaned_data.get("action") or self.instance.action,
                payload,
                stored_action=row["action"],
                stored=row["payload"],
            )
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["payload"]) from exc

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # the field rules (Task.full_clean)
        adding = self.instance._state.adding
        stored = (
            None if adding else (self.initial.get("run_at"), self.initial.get("schedule_type", ""))
        )
        previous = None if adding else Task.objects.filter(pk=self.instance.pk).first()
        # A function's own task calls the function code chose, as task_save has it.
        own = django_task_paths.chosen_in_code(self.instance, previous=previous)
        try:  # the rules that span fields, next to the field each is about
            with django_task_paths.own_function_checked(own):
                validate_task(self.instance, stored=stored)
        except ValidationError as exc:
            self._update_errors(exc)
        if self.user is not None and "schedule_type" not in self.errors:
            if schedule_makes_runs(self.instance, previous=previous):
                self._check_runs_created("schedule_type")

    def clean_delay_seconds(self) -> float | None:
        value = self.cleaned_data.get("delay_seconds")
        if value is None:
            return None
        try:
            validation.check_delay(value)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["delay_seconds"]) from exc
        return value
