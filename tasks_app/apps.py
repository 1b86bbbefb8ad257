from django.apps import AppConfig, apps


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "Scheduled tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            actions,  # noqa: F401  (registers the built-in actions)
            celery_defaults,
            checks,  # noqa: F401  (registers the system checks: manage.py check)
        )
        from .conf import app_settings
        from .django_tasks import action  # noqa: F401  (registers django_task)
        from .worker import startup  # noqa: F401  (a worker's connections, lanes, queue check)

        if apps.is_installed("knox"):  # else check tasks_app.E003 names it, not a traceback
            from .services import tokens  # noqa: F401  (a password change revokes the user's API tokens)

        # A bad TASKS_* value stops every process at start, naming the setting.
        app_settings.check()
        # The Celery behaviour the app depends on, given to the project's Celery app.
        if (celery_app := celery_defaults.loaded_app()) is not None:
            celery_defaults.apply(celery_app)
