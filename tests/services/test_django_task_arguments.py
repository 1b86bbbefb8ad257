"""What a ``@task`` function's enqueue cannot store is refused at the enqueue, naming the
argument, as the same rules refuse it from a person (``validation.json_value_problem``): no
database error, nothing written, for ``enqueue`` and ``enqueue_many`` alike."""

from __future__ import annotations

import pytest

from tasks_app.django_tasks import enqueue_many
from tasks_app.models import Run
from tests.django_tasks import functions

pytestmark = pytest.mark.django_db


def nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


# name: (args, kwargs, text of the TypeError)
CASES = {
    "a NUL in a string": (("a\x00b",), {}, "args.0: must not contain NUL"),
    "a lone surrogate": ((), {"name": "\ud800"}, "kwargs.name: must not contain lone surrogates"),
    "100,000 levels of nesting": ((nested(100_000),), {}, "args: nests deeper than 32 levels"),
    "more than a MiB": (("a" * (1024 * 1024 + 1),), {}, "args: is larger than 1,048,576 bytes"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_argument_it_cannot_store_is_refused_at_enqueue(case: str) -> None:
    args, kwargs, text = CASES[case]
    with pytest.raises(TypeError, match="tests.django_tasks.functions.greet: ") as info:
        functions.greet.enqueue(*args, **kwargs)
    assert text in str(info.value)
    with pytest.raises(TypeError) as info:
        enqueue_many(functions.greet, [(("fine",), {}), (args, kwargs)])
    assert text in str(info.value)
    assert not Run.objects.exists()
