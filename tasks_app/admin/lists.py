"""What the admin's long lists (tasks, runs, django-celery-beat's entries) share: filters on
the values in use of a column (a task's action and queue, an entry's Celery task) and the
rows' selection checkbox.

Django's ``AllValuesFieldListFilter`` finds its choices with ``SELECT DISTINCT`` over the
whole table on every page load; these read the values in use through the column's index
(``selectors.values_in_use``), so the list costs the same with 1,000 rows or 1,000,000.
The query parameter is the one Django's filter used (``?action=``, ``?task__action=``,
``?queue=``, ``?task__exact=``), so links and bookmarks keep working.

Django renders each row's selection checkbox through the form widget's template: a page of
100 rows spent more time there than on any of its columns. :class:`SelectionCheckbox`
writes the same element directly.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from .. import selectors
from ..models import Task


class ColumnValuesFilter(admin.SimpleListFilter):
    """Rows with the chosen value of ``column`` of ``table``, offered from the values in
    use; ``lookup`` reaches that column from the list's model."""

    table = ""
    column = ""
    lookup = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, value) for value in selectors.values_in_use(self.table, self.column)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Model]) -> QuerySet[Model]:
        value = self.value()
        return queryset.filter(**{self.lookup: value}) if value else queryset


class PausedFilter(admin.SimpleListFilter):
    """Paused tasks or the others (``selectors.paused_filter``). The query parameter is the
    one Django's filter of the former ``Task.paused`` column used, so links keep working."""

    title = "paused"
    parameter_name = "paused__exact"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("1", _("Yes")), ("0", _("No"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Model]) -> QuerySet[Model]:
        value = self.value()
        if value not in ("1", "0"):
            return queryset
        return queryset.filter(selectors.paused_filter(paused=value == "1"))


def task_column_filter(
    column: str, *, lookup: str, parameter: str | None = None
) -> type[ColumnValuesFilter]:
    """A :class:`ColumnValuesFilter` on the task column ``column`` (``lookup``: ``action``
    on tasks, ``task__action`` on runs), its query parameter ``parameter`` (default:
    ``lookup``)."""
    return type(
        f"Task{column.title()}Filter",
        (ColumnValuesFilter,),
        {
            "title": column,
            "parameter_name": parameter or lookup,
            "table": Task._meta.db_table,
            "column": column,
            "lookup": lookup,
        },
    )


class SelectionCheckbox:
    """A ``ModelAdmin`` mixin: the ``action_checkbox`` column as Django's widget renders it
    (name, value, class and label alike, so the admin's scripts and tests see no change),
    without a template per row."""

    def action_checkbox(self, obj: Model) -> SafeString:
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            ACTION_CHECKBOX_NAME,
            str(obj.pk),
            format_html(_("Select this object for an action - {}"), str(obj)),
        )
