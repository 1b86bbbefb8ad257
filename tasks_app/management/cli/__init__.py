"""``manage.py tasks <verb>``, the command line, in small modules behind the one command
(``tasks_app/management/commands/tasks.py``, a Django command module must be a file there).

- ``arguments``: the argument types (durations, instants, JSON objects, bounded integers);
- ``options``: the verbs and their options (argparse);
- ``output``: tables and one-line errors;
- ``base``: what every verb shares (who acts, dispatch and exit statuses, lookups, output);
- ``task_verbs``, ``run_verbs``, ``sync_verb``: the verbs, each calling one service or
  selector.
"""
