"""The pure parts of the django.tasks backend: priorities, what survives JSON, the exception
class a failed run names, and calls that cannot fit the function."""

import traceback

import pytest

from tasks_app.django_tasks.framework import (
    RunEnded,
    call_problem,
    exception_class_path,
    run_priority,
    stored_json,
)
from tests.django_tasks import functions


def test_django_priorities_map_onto_ours_in_order_with_the_defaults_aligned() -> None:
    assert run_priority(0) == 5  # Django's default is ours
    assert run_priority(100) == 9 and run_priority(-100) == 0
    mapped = [run_priority(p) for p in range(-100, 101)]
    assert mapped == sorted(mapped)  # a higher Django priority is never a lower one of ours
    assert set(mapped) == set(range(10))


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ([1, object()], "args[1]: a value of type object is not JSON"),
        ({"when": {1: "x"}}, "kwargs['when']: key 1 is not a string"),
        ([float("nan")], "args[0]: nan is not a JSON number"),
        ([{1, 2}], "args[0]: a value of type set is not JSON"),
    ],
)
def test_values_that_would_not_come_back_from_json_are_named(value: object, named: str) -> None:
    where = "args" if isinstance(value, list) else "kwargs"
    with pytest.raises(TypeError) as refused:
        stored_json(value, where)
    assert str(refused.value).startswith(named)


def test_json_values_pass_and_tuples_are_stored_as_lists() -> None:
    value = [1, 2.5, "x", None, True, (1, 2), {"a": [1, (3,)]}]
    assert stored_json(value, "args") == [1, 2.5, "x", None, True, [1, 2], {"a": [1, [3]]}]


def raised(exc: BaseException) -> str:
    """A run's error as the worker writes it: the class name and message, then the traceback."""
    try:
        raise exc
    except BaseException as caught:
        return f"{type(caught).__name__}: {caught}\n\n{traceback.format_exc()}"


def test_a_failed_run_names_the_full_class_path_of_its_exception() -> None:
    error = raised(functions.QuotaExceeded("alice is over quota\nsecond line"))
    assert exception_class_path(error) == "tests.django_tasks.functions.QuotaExceeded"
    assert exception_class_path(raised(ZeroDivisionError("x"))) == "builtins.ZeroDivisionError"


def test_a_run_that_ended_without_an_exception_names_run_ended() -> None:
    assert exception_class_path("expired: could not start by 12:00") == (
        f"{RunEnded.__module__}.RunEnded"
    )


def test_a_call_that_does_not_fit_the_signature_is_named() -> None:
    problem = call_problem(functions.add, [1], {})
    assert problem is not None and "tests.django_tasks.functions.add()" in problem
    assert "'b'" in problem
    assert call_problem(functions.add, [1, 2], {}) is None
    assert call_problem(functions.which_attempt, [], {}) is None  # context comes first
