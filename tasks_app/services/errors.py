"""Errors the services raise besides Django's ``ValidationError``."""


class ConflictError(Exception):
    """The request is valid but conflicts with the current state (HTTP 409)."""
