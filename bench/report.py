"""REPORT.md from the scenario JSON files, with the lateness chart (PNG) beside the anchors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _load(results: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}


def chart(results: Path, lateness: dict[str, Any]) -> str | None:
    samples = lateness.get("samples_ms") or {}
    if not samples:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = {
        "ours": "ours (horizon release)",
        "native": "Celery native delayed delivery",
        "countdown": "plain Celery countdown",
    }
    for key, label in labels.items():
        values = sorted(samples.get(key) or [])
        if not values:
            continue
        ys = [(i + 1) / len(values) * 100 for i in range(len(values))]
        ax.plot([max(v, 0.01) for v in values], ys, label=f"{label} (n={len(values)})")
    ax.set_xscale("log")
    ax.set_xlabel("start lateness, ms (log scale)")
    ax.set_ylabel("% of tasks started")
    ax.set_title("Start lateness under a backlog of far-future work")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    name = "lateness.png"
    fig.tight_layout()
    fig.savefig(results / name, dpi=110)
    plt.close(fig)
    return name


def _p(d: dict[str, Any] | None, key: str = "p50") -> str:
    if not d or d.get(key) is None:
        return "-"
    return f"{d[key]:.1f}"


def _history(h: dict[str, Any]) -> list[str]:
    lines = [
        f"## 6. History: {h['runs']:,} finished runs over 90 days, {h['tasks']:,} tasks",
        "",
        "| page | p50 ms | p95 ms | anchor (100,000 runs) p95 ms | ratio p95 |",
        "|---|---|---|---|---|",
    ]
    for page, row in h["history"].items():
        anchor = h["anchor"][page]
        lines.append(
            f"| {page} | {row['median_ms']} | {row['p95_ms']} | {anchor['p95_ms']} | "
            f"{h['ratios_p95'][page]} |"
        )
    lines += ["", f"Every page p95 <= {h['target_ms']:g} ms: {h['pages_ok']}.", ""]
    if r := h.get("retention"):
        d, w, o = r.get("deletion", {}), r.get("without_deletion", {}), r.get("during_deletion", {})
        lines += [
            f"Retention under {r['load_tasks']} runs/s: {d.get('deleted', 0):,} runs deleted in "
            f"{d.get('window_s')} s ({d.get('rows_per_s')} rows/s); start lateness p99 "
            f"{o.get('p99_ms')} ms during deletion against {w.get('p99_ms')} ms without "
            f"(ratio {r.get('p99_ratio_during_to_without')}, target <= 2). Expired runs left: "
            f"{r.get('expired_left')}.",
            "",
        ]
    if p := h.get("partitions"):
        day = p["one_day"]
        lines += [
            f"Partitions: one day ({day['rows']:,} runs) by batched DELETE "
            f"{day['batched_delete_s']} s, by DROP of its partition {day['drop_partition_ms']} ms; "
            f"lookup by run id {p['lookup_by_id_ms']['plain']} ms plain, "
            f"{p['lookup_by_id_ms']['partitioned']} ms across {p['partitions']} partitions.",
            "",
        ]
    return lines


def _sync(sy: dict[str, Any]) -> list[str]:
    lines = [
        "## tasks sync of declared schedules",
        "",
        "Seconds (statements). Stock: django-celery-beat's DatabaseScheduler.update_from_dict "
        "of the same entries; its reloads are timed up to 10,000 entries.",
        "",
        "| declared | first sync | unchanged | --check | 1 % changed, 1 % removed "
        "| stock first load | stock unchanged | stock 1 % changed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in sy["sizes"]:
        n, a = row["statements"], row["anchor_stock_update_from_dict"]
        an = a["statements"]
        lines.append(
            f"| {row['schedules']:,} | {row['first_sync_s']} ({n['first_sync']}) "
            f"| {row['unchanged_resync_s']} ({n['unchanged_resync']}) "
            f"| {row['check_s']} ({n['check']}) "
            f"| {row['one_percent_changed_sync_s']} ({n['one_percent_changed_sync']}) "
            f"| {a['first_load_s']} ({an['first_load']}) "
            f"| {a['unchanged_reload_s']} ({an['unchanged_reload']}) "
            f"| {a['one_percent_changed_reload_s']} ({an['one_percent_changed_reload']}) |"
        )
    return [*lines, ""]


def _beat_scale(bs: dict[str, Any]) -> list[str]:
    lines = [
        "## Beat with many stored schedules (1,000 due every 10 s)",
        "",
        "| stored | start-up s | RSS after 60 s MiB | tick p50 / p99 ms | in broker <= 1 s "
        "| stock-entry load ms |",
        "|---|---|---|---|---|---|",
    ]
    for row in bs["ours"]:
        lines.append(
            f"| {row['schedules']:,} | {row['startup_s']} | {row['rss_after_60s_mb']} "
            f"| {_p(row['tick_ms'])} / {_p(row['tick_ms'], 'p99')} "
            f"| {row['in_broker_within_1s_pct']} % | {row['stock_entries_read_ms']} |"
        )
    lines += [
        "",
        "| stock DatabaseScheduler entries | ticked | start-up s | RSS MiB |",
        "|---|---|---|---|",
    ]
    for row in bs["anchor_stock_database_scheduler"]["sizes"]:
        lines.append(
            f"| {row['entries']:,} | {row['ticked']} | {row['startup_s']} | {row['rss_mb']} |"
        )
    return [*lines, "", f"Ratios: {json.dumps(bs['ratios'])}", ""]


def write(results: Path) -> Path:
    data = _load(results)
    lines = ["# Benchmark report", ""]
    machine = next((d.get("machine") for d in data.values() if d.get("machine")), {})
    if machine:
        started = ", ".join(
            f"{name} {d['machine'].get('date')}" for name, d in data.items() if d.get("machine")
        )
        lines += [
            f"On {machine.get('host')}: {machine.get('cores')} cores, "
            f"{machine.get('memory_gb')} GB, "
            f"Postgres {machine.get('postgres')}, RabbitMQ {machine.get('rabbitmq')}. "
            "The machine is shared: compare the ratios (same run), not absolute figures.",
            "",
            f"The `make bench` that ran each scenario started at (UTC): {started}.",
            "",
        ]
    if (lat := data.get("lateness")) and "ours" in lat:
        ours, cd, nat = lat["ours"], lat["anchor_countdown"], lat["anchor_native_delayed"]
        img = chart(results, lat)
        lines += [
            "## 1. Start lateness under a backlog",
            "",
            f"Inputs: {lat['inputs']}",
            "",
            "| | p50 ms | p90 ms | p99 ms | max ms | n | lost | early |",
            "|---|---|---|---|---|---|---|---|",
            f"| ours | {_p(ours['lateness_ms'])} | {_p(ours['lateness_ms'], 'p90')} | {_p(ours['lateness_ms'], 'p99')} | {_p(ours['lateness_ms'], 'max')} | {ours['lateness_ms']['n']} | {ours['lost']} | {ours['early']} |",
            f"| plain Celery countdown | {_p(cd['lateness_ms'])} | {_p(cd['lateness_ms'], 'p90')} | {_p(cd['lateness_ms'], 'p99')} | {_p(cd['lateness_ms'], 'max')} | {cd['lateness_ms']['n']} of {cd.get('expected')}"
            + (
                f" (the rest not started within {cd['timeout_s']} s)"
                if cd.get("not_started_in_time")
                else ""
            )
            + " | | |",
            f"| Celery native delayed delivery | {_p(nat['lateness_ms'])} | {_p(nat['lateness_ms'], 'p90')} | {_p(nat['lateness_ms'], 'p99')} | {_p(nat['lateness_ms'], 'max')} | {nat['lateness_ms']['n']} | | |",
            "",
            f"Ratios (ours / anchor): {lat['ratios']}",
            "",
        ]
        if causes := ours.get("late_causes"):
            lines += [
                f"Ours later than {causes['threshold_ms']} ms: {causes['late']} of {causes['of']}, "
                f"by cause: {causes['by_cause']}",
                "",
            ]
        if img:
            lines += [f"![lateness]({img})", ""]
    if (bt := data.get("beat_throughput")) and "in_broker" in bt:
        b, st = bt["in_broker"], bt["start_lateness"]
        bo, bs = b["ours"], b["anchor_stock_database_scheduler"]
        so, ss = st["ours"], st["anchor_stock_database_scheduler"]
        lines += [
            "## 2. Beat, like with like",
            "",
            f"Inputs: {bt['inputs']}",
            "",
            "(a) Message in the broker (receipt by one consumer, same code for both) no later "
            "than 1 s after the fire's instant:",
            "",
            "| | expected fires | seen | in broker within 1 s | p50 ms | p99 ms | duplicates |",
            "|---|---|---|---|---|---|---|",
            f"| ours (TaskScheduler) | {bo['expected_fires']} | {bo['seen_fires']} | {bo['in_broker_within_1s_pct']} % | {_p(bo['lateness_ms'])} | {_p(bo['lateness_ms'], 'p99')} | {bo['duplicates']} |",
            f"| stock DatabaseScheduler | {bs['expected_fires']} | {bs['seen_fires']} | {bs['in_broker_within_1s_pct']} % | {_p(bs['lateness_ms'])} | {_p(bs['lateness_ms'], 'p99')} | |",
            "",
            "(b) Start lateness (`started - instant`), workers that keep up:",
            "",
            "| | expected fires | started | p50 ms | p99 ms | max ms |",
            "|---|---|---|---|---|---|",
            f"| ours (TaskScheduler) | {so['expected_fires']} | {so['started']} | {_p(so['start_lateness_ms'])} | {_p(so['start_lateness_ms'], 'p99')} | {_p(so['start_lateness_ms'], 'max')} |",
            f"| stock DatabaseScheduler | {ss['expected_fires']} | {ss['started']} | {_p(ss['start_lateness_ms'])} | {_p(ss['start_lateness_ms'], 'p99')} | {_p(ss['start_lateness_ms'], 'max')} |",
            "",
            f"Ours: beat tick p50 {_p(bo['tick_ms'])} ms, p99 {_p(bo['tick_ms'], 'p99')} ms. "
            f"Ratios: {bt['ratios']}",
            "",
        ]
    if (ex := data.get("execution")) and "ours" in ex:
        lines += [
            "## 3. Execution throughput",
            "",
            "| | runs/s | n |",
            "|---|---|---|",
            f"| ours (full lifecycle) | {ex['ours']['runs_per_s']} | {ex['ours']['completed']} |",
            *(
                f"| {label} | {ex[k]['tasks_per_s']} | {ex[k]['completed']} |"
                for k, label in (
                    ("anchor_raw_celery", "raw Celery no-op"),
                    (
                        "extra_anchor_raw_celery_same_delivery",
                        "raw Celery no-op, our delivery settings",
                    ),
                    (
                        "extra_anchor_two_writes_floor",
                        "raw Celery, our delivery settings + two Postgres writes per task (floor)",
                    ),
                    (
                        "anchor_celery_django_celery_results",
                        "Celery + django-celery-results (django-db, track_started, extended)",
                    ),
                    ("anchor_procrastinate", "Procrastinate, 2 processes, best concurrency"),
                )
                if k in ex
            ),
            "",
            *(
                [
                    f"Rounds (ours runs/s, raw tasks/s; the median round of each is compared): "
                    f"{ex['rounds']['ours_runs_per_s']}, {ex['rounds']['raw_tasks_per_s']}.",
                    "",
                ]
                if "rounds" in ex
                else []
            ),
            f"Ratios: {ex['ratios']} (targets {ex.get('targets')}). Release published "
            f"{ex['ours']['publish_per_s']} runs/s.",
            "",
            *(
                [
                    "In one process without Celery (median of the rounds, ms per run): ours "
                    f"{ex['extra_in_process']['ours']}, the floor's two writes "
                    f"{ex['extra_in_process']['floor']}.",
                    "",
                ]
                if "extra_in_process" in ex
                else []
            ),
        ]
        if "anchor_procrastinate" in ex:
            by = ", ".join(
                f"{r['concurrency']}: {r['tasks_per_s']}"
                for r in ex["anchor_procrastinate"]["by_concurrency"]
            )
            lines += [f"Procrastinate jobs/s by concurrency per process: {by}.", ""]
    if (mem := data.get("memory")) and "ours" in mem:
        m = mem["ours"]
        lines += [
            "## 4. Memory",
            "",
            f"Worker RSS idle {m['worker_rss_idle_mb']} MiB, with {mem['inputs']['backlog']} stored "
            f"future runs {m['worker_rss_with_backlog_mb']} MiB (ratio {mem['ratios']['worker_rss_backlog_vs_idle']}, "
            f"target <= 1.10). Beat with {mem['inputs']['schedules']} schedules: RSS {m['beat_rss_mb']} MiB, "
            f"tick p50 {_p(m['beat_tick_ms'])} ms, p99 {_p(m['beat_tick_ms'], 'p99')} ms.",
            "",
        ]
        if a := mem.get("anchor_celery_countdown"):
            lines += [
                f"Anchor: plain Celery worker idle {a['worker_rss_idle_mb']} MiB, holding "
                f"{a['messages']} `countdown` messages {a['worker_rss_holding_mb']} MiB; ours with "
                f"the stored runs / that: {mem['ratios'].get('worker_rss_backlog_vs_celery_countdown')}.",
                "",
            ]
    if (fo := data.get("failover")) and "ours" in fo:
        f = fo["ours"]
        lines += [
            "## 5. Failover (kill -9 of the leading beat)",
            "",
            f"Standby took the lock {f['takeover_s']} s after the kill and recorded a fire "
            f"{f['first_fire_by_standby_s']} s after it (target <= 10 s). Fires expected "
            f"{f['expected_fires']}, recorded {f['recorded_fires']}, missed {f['missed']}, "
            f"duplicates {f['duplicates']}.",
            "",
        ]
    if (hist := data.get("history")) and "history" in hist:
        lines += _history(hist)
    if (sy := data.get("sync")) and "sizes" in sy:
        lines += _sync(sy)
    if (bs := data.get("beat_scale")) and "ours" in bs:
        lines += _beat_scale(bs)
    for name, d in data.items():
        if (
            name
            in {
                "lateness",
                "beat_throughput",
                "execution",
                "memory",
                "failover",
                "history",
                "sync",
                "beat_scale",
            }
            and "error" not in d
        ):
            continue
        lines += [
            f"## {name}",
            "",
            "```",
            json.dumps({k: v for k, v in d.items() if k != "machine"}, indent=2, default=str)[
                :4000
            ],
            "```",
            "",
        ]
    path = results / "REPORT.md"
    path.write_text("\n".join(lines))
    return path
