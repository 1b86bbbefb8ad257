"""The code only a worker runs: its Celery tasks (``celery_tasks``), a run's claim, execution
and finish (``run_execution``), the lease on its running runs (``recovery``, its writes in
``lease_writes``), the consumer, the shutdown grace and what it sets up at start
(``startup``)."""
