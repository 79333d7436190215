"""Print the tables of bench/RESULTS.md from the result files in bench/out/.

Every number in RESULTS.md's tables comes from here, so the write-up and the runs
cannot drift apart. Missing files are skipped.

Run: ``.venv/bin/python -m bench.report`` (after the benchmarks, see bench/run_all.sh).
"""

from __future__ import annotations

import json
import re
from typing import Any

from bench.common import OUT_DIR


def _load(name: str) -> dict[str, Any] | None:
    path = OUT_DIR / name
    return json.loads(path.read_text()) if path.is_file() else None


def _med(s: dict[str, Any], scale: float = 1.0, digits: int = 2) -> str:
    """``median (min-max, n=)`` of a summary."""
    f = f"{{:.{digits}f}}"
    return (
        f"{f.format(s['median'] * scale)} ({f.format(s['min'] * scale)}-"
        f"{f.format(s['max'] * scale)}, n={s['n']})"
    )


def _load_range(runs: list[dict[str, Any]]) -> str:
    loads = [r["load"]["loadavg_1m"] for r in runs if "load" in r]
    busy = [r["load"]["busy_cores"] for r in runs if "load" in r]
    if not loads:
        return "?"
    return f"load1 {min(loads):.1f}-{max(loads):.1f}, busy cores {min(busy):.1f}-{max(busy):.1f}/2"


def probe_cycles(names: list[str]) -> str:
    rows = [
        "| result | clusters | hung | checks | variant | cycle | wall s | exporter CPU ms/probe | "
        "exporter CPU s/cycle (of it /metrics) | fleet CPU s | ok | peak RSS MiB | sockets | "
        "machine during the runs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        doc = _load(name)
        if doc is None:
            continue
        for n, size in doc["sizes"].items():
            runs = size["runs"]
            for kind in ("first", "steady"):
                cycles = [c for r in runs for c in r["cycles"] if c["kind"] == kind]
                if not cycles:
                    continue
                wall = sorted(c["wall_s"] for c in cycles)
                cpu = sorted(c["cpu_ms_per_probe"] for c in cycles if c["cpu_ms_per_probe"])
                fleet = sorted(c["fleet_cpu_s"] for c in cycles if c["fleet_cpu_s"] is not None)
                ok = sorted(c["ok"] for c in cycles)
                cpu_s = sorted(c["cpu_s"] for c in cycles)
                render = sorted(c["render_cpu_s"] for c in cycles if "render_cpu_s" in c)
                of_it = f" ({_mid(render):.2f})" if render else ""
                rss = sorted(r["rss_peak_mib"] or 0 for r in runs)
                sockets = sorted(c.get("sockets") or 0 for c in cycles)
                rows.append(
                    f"| {name.removesuffix('.json')} | {n} | {size['hanging']} "
                    f"| {'yes' if size.get('checks') else 'no'}"
                    f" | {_variant(size)} | {kind} (n={len(cycles)}) "
                    f"| {_mid(wall):.2f} ({wall[0]:.2f}-{wall[-1]:.2f}) "
                    f"| {_range3(cpu)} "
                    f"| {_mid(cpu_s):.1f} ({cpu_s[0]:.1f}-{cpu_s[-1]:.1f}){of_it} "
                    f"| {_mid(fleet):.1f} | {ok[0]}-{ok[-1]} | {_mid(rss):.0f} "
                    f"| {sockets[-1]} | {_load_range(runs)} |"
                )
    return "\n".join(rows)


def _range3(values: list[float]) -> str:
    if not values:
        return "no probe"
    return f"{_mid(values):.3f} ({values[0]:.3f}-{values[-1]:.3f})"


def _variant(size: dict[str, Any]) -> str:
    name = str(size.get("variant", "keepalive"))
    first = size["runs"][0] if size["runs"] else {}
    if first.get("max_idle") is not None:
        name += f", max idle {first['max_idle']}"
    if first.get("controlplane_every", 1) != 1:
        name += f", kube-system every {first['controlplane_every']} probes"
    return name


def _mid(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def memory() -> str:
    """Live Python objects and the parts of one /metrics rendering, after the steady cycles."""
    d = _load("probe_cycle_asbuilt_10k.json")
    if d is None:
        return ""
    run = d["sizes"]["10000"]["runs"][0]
    objs, parts = run.get("python_objects"), run.get("render_parts_s")
    if not objs or not parts:
        return ""
    rows = [
        f"Peak RSS {run['rss_peak_mib']} MiB, {run['rss_end_mib']} MiB at the end. Live Python "
        f"objects: {objs['objects']:,}, {objs['total_mib']} MiB (shallow sizes), by type:",
        "",
        "| type | count | MiB |",
        "|---|---|---|",
    ]
    rows += [f"| {k} | {v['count']:,} | {v['mib']} |" for k, v in objs["top"].items()]
    rows += [
        "",
        f"One rendering of the last snapshot, CPU s: text {parts['text']}, gzip level 6 "
        f"{parts['gzip6']} (level 1: {parts['gzip1']}), /sd/control-plane {parts['sd']}.",
    ]
    return "\n".join(rows)


def two_processes() -> str:
    d = _load("two_processes.json")
    if d is None:
        return ""
    load = d["workers"][0]["load"]["loadavg_1m"]
    rows = [
        f"{d['clusters']} clusters over {d['processes']} exporter processes "
        f"(checks: {'yes' if d['checks'] else 'no'}), peak RSS per process "
        f"{', '.join(f'{m:.0f}' for m in d['rss_peak_mib'])} MiB, load1 {load:.1f}:",
        "",
        "| cycle | wall s (slowest process) | exporter CPU s (all processes) | ok |",
        "|---|---|---|---|",
    ]
    rows += [
        f"| {c['kind']} | {c['wall_s']:.2f} | {c['cpu_s']:.1f} | {c['ok']} |" for c in d["cycles"]
    ]
    return "\n".join(rows)


def tls_resume() -> str:
    d = _load("tls_resume.json")
    if d is None:
        return ""
    rows = [
        "| run | connections | full handshake + GET, CPU ms | resumed + GET, CPU ms | "
        "kept-alive GET, CPU ms | resumed | KiB per open connection | KiB per kept session "
        "| load1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(d["runs"], 1):
        rows.append(
            f"| {i} | {r['connections']} | {r['full_ms']} | {r['resumed_ms']} "
            f"| {r['keepalive_get_ms']} | {r['reused']} "
            + (
                f"| {r['kib_per_open_connection']} | {r['kib_per_kept_session']} "
                if i == 1  # later runs reuse memory the first one freed: no clean delta
                else "| - | - "
            )
            + f"| {r['load']['loadavg_1m']:.1f} |"
        )
    return "\n".join(rows)


def vs_blackbox() -> str:
    d = _load("vs_blackbox.json")
    if d is None:
        return ""
    rows = [
        "| run | fleetwatch first cycle probes/CPU-s | fleetwatch steady probes/CPU-s | "
        "blackbox probes/CPU-s | blackbox probes/s | ratio steady | ratio first | load1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(d["runs"], 1):
        rows.append(
            f"| {i} | {r['fleetwatch_first_probes_per_cpu_s']:.0f} "
            f"| {r['fleetwatch_steady_probes_per_cpu_s']:.0f} "
            f"| {r['blackbox_probes_per_cpu_s']:.0f} | {r['blackbox_probes_per_s']:.0f} "
            f"| {r['ratio_steady']:.2f} | {r['ratio_first']:.2f} "
            f"| {r['blackbox']['load']['loadavg_1m']:.1f} |"
        )
    rows.append(
        f"| **median** | {d['fleetwatch_first_probes_per_cpu_s']['median']:.0f} "
        f"| {d['fleetwatch_steady_probes_per_cpu_s']['median']:.0f} "
        f"| {d['blackbox_probes_per_cpu_s']['median']:.0f} | | "
        f"**{d['ratio_steady']['median']:.2f}** | **{d['ratio_first']['median']:.2f}** | |"
    )
    return "\n".join(rows)


def scrape() -> str:
    d = _load("scrape.json")
    if d is None:
        return ""
    p, g = d["scrape_plain"], d["scrape_gzip"]
    gl = d["generate_latest"]
    return "\n".join(
        [
            f"clusters {d['clusters']}, series {d['series']}, exporter: {d['exporter']}",
            "",
            "| what | seconds per call, median (min-max, n) | bytes | exporter CPU ms/scrape |",
            "|---|---|---|---|",
            f"| GET /metrics (plain) | {_med(p['seconds'], digits=4)} | {p['bytes']} "
            f"| {p['exporter_cpu_ms_per_scrape']} |",
            f"| GET /metrics (gzip) | {_med(g['seconds'], digits=4)} | {g['bytes']} "
            f"| {g['exporter_cpu_ms_per_scrape']} |",
            f"| generate_latest(), prebuilt families | {_med(gl['collector']['seconds'], digits=3)}"
            f" | {gl['collector']['bytes']} | |",
            f"| generate_latest(), labelled Gauge/Counter | "
            f"{_med(gl['gauges']['seconds'], digits=3)} | {gl['gauges']['bytes']} | |",
            "",
            f"Speed-up of a plain scrape over generate_latest(): "
            f"**{d['speedup_vs_generate_latest_collector']}x** (prebuilt families), "
            f"**{d['speedup_vs_generate_latest_gauges']}x** (metric objects). "
            f"Exporter RSS after its first cycle: {d['exporter_rss_mib_after_first_cycle']} MiB "
            f"(peak {d['exporter_rss_peak_mib_after_first_cycle']} MiB); first cycle done "
            f"{d['first_cycle_wait_s']} s after start. Machine: "
            f"load1 {p['load']['loadavg_1m']:.1f}, busy cores {p['load']['busy_cores']}/2.",
        ]
    )


def reactor() -> str:
    out = []
    for name in ("reactor.json", "reactor_deployments_default.json",
                 "reactor_deployments_switch0.5ms.json"):  # fmt: skip
        d = _load(name)
        if d is None:
            continue
        dep = d["deployments"]
        out.append(f"**{name}** (switch interval: {d.get('switch_interval') or 'default 5 ms'})")
        out.append("")
        out.append(
            "| run | bare rps | bare p99 ms | reactor rps | reactor p99 ms | ratio | load1 |"
        )
        out.append("|---|---|---|---|---|---|---|")
        for i, r in enumerate(dep["runs"], 1):
            out.append(
                f"| {i} | {r['bare']['rps']:.0f} | {r['bare']['p99_ms']:.1f} "
                f"| {r['reactor']['rps']:.0f} | {r['reactor']['p99_ms']:.1f} "
                f"| {r['rps_ratio']:.3f} | {r['reactor']['load']['loadavg_1m']:.1f} |"
            )
        out.append(
            f"| **median** | {dep['bare_rps']['median']:.0f} | {dep['bare_p99_ms']['median']:.1f}"
            f" | {dep['reactor_rps']['median']:.0f} | **{dep['reactor_p99_ms']['median']:.1f}** "
            f"| **{dep['rps_ratio']['median']:.3f}** | |"
        )
        out.append("")
        if "webhooks" in d:
            w = d["webhooks"]
            out.append(f"Webhooks of {w['alerts_per_webhook']} alerts (POST /alerts, client side):")
            out.append("")
            out.append("| webhook | ms, median (min-max, n) | reactor CPU s |")
            out.append("|---|---|---|")
            for k, label in (("online", "1,000 clusters ONLINE"), ("repeat", "same again (no-op)"),
                             ("offline", "1,000 OFFLINE: 1,000 outages, 10,000 apps DEGRADED"),
                             ("restore", "1,000 ONLINE again: 10,000 apps restored")):  # fmt: skip
                out.append(
                    f"| {label} | {_med(w['seconds'][k], 1000, 1)} "
                    f"| {w['reactor_cpu_s'][k]['median']:.2f} |"
                )
            c = d["cascade"]
            out.append("")
            out.append(
                f"Cascade on one cluster with {c['apps']} apps: degrade "
                f"{_med(c['degrade_seconds'], 1000, 0)} ms, restore "
                f"{_med(c['restore_seconds'], 1000, 0)} ms; counts checked: "
                f"{c['counts_checked']}; reactor RSS {c['reactor_rss_peak_mib']} MiB."
            )
            db = d["database"]
            out.append(
                f"Database: empty {db['empty_bytes']} B; one cluster + {db['apps']} apps "
                f"{db['seeded_bytes']} B: **{db['mib_per_100k_apps']} MiB per 100,000 apps**; "
                f"the benchmark's store ({db['bench_db_apps']} apps) ended at "
                f"{db['bench_db_bytes_at_end']} B with its WAL."
            )
            out.append("")
    return "\n".join(out)


def e2e() -> str:
    rows = [
        "| N | interval s | floor s | down -> DEGRADED s, median (min-max, n) | above floor s "
        "| up -> DEPLOYED s | others untouched | load1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in (2, 3):
        d = _load(f"e2e_n{n}.json")
        if d is None:
            continue
        rows.append(
            f"| {n} | {d['interval_s']:g} | {d['floor_s']:g} | {_med(d['down_to_degraded_s'])} "
            f"| **{max(0.0, d['above_floor_s']['median']):.2f}** | {_med(d['up_to_deployed_s'])} "
            f"| {d['other_clusters_untouched']} | {d['load']['loadavg_1m']:.1f} |"
        )
    return "\n".join(rows)


def baselines() -> str:
    out = []
    a = _load("aiohttp_baseline.json")
    if a:
        out.append(
            f"bare aiohttp, wrk -t2 -c50: GET hello {_med(a['hello']['rps'], digits=0)} req/s, "
            f"p99 {_med(a['hello']['p99_ms'])} ms; POST /deployments (JSON parsed) "
            f"{_med(a['post_deployments']['rps'], digits=0)} req/s, p99 "
            f"{_med(a['post_deployments']['p99_ms'])} ms."
        )
    g = _load("genlatest.json")
    if g:
        for key, v in g["series"].items():
            out.append(
                f"generate_latest() {key}: {_med(v['seconds'], 1000, 1)} ms, "
                f"{v['us_per_series']} µs and {v['bytes_per_series']} B per series."
            )
    return "\n\n".join(out)


#: The result files of rounds 3 and 4 (bench/run_round3.sh, R=r3 and R=r4), in the order
#: RESULTS.md shows them.
_ROUND_FILES = [
    "before_asbuilt_10k",
    "asbuilt_10k",
    "defaultgc_10k",
    "nochecks_10k",
    "each_10k",
    "maxidle2000_10k",
    "nochecks_maxidle0_10k",
    "before_hang_10k",
    "hang_backtoback_10k",
    "hang_10k",
    "before_hang_load1_10k",
    "hang_load1_10k",
    "asbuilt_1k",
]


#: bench/run_round3b.sh's result files (r3b_*), in the order RESULTS.md shows them.
_HUNG_PASS = ["asbuilt_10k", "hang_backtoback_10k", "hang_10k", "before_hang_load1_10k",
              "hang_load1_10k"]  # fmt: skip


#: Round 4's last runs: stopped API servers before and after, the hung cases on the final code.
_FINAL_PASS = ["r4_frozen_10k.json", "r4_frozen_after_10k.json", "r4c_hang_10k.json",
               "r4c_hang_load1_10k.json", "r4d_frozen_10k.json", "r4d_asbuilt_10k.json",
               "r4d_hang_load1_10k.json"]  # fmt: skip


def round_files(prefix: str) -> list[str]:
    return [f"{prefix}_{name}.json" for name in _ROUND_FILES]


ROUND3 = round_files("r3")


def round3_cycles(names: list[str] = ROUND3) -> str:
    """Round 3's probe-cycle table: the cycles' wall and CPU, when their results were
    published, what the collector cost, memory, and the machine during the runs."""
    rows = [
        "| result | clusters | hung | what | cycle | wall s | results published s "
        "| exporter CPU s (ms/cluster) | of it /metrics s | full GC s | fleet CPU s | ok "
        "| peak RSS MiB | machine |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        doc = _load(name)
        if doc is None:
            continue
        for n, size in doc["sizes"].items():
            runs = size["runs"]
            for kind in ("first", "steady"):
                cycles = [c for r in runs for c in r["cycles"] if c["kind"] == kind]
                if not cycles:
                    continue
                wall = sorted(c["wall_s"] for c in cycles)
                published = sorted(c["published_s"] for c in cycles if "published_s" in c)
                cpu = sorted(c["cpu_s"] for c in cycles)
                render = sorted(c["render_cpu_s"] for c in cycles if "render_cpu_s" in c)
                full_gc = sorted(c["gc"]["seconds"][2] for c in cycles if "gc" in c)
                fleet = sorted(c["fleet_cpu_s"] for c in cycles if c["fleet_cpu_s"] is not None)
                ok = sorted(c["ok"] for c in cycles)
                rss = sorted(r["rss_peak_mib"] or 0 for r in runs)
                probes = max(c["probes"] for c in cycles) or 1
                rows.append(
                    f"| {name.removesuffix('.json')} | {n} | {size['hanging']} "
                    f"| {_what(size)} | {kind} (n={len(cycles)}) | {_spread(wall)} "
                    f"| {_spread(published) if published else '-'} "
                    f"| {_spread(cpu)} ({1000 * _mid(cpu) / probes:.2f}) "
                    f"| {f'{_mid(render):.2f}' if render else '-'} "
                    f"| {f'{_mid(full_gc):.2f}' if full_gc else '-'} "
                    f"| {_mid(fleet):.1f} | {ok[0]}-{ok[-1]} | {_mid(rss):.0f} "
                    f"| {_load_range(runs)} |"
                )
    return "\n".join(rows)


def _spread(values: list[float]) -> str:
    return f"{_mid(values):.2f} ({values[0]:.2f}-{values[-1]:.2f})"


def _what(size: dict[str, Any]) -> str:
    """What the run measured, in words."""
    parts = ["as built" if size.get("checks") else "probe only"]
    variant = size.get("variant", "keepalive")
    if variant != "keepalive":
        parts.append({"defaultgc": "CPython's collector"}.get(variant, variant))
    first = size["runs"][0] if size["runs"] else {}
    if first.get("max_idle") is not None:
        parts.append(f"max idle {first['max_idle']}")
    if size.get("credential", "client_cert_data") != "client_cert_data":
        parts.append("a client certificate per cluster")
    if size.get("hang_mode", "hang") != "hang":
        parts.append(f"hung ones {size['hang_mode']}")
    if size.get("interval_s"):
        parts.append(f"every {size['interval_s']:g} s")
    if size.get("busy_processes"):
        parts.append(f"{size['busy_processes']} busy process")
    return ", ".join(parts)


def round3_memory(prefix: str = "r3") -> str:
    """Live Python objects of the as-built run at 10,000 clusters, by type."""
    d = _load(f"{prefix}_asbuilt_10k.json")
    if d is None:
        return ""
    run = d["sizes"]["10000"]["runs"][0]
    objs, held = run.get("python_objects"), run.get("check_results_held")
    if not objs:
        return ""
    rows = [
        f"Peak RSS {run['rss_peak_mib']} MiB. Live Python objects: {objs['objects']:,} "
        f"({objs.get('tracked', 0):,} tracked by the collector), {objs['total_mib']} MiB "
        "(shallow sizes), by type:",
        "",
        "| type | count | MiB |",
        "|---|---|---|",
    ]
    rows += [f"| {k} | {v['count']:,} | {v['mib']} |" for k, v in objs["top"].items()]
    if held:
        rows += [
            "",
            f"Held for check results: {held['objects']:,} objects, {held['mib']} MiB "
            f"({held['per_cluster']} per cluster, {held['tracked_per_cluster']} tracked).",
        ]
    return "\n".join(rows)


def secret_discovery(name: str = "secret_discovery.json") -> str:
    """Clusters from Argo CD Secrets against the same from files (``bench.secret_discovery``)."""
    from bench.secret_discovery import markdown

    doc = _load(name)
    return markdown(doc) if doc is not None else ""


def cd(name: str = "cd.json") -> str:
    """Flux and Argo CD objects mirrored, paused and resumed (``bench.cd``)."""
    from bench.cd import markdown

    doc = _load(name)
    return markdown(doc) if doc is not None else ""


def reactor_lists() -> str:
    """The reactor's answers through its lists (``bench.reactor_lists``): every
    ``reactor_lists*.json`` but the quick one, each under its file's name."""
    from bench.reactor_lists import compare, markdown

    docs = {}
    for path in sorted(OUT_DIR.glob("reactor_lists*.json")):
        doc = _load(path.name)
        if doc is not None and "quick" not in path.name:
            docs[path.stem.removeprefix("reactor_lists_")] = doc
    if not docs:
        return ""
    each = [f"**{label}**\n\n{markdown(doc)}" for label, doc in docs.items()]
    return "\n\n".join([compare(docs), *each])


def _uptime_at_start(prefix: str) -> dict[str, str]:
    """``step_side_pass`` -> the 1-, 5- and 15-minute loads ``uptime`` gave as the run
    started (bench/run_layout_round.sh's log)."""
    log = OUT_DIR / prefix / "log.txt"
    starts: dict[str, str] = {}
    if log.is_file():
        for line in log.read_text().splitlines():
            m = re.match(r"=== \S+ (\w+) (\w+) pass (\d+); uptime: (.*)", line)
            if m:
                starts[f"{m[1]}_{m[2]}_{m[3]}"] = m[4].replace(",", "").replace(" ", " / ")
    return starts


def layout_round(prefix: str = "r12") -> str:
    """Before and after the layout move (bench/run_layout_round.sh): the steady probe
    cycle and the reactor benchmark, one row per run, in the order they ran."""
    starts = _uptime_at_start(prefix)
    names = [f"{side}_{n}" for n in range(1, 10) for side in ("before", "after")]
    cycles = [
        "| run | load at start (1/5/15 min) | first cycle s | first CPU ms/probe "
        "| steady cycle s, median (min-max) | steady CPU ms/probe | of it /metrics CPU s "
        "| peak RSS MiB | load1 at end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    reactors = [
        "| run | load at start (1/5/15 min) | POST /deployments rps (min-max) | p99 ms "
        "| ratio to the bare handler | 1,000 OFFLINE webhook ms | 1,000 ONLINE again ms "
        "| cascade 100,000 apps: degrade ms | restore ms | load1 at end |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        run = name.replace("_", " pass ")
        doc = _load(f"{prefix}/cycle_{name}.json")
        if doc is not None:
            [size] = doc["sizes"].values()
            [r] = size["runs"]
            first = next(c for c in r["cycles"] if c["kind"] == "first")
            steady = [c for c in r["cycles"] if c["kind"] == "steady"]
            wall = sorted(c["wall_s"] for c in steady)
            cpu = sorted(c["cpu_ms_per_probe"] for c in steady)
            render = sorted(c["render_cpu_s"] for c in steady)
            cycles.append(
                f"| {run} | {starts.get('cycle_' + name, '?')} | {first['wall_s']:.1f} "
                f"| {first['cpu_ms_per_probe']:.2f} | {_spread(wall)} | {_range3(cpu)} "
                f"| {_mid(render):.3f} | {r['rss_peak_mib']:.0f} "
                f"| {r['load']['loadavg_1m']:.1f} |"
            )
        doc = _load(f"{prefix}/reactor_{name}.json")
        if doc is not None:
            dep, hooks, cascade = doc["deployments"], doc["webhooks"], doc["cascade"]
            rps = dep["reactor_rps"]
            reactors.append(
                f"| {run} | {starts.get('reactor_' + name, '?')} "
                f"| {rps['median']:.0f} ({rps['min']:.0f}-{rps['max']:.0f}) "
                f"| {dep['reactor_p99_ms']['median']:.1f} | {dep['rps_ratio']['median']:.3f} "
                f"| {hooks['seconds']['offline']['median'] * 1000:.1f} "
                f"| {hooks['seconds']['restore']['median'] * 1000:.1f} "
                f"| {cascade['degrade_seconds']['median'] * 1000:.0f} "
                f"| {cascade['restore_seconds']['median'] * 1000:.0f} "
                f"| {cascade['load']['loadavg_1m']:.1f} |"
            )
    tables = [t for t in (cycles, reactors) if len(t) > 2]
    return "\n\n".join(["\n".join(t) for t in tables] + [_layout_summary(prefix, names)])


def _layout_summary(prefix: str, names: list[str]) -> str:
    """Per figure, one value per run: the runs of each side as median (min-max), the ratio
    of the medians, and whether the two sides' ranges overlap (within the spread)."""
    figures: dict[str, dict[str, dict[str, float]]] = {}

    def add(figure: str, name: str, value: float) -> None:
        side, run = name.split("_")
        figures.setdefault(figure, {"before": {}, "after": {}})[side][run] = value

    for name in names:
        side = name
        doc = _load(f"{prefix}/cycle_{name}.json")
        if doc is not None:
            [size] = doc["sizes"].values()
            [r] = size["runs"]
            first = next(c for c in r["cycles"] if c["kind"] == "first")
            steady = [c for c in r["cycles"] if c["kind"] == "steady"]
            add("first cycle, CPU ms/probe", side, first["cpu_ms_per_probe"])
            add("steady cycle, CPU ms/probe", side, _mid([c["cpu_ms_per_probe"] for c in steady]))
            add("steady cycle, wall s", side, _mid([c["wall_s"] for c in steady]))
            add("steady cycle, /metrics CPU s", side, _mid([c["render_cpu_s"] for c in steady]))
            add("exporter peak RSS MiB", side, r["rss_peak_mib"])
        doc = _load(f"{prefix}/reactor_{name}.json")
        if doc is not None:
            dep = doc["deployments"]
            add("POST /deployments rps", side, dep["reactor_rps"]["median"])
            add("POST /deployments, ratio to the bare handler", side, dep["rps_ratio"]["median"])
            add("POST /deployments p99 ms", side, dep["reactor_p99_ms"]["median"])
            add(
                "1,000 OFFLINE webhook ms",
                side,
                doc["webhooks"]["seconds"]["offline"]["median"] * 1000,
            )
            add("cascade of 100,000 apps, degrade ms", side,
                doc["cascade"]["degrade_seconds"]["median"] * 1000)  # fmt: skip
    rows = [
        "| figure (one value per run) | before | after | after / before | ranges overlap "
        "| after / before in each pass: median (min-max) | passes where after is higher |",
        "|---|---|---|---|---|---|---|",
    ]
    for figure, sides in figures.items():
        b, a = sorted(sides["before"].values()), sorted(sides["after"].values())
        if not a or not b:
            continue
        overlap = a[0] <= b[-1] and b[0] <= a[-1]
        pairs = sorted(
            sides["after"][run] / sides["before"][run]
            for run in sides["after"]
            if sides["before"].get(run)
        )
        rows.append(
            f"| {figure} | {_spread3(b)} | {_spread3(a)} | {_mid(a) / _mid(b):.2f} "
            f"| {'yes' if overlap else '**no**'} "
            f"| {_mid(pairs):.2f} ({pairs[0]:.2f}-{pairs[-1]:.2f}) "
            f"| {sum(p > 1 for p in pairs)} of {len(pairs)} |"
        )
    return "\n".join(rows)


def _spread3(values: list[float]) -> str:
    """median (min-max, n), about three significant figures."""

    def fmt(v: float) -> str:
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"

    return f"{fmt(_mid(values))} ({fmt(values[0])}-{fmt(values[-1])}, n={len(values)})"


def main() -> None:
    sections = {
        "Round 14: the reactor through its first list and a relist": reactor_lists(),
        "Round 12: before and after the layout move": layout_round(),
        "Round 12: the mechanical move alone": layout_round("r12-move"),
        "CD objects: mirrored, paused and resumed": cd(),
        "Clusters from Secrets against files": secret_discovery(),
        "Round 4: probe cycles": round3_cycles(round_files("r4")),
        "Round 4: memory (as built, 10,000 clusters)": round3_memory("r4"),
        "Round 4: the hung-cluster pass (bench/run_round3b.sh)": round3_cycles(
            [f"r3b_{name}.json" for name in _HUNG_PASS]
        ),
        "Round 4: stopped API servers, and the hung cases on the final code": round3_cycles(
            _FINAL_PASS
        ),
        "Round 3: probe cycles": round3_cycles(),
        "Round 3: memory (as built, 10,000 clusters)": round3_memory(),
        "Probe cycle": probe_cycles(
            [
                "probe_cycle_nochecks.json",
                "probe_cycle_nochecks_maxidle1000.json",
                "probe_cycle_hang_nochecks.json",
                "probe_cycle_hang.json",
                "probe_cycle.json",
                "probe_cycle_asbuilt_10k_before.json",
                "probe_cycle_asbuilt_10k.json",
                "probe_cycle_cpevery4.json",
                "probe_cycle_hang_cpevery4.json",
                "probe_cycle_gcfreeze.json",
                "probe_cycle_nochecks_10k_b.json",
                "probe_cycle_asbuilt_10k_b.json",
                "probe_cycle_asbuilt_10k_c.json",
            ]
        ),
        "Memory and rendering (as built, 10,000 clusters)": memory(),
        "TLS session resumption": tls_resume(),
        "Two exporter processes": two_processes(),
        "vs blackbox_exporter": vs_blackbox(),
        "Scrape": scrape(),
        "Reactor": reactor(),
        "End to end": e2e(),
        "Baselines": baselines(),
    }
    for title, body in sections.items():
        if body:
            print(f"### {title}\n\n{body}\n")


if __name__ == "__main__":
    main()
