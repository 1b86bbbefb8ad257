#!/usr/bin/env python
"""Django's command-line utility.

With ``DATABASE_URL`` set it works on the services the environment names. Without it (the
developer machine) it works on the embedded stack ``make run`` keeps under ``var/``: the
running one, or the embedded Postgres started for this one command and stopped after it
(``project.embedded.manage_in_process``), so ``python manage.py tasks list`` needs nothing
set, as in any Django project.
"""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if not os.environ.get("DATABASE_URL"):
        from project.embedded import manage_in_process

        manage_in_process(sys.argv)
        return
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
