"""Django admin: the operator's cockpit.

- **Task page**: the schedule edited in place (kind, interval or cron with its time zone,
  policies), the schedule in words and its next five fires (server-side on load, live from
  ``preview/`` as you type), status and next run, the last runs with status badges, and the
  buttons *Run now*, *Pause* (with a note), *Resume*, *Duplicate*.
- **Run list**: filters, search by task id or run id (full or the 8-character short id),
  columns for due, started, lateness, duration, attempt; the run page shows output, error,
  the Celery result and the neighbouring attempts, with *Retry* and *Cancel*.
- **Overview** (``/admin/overview/``, linked beside the user's links on the app's pages, and
  as "View site" under ``TASKS_ADMIN_BRANDING``): see ``views``, which also holds the presentation rules (instants to the second in UTC,
  durations, badges, what "Next run" is).
- **Paused queues** (``queues``): each paused queue with its note and waiting runs; *Add*
  pauses one, *Resume* releases its runs.
- **Site**: the project's admin is left as it is; ``TASKS_ADMIN_BRANDING`` gives it the
  product's header and "View site", and the product's section first on the index. The app's
  own pages carry its styles and the Overview / API docs links (its templates).

Saves, buttons and actions go through ``tasks_app.services``; the admin holds no rules of its
own, and service validation errors are shown next to their field (``Task.clean``). Who may do
what is ``tasks_app.services.permissions`` (one table, checked by the services): the admin asks it
through Django's hooks (``has_<perm>_permission``, ``@admin.action(permissions=[...])``), so
it offers only what the user may do, and a refusal is a message or a 403, never a write.

Modules: ``site`` (the opt-in branding), ``forms`` (the task form), ``tasks`` and ``runs``
(the two model pages; ``task_columns``: how a task is shown), ``buttons`` (the POST-only
buttons), ``views`` (overview, preview, payload check, presentation), ``overview`` (its
data), ``lists`` (what the long lists share; their paginator is
``tasks_app.selectors.paging``, the API's too).
"""

from . import periodic, queues, runs, site, task_pages, tokens

__all__ = ["periodic", "queues", "runs", "site", "task_pages", "tokens"]
