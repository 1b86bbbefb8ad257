"""The app's Celery tasks (``execute_run``, ``execute_task``) live in ``tasks_app.worker``, not
in the ``tasks`` module Celery's ``autodiscover_tasks()`` looks for: ``celery_defaults`` adds
their module to the project Celery app's ``include``, which a worker and beat import at start
(``import_default_modules``, after Django is set up), next to the project's own modules."""

from __future__ import annotations

import importlib

from celery import current_app

from tasks_app.celery_defaults import WORKER_TASKS_MODULE
from tasks_app.vocabulary.choices import EXECUTE_RUN


def test_the_project_celery_app_includes_the_worker_tasks_module() -> None:
    included = current_app.conf.include
    assert WORKER_TASKS_MODULE in included and len(included) == len(set(included))
    module = importlib.import_module(WORKER_TASKS_MODULE)
    current_app.loader.import_default_modules()
    assert current_app.tasks[EXECUTE_RUN].run.__module__ == module.__name__
