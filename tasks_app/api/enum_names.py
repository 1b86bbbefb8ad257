"""The names of the API's enums in its OpenAPI document (drf-spectacular's
``ENUM_NAME_OVERRIDES``): two choice sets are named ``status`` and two ``schedule_type``.

Import-free, so a project's settings module can hand them to drf-spectacular's own settings
(``SPECTACULAR_SETTINGS = {"ENUM_NAME_OVERRIDES": ENUM_NAME_OVERRIDES}``): its deploy check
(``manage.py check --deploy``) generates the document with the project's settings, not the
app's, and warns of the collisions otherwise."""

ENUM_NAME_OVERRIDES = {
    "TaskStatusEnum": "tasks_app.models.TaskStatus",
    "RunStatusEnum": "tasks_app.models.RunStatus",
    "ScheduleTypeEnum": "tasks_app.models.ScheduleType",
    "RecurringScheduleTypeEnum": "tasks_app.api.serializers.RECURRING_SCHEDULE_CHOICES",
}
