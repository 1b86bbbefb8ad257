"""Test-only command (never shipped: lives under tests/): prints N bytes of output."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Print --bytes bytes of 'x', in lines of 1 KiB."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bytes", type=int, required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        remaining = options["bytes"]
        while remaining > 0:
            line = "x" * (min(1024, remaining) - 1)
            self.stdout.write(line)  # OutputWrapper adds the newline: 1 KiB per line
            remaining -= len(line) + 1
