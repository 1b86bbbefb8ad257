"""django-celery-beat's own *Periodic tasks* pages, where they meet our *Tasks*.

A recurring task owns one ``PeriodicTask`` (``task:<id>``), kept in step by the services and
shown in django-celery-beat's admin. Those pages get a column naming the owning task, a note
on the list, and on an owned entry's page a note that it is managed from its task, with a
link: a change made there does not change when the task runs (beat fires owned entries from
the task) and is replaced at the task's next save. Entries added there by hand are fired by
django-celery-beat's own machinery, as usual; their names may not begin ``task:``, the
prefix of the entries tasks own (beat's stock path skips those names).

With a million recurring tasks the list holds a million entries, and it costs what it does
with a thousand: the count is the table's estimate (``BoundedPaginator``), the owning tasks
are read in the list's query, the *task* filter offers the Celery task names in use through
an index, and the search and the date drill-down are served by indexes of this app
(migration 0022).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django_celery_beat.admin import PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import PeriodicTask

from ..models import Task
from ..selectors.paging import BoundedPaginator
from ..services import OWNED_ENTRY_PREFIX
from .lists import ColumnValuesFilter

if admin.site.is_registered(PeriodicTask):
    admin.site.unregister(PeriodicTask)


class PeriodicEntryForm(PeriodicTaskForm):
    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        owned = self.instance.pk and Task.objects.filter(periodic_task=self.instance).exists()
        if name.startswith(OWNED_ENTRY_PREFIX) and not owned:
            raise forms.ValidationError(
                f"Names beginning {OWNED_ENTRY_PREFIX!r} belong to the entries tasks own: "
                "choose another name, or create a recurring task instead."
            )
        return name


class EntryTaskFilter(ColumnValuesFilter):
    """django-celery-beat's filter on the Celery task an entry calls, its choices read
    through ``tasks_app_entry_task_idx`` (its own ran ``SELECT DISTINCT`` over every entry)."""

    title = "task"
    parameter_name = "task__exact"
    table = PeriodicTask._meta.db_table
    column = lookup = "task"


@admin.register(PeriodicTask)
class OwnedPeriodicTaskAdmin(PeriodicTaskAdmin):
    form = PeriodicEntryForm
    change_list_template = "admin/tasks_app/periodictask/change_list.html"
    change_form_template = "admin/tasks_app/periodictask/change_form.html"
    list_display = (*PeriodicTaskAdmin.list_display, "managed_by")
    list_filter = [
        EntryTaskFilter if name == "task" else name for name in PeriodicTaskAdmin.list_filter
    ]
    show_full_result_count = False
    paginator = BoundedPaginator  # no COUNT(*) over every entry (selectors/paging.py)

    def get_queryset(self, request: HttpRequest) -> QuerySet[PeriodicTask]:
        owner = Task.objects.filter(periodic_task=OuterRef("pk")).values("pk")[:1]
        return super().get_queryset(request).annotate(owner_task_id=Subquery(owner))

    @admin.display(description="managed by")
    def managed_by(self, entry: PeriodicTask) -> SafeString | str:
        task_id = entry.owner_task_id  # type: ignore[attr-defined]
        if task_id is None:
            return "this page"
        url = reverse("admin:tasks_app_task_change", args=[task_id])
        return format_html('task <a href="{}">{}</a>', url, task_id)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        if object_id is not None and object_id.isdigit():
            context["owner_task"] = Task.objects.filter(periodic_task_id=int(object_id)).first()
        return super().changeform_view(request, object_id, form_url, context)
