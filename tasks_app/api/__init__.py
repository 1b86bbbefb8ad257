"""The REST API under ``/api/`` (Django REST framework): thin views over ``tasks_app.services``.

Modules: ``serializers`` (input and output shapes), ``views`` and ``urls``, ``errors`` (the
JSON error shape and the exception handler), ``parsers`` (JSON only, size-limited),
``permissions`` (Django model permissions, view included), ``filters``, ``pagination``,
``throttling``, ``compose`` (a create-and-schedule call made atomic). Reference: docs/api.md.
"""
