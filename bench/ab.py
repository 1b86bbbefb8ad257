"""``python -m bench.ab OTHER_CHECKOUT [execution|enqueue|enqueue_bulk|lateness] [--rounds N] [--quick]``: one of our
measurements taken in this checkout and in another (an earlier commit, in a ``git worktree``
with its own ``make install``), alternating round by round on the same services, each side's
median compared: the cost of a change, like with like (the same event, measured the same way,
in the same minutes). Writes ``bench/results/ab-<measurement>.json``.

The measurements: ``execution`` (``bench.execution.measure_ours``: a backlog drained by the
installed project's worker, runs/s), ``enqueue`` (``bench.scenario_enqueue.measure``: the
median milliseconds of one ``@task`` enqueue, its row and its publish), ``enqueue_bulk``
(``scenario_enqueue.bulk_ours``: seconds for one ``enqueue_many`` of 50,000 calls) and ``lateness`` (``bench.lateness.measure_ours``: near
runs behind a far backlog with beat releasing them, start lateness percentiles).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
RESULTS = HERE / "bench" / "results"

MEASURE = {
    "execution": (
        "from bench import execution; result = execution.measure_ours({n})",
        lambda quick: 2000 if quick else 6000,
        lambda r: r["runs_per_s"],
        "runs/s",
    ),
    "enqueue": (
        "from bench import scenario_enqueue; result = scenario_enqueue.measure({n})",
        lambda quick: 400 if quick else 2000,
        lambda r: r["ours"],
        "ms per enqueue",
    ),
    "enqueue_bulk": (
        "from bench import scenario_enqueue; result = scenario_enqueue.bulk_ours({n})",
        lambda quick: 5000 if quick else 50000,
        lambda r: r["bulk_s"],
        "s per enqueue_many",
    ),
    "lateness": (
        "from bench import lateness; result = lateness.measure_ours(lateness.SIZES[{n!r}]); "
        "result.pop('samples', None)",
        lambda quick: "quick",
        lambda r: r["lateness_ms"]["p99"],
        "p99 lateness ms",
    ),
}

PROGRAM = """
import json, django
from bench import common
common.configure_environment()
django.setup()
common.create_database()
try:
    {measure}
finally:
    common.drop_vhost()
print("AB-RESULT " + json.dumps(result, default=str))
"""


def measure_in(checkout: Path, name: str, *, quick: bool) -> dict[str, Any]:
    code, size, _, _ = MEASURE[name]
    program = PROGRAM.format(measure=code.format(n=size(quick)))
    done = subprocess.run(
        [str(checkout / ".venv" / "bin" / "python"), "-c", program],
        cwd=checkout,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    for line in done.stdout.splitlines():
        if line.startswith("AB-RESULT "):
            return dict(json.loads(line.removeprefix("AB-RESULT ")))
    raise RuntimeError(f"{checkout}: no result\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def commit_of(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()[:100]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("other", type=Path, help="the other checkout (with its own .venv)")
    parser.add_argument("measurement", choices=sorted(MEASURE))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    other = args.other.resolve()
    _, _, figure, unit = MEASURE[args.measurement]
    sides: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
    started = time.monotonic()
    for index in range(args.rounds):
        order = [("this", HERE), ("other", other)]
        if index % 2:  # alternate who goes first: the machine drifts within minutes
            order.reverse()
        for side, checkout in order:
            result = measure_in(checkout, args.measurement, quick=args.quick)
            sides[side].append(result)
            print(f"[ab] round {index + 1} {side}: {figure(result)} {unit}", flush=True)
    medians = {
        side: statistics.median(figure(r) for r in results) for side, results in sides.items()
    }
    report = {
        "measurement": args.measurement,
        "unit": unit,
        "this": {"commit": commit_of(HERE), "rounds": [figure(r) for r in sides["this"]]},
        "other": {"commit": commit_of(other), "rounds": [figure(r) for r in sides["other"]]},
        "median_this": medians["this"],
        "median_other": medians["other"],
        "ratio_this_vs_other": round(medians["this"] / medians["other"], 3)
        if medians["other"]
        else None,
        "results": sides,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"ab-{args.measurement}.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=2))
    print(f"[ab] {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
