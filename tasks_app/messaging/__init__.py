"""Run messages on the broker: the queues' declaration (``queues``) and the publishing of
run messages (``dispatch``)."""
