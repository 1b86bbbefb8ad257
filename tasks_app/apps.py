from django.apps import AppConfig


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "Scheduled tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            actions,  # noqa: F401  (registers the built-in actions)
            tokens,  # noqa: F401  (a password change revokes the user's API tokens)
        )
        from .conf import app_settings
        from .django_tasks import action  # noqa: F401  (registers django_task)

        # A bad TASKS_* value stops every process at start, naming the setting.
        app_settings.check()
