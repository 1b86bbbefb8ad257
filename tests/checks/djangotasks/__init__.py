"""An app whose ``tasks`` module defines a ``@task`` function (Django's task framework), for
check ``tasks_app.W002``: installed by the tests that need it, with ``override_settings``."""
