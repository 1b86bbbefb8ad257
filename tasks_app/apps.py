from django.apps import AppConfig


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "Scheduled tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import actions  # noqa: F401  (registers the built-in actions)
        from .conf import app_settings

        # A bad TASKS_* value stops every process at start, naming the setting.
        app_settings.check()
