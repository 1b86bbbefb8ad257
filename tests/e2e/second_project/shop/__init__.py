"""A second, minimal Django project that installs ``tasks_app`` (tests/e2e/test_second_project.py).

The app must not need the project it ships with: ``project`` is made unimportable here, before
Django or Celery load anything, so any import of it fails loudly.
"""

import sys

sys.modules["project"] = None  # type: ignore[assignment]

from .celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
