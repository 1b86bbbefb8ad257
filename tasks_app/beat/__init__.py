"""The code only beat runs: the scheduler (``scheduler``), leadership, recurring fires
(``firing``), missed-run alarms (``alarms``), fire-ahead, the recovery sweep (``sweep``, its
writes in ``sweep_writes``) and the retention thread."""
