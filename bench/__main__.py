"""``python -m bench [scenario ...] [--quick]``: run the scenarios, write JSON and REPORT.md.

Scenarios: lateness, beat_throughput, beat_burst, execution, memory, failover (the default set), history
(on demand: ``python -m bench history``; 20,000,000 runs take ~15 min on a quiet machine),
sync (on demand: ``tasks sync`` of 1,000 to 100,000 declared schedules beside stock beat),
beat_scale (on demand: beat with 1,000,000 stored schedules beside stock beat), stock_edits
(on demand: how soon an edit of a hand-made django-celery-beat entry is obeyed, beside stock),
execution_in_process (on demand: a run's bookkeeping in one process beside the floor's),
plus every module ``bench/scenario_*.py`` exposing ``run(results_dir: pathlib.Path) -> dict``
(given ``quick=`` too when its ``run`` takes it).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import common

RESULTS = Path(__file__).resolve().parent / "results"
BUILTIN = ["lateness", "beat_throughput", "beat_burst", "execution", "memory", "failover"]
MODULES = {
    "lateness": "bench.lateness",
    "beat_throughput": "bench.beat_throughput",
    "beat_burst": "bench.beat_burst",
    "execution": "bench.execution",
    "execution_in_process": "bench.execution_in_process",
    "memory": "bench.memory",
    "failover": "bench.failover",
    "history": "bench.history",
    "sync": "bench.sync",
    "stock_edits": "bench.stock_edits",
    "beat_scale": "bench.beat_scale",
}


def discovered() -> dict[str, str]:
    """Extra scenarios: ``bench/scenario_<name>.py`` modules (run with ``run(results_dir)``)."""
    found = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("scenario_"):
            found[info.name.removeprefix("scenario_")] = f"bench.{info.name}"
    return found


def main(argv: list[str] | None = None) -> int:
    extra = discovered()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenarios", nargs="*", help=f"default: all of {BUILTIN + sorted(extra)}")
    parser.add_argument("--quick", action="store_true", help="small sizes, a few minutes in all")
    args = parser.parse_args(argv)
    names = args.scenarios or BUILTIN + sorted(extra)
    unknown = [n for n in names if n not in MODULES and n not in extra]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {BUILTIN + sorted(extra)}")

    common.configure_environment()
    import django

    django.setup()
    common.create_database()
    RESULTS.mkdir(parents=True, exist_ok=True)
    info = common.machine()
    failures = 0
    try:
        for name in names:
            started = time.monotonic()
            print(f"[bench] {name} ...", flush=True)
            try:
                result = run_one(name, MODULES.get(name) or extra[name], quick=args.quick)
            except Exception:
                failures += 1
                result = {"scenario": name, "error": traceback.format_exc()}
                print(result["error"], file=sys.stderr, flush=True)
            common.delete_queues(common.QUEUE)
            result["machine"] = info
            result["quick"] = args.quick
            result["elapsed_s"] = round(time.monotonic() - started, 1)
            (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
            print(f"[bench] {name} done in {result['elapsed_s']} s", flush=True)
    finally:
        common.drop_vhost()
    from bench import report

    report.write(RESULTS)
    print(f"[bench] report: {RESULTS / 'REPORT.md'}", flush=True)
    return 1 if failures else 0


def run_one(name: str, module_name: str, *, quick: bool) -> dict[str, Any]:
    """Run a scenario; once more if Postgres or RabbitMQ dropped the connection (the machine
    is shared and its services are restarted by fault tests now and then)."""
    from django.db import OperationalError, connections

    module = importlib.import_module(module_name)
    for attempt in (1, 2):
        connections.close_all()
        common.delete_queues(common.QUEUE)  # never inherit a queue declared differently
        try:
            takes_quick = "quick" in inspect.signature(module.run).parameters
            result = module.run(RESULTS, quick=quick) if takes_quick else module.run(RESULTS)
        except (OperationalError, ConnectionError, OSError) as exc:
            if attempt == 2:
                raise
            print(f"[bench] {name}: connection error ({exc}); running it again", flush=True)
            time.sleep(10)
            continue
        result.setdefault("scenario", name)
        result["attempts"] = attempt
        return result
    raise AssertionError("unreachable")


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    sys.exit(main())
