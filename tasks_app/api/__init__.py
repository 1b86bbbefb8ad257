"""The REST API under ``/api/`` (Django REST framework): thin views over ``tasks_app.services``.

Modules: ``serializers`` (input and output shapes), ``views`` and ``urls``, ``errors`` (the
JSON error shape and the exception handler), ``parsers`` (JSON only, size-limited),
``route_access`` (the DRF permission class: each route's operation asked of
``tasks_app.services.permissions``), ``filters``, ``pagination``,
``throttling``, ``compose`` (a create-and-schedule call made atomic). Reference: docs/api.md.
"""
