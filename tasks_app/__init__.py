"""A scheduled task system for Django on Celery: tasks, their runs, delays, interval and cron
schedules (distribution ``django-scheduled-runs``)."""

__version__ = "0.3.0"
