"""``python -m benchmarks``: measure desched on generated clusters of several sizes.

For every size (``--nodes``) the snapshot is generated once (or reused from the cache, see
:func:`benchmarks.generator.cached_snapshot`); then, for every policy variant (``--policy``), a
fresh worker process, so that memory peaks of different runs never mix:

1. runs ``desched simulate SNAPSHOT --policy P --now NOW -o json`` as its only child and takes
   the wall time and the child's peak RSS (``RUSAGE_CHILDREN``), unless ``--no-simulate``;
2. loads the snapshot in-process with ``desched.cluster.file_source.load_snapshot_file``;
3. runs one cycle as ``desched simulate --no-placement`` does
   (:func:`desched.app.simulate.single_cycle`: PodDisruptionBudgets answered as the API does),
   timing every plugin (``PluginRun.seconds``), optionally under cProfile (``--profile DIR``);
4. reports its own peak RSS (``RUSAGE_SELF``), as one JSON line.

Plugins the policy names but the registry does not have yet are dropped, with a warning. The
results are printed as JSON lines as they come, then as markdown tables (``--markdown FILE``
writes the tables to a file too, ``--jsonl FILE`` the JSON lines).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks import BENCH_DIR, POLICIES, drop_unregistered, plugin_names
from benchmarks.generator import GENERATOR_VERSION, NOW, ClusterSpec, cache_dir, cached_snapshot

REPO = BENCH_DIR.parent


def _maxrss_mib(who: int) -> float:
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(who).ru_maxrss / 1024


def _current_rss_mib() -> float | None:
    """The resident set now (not the peak), from /proc; None where there is no /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# ============================================================================ the worker


def worker(job: dict[str, Any]) -> dict[str, Any]:
    """One measurement, in a process of its own (``--worker``)."""
    if "extender_nodes" in job:
        from benchmarks.extender import bench_extender

        return {"extender": bench_extender(job["extender_nodes"], job.get("requests", 200))}
    out: dict[str, Any] = {}
    snapshot_path = job["snapshot"]
    policy_path = job["policy"]

    if job.get("simulate", True):
        # the default (with placement) and --no-placement: the end-to-end figure is
        # "load + cycle + output"; placement is what `desched simulate` adds on top by default
        for key, extra in (("simulate", []), ("simulate_noplace", ["--no-placement"])):
            out.update(_simulate(snapshot_path, policy_path, [*extra, *job.get("simulate_args", [])], key))

    import gc
    from datetime import datetime

    from desched.api.policy import load_policy_file
    from desched.app.simulate import new_framework, single_cycle
    from desched.cluster.file_source import load_snapshot_file
    from desched.plugins import default_registry

    rss_start = _maxrss_mib(resource.RUSAGE_SELF)
    t0, c0 = time.perf_counter(), time.process_time()
    snapshot = load_snapshot_file(snapshot_path)
    out["load_s"] = time.perf_counter() - t0
    out["load_cpu_s"] = time.process_time() - c0
    out["rss_after_load_mib"] = _maxrss_mib(
        resource.RUSAGE_SELF
    )  # the peak so far: includes the file's bytes
    out["rss_now_after_load_mib"] = _current_rss_mib()  # what the loaded snapshot keeps
    out["rss_before_load_mib"] = rss_start
    out["nodes"] = len(snapshot.nodes)
    out["pods"] = len(snapshot.pods)

    registry = default_registry(entry_points=False)
    policy = load_policy_file(policy_path, registry)
    now = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
    framework = new_framework(policy, registry, now)

    gc_time = [0.0, 0.0]  # total, start of the current collection

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_time[1] = time.perf_counter()
        else:
            gc_time[0] += time.perf_counter() - gc_time[1]

    gc.callbacks.append(on_gc)
    profiler = None
    if job.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        cpu_marks = [time.process_time()]
        result = single_cycle(
            framework, snapshot, now, on_plugin_run=lambda run: cpu_marks.append(time.process_time())
        )
        cpu_marks.append(time.process_time())
    finally:
        if profiler is not None:
            profiler.disable()
        gc.callbacks.remove(on_gc)
    out["cycle_s"] = result.seconds
    out["cycle_cpu_s"] = cpu_marks[-1] - cpu_marks[0]
    out["cycle_gc_s"] = gc_time[0]
    out["ready_nodes"] = result.nodes
    out["skipped"] = result.skipped
    out["evictions"] = len(result.evictions)
    out["refused"] = len(result.failures)
    counts: dict[str, int] = {}
    for run in result.plugin_runs:
        counts[run.plugin] = counts.get(run.plugin, 0) + 1
    runs = []
    # CPU seconds from one plugin's end to the next one's (the first includes the cycle's start)
    for run, start, end in zip(result.plugin_runs, cpu_marks, cpu_marks[1:], strict=False):
        runs.append(
            {
                "profile": run.profile,
                "plugin": run.plugin if counts[run.plugin] == 1 else f"{run.profile}/{run.plugin}",
                "extension_point": run.extension_point,
                "seconds": run.seconds,
                "cpu_s": end - start,
                "evicted": run.evicted,
                "error": run.error,
            }
        )
    out["plugins"] = runs
    out["peak_rss_mib"] = _maxrss_mib(resource.RUSAGE_SELF)
    if profiler is not None:
        out["profile"] = _write_profile(profiler, Path(job["profile"]))
    return out


def _simulate(snapshot: str, policy: str, extra: list[str], key: str) -> dict[str, Any]:
    """Run ``desched simulate ... -o json`` once; its wall and CPU time, peak RSS and evictions
    (``os.wait4`` gives this child's own resource usage, not the sum over all children)."""
    cmd = [*_desched_command(), "simulate", snapshot, "--policy", policy, "--now", NOW, "-o", "json", *extra]
    out: dict[str, Any] = {}
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out[f"{key}_s"] = time.perf_counter() - t0
        out[f"{key}_peak_rss_mib"] = usage.ru_maxrss / 1024
        out[f"{key}_cpu_s"] = usage.ru_utime + usage.ru_stime
        if proc.returncode != 0:
            stderr.seek(0)
            out[f"{key}_error"] = stderr.read().decode(errors="replace").strip()[-2000:]
        else:
            stdout.seek(0)
            doc = json.load(stdout)
            out[f"{key}_evictions"] = doc["summary"]["evicted"]
            if "placements" in doc:
                out[f"{key}_placed"] = len(doc["placements"])
                out[f"{key}_percentage_of_nodes_to_score"] = doc["scoring"]["percentageOfNodesToScore"]
    return out


def _write_profile(profiler: Any, stem: Path) -> str:
    import io
    import pstats

    stem.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(stem.with_suffix(".prof")))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.strip_dirs()
    text.write("== by own time (tottime)\n")
    stats.sort_stats("tottime").print_stats(40)
    text.write("\n== by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(60)
    stem.with_suffix(".txt").write_text(text.getvalue())
    return str(stem.with_suffix(".txt"))


def _desched_command() -> list[str]:
    script = Path(sys.executable).parent / "desched"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "desched.cli"]


# ============================================================================ the driver


def _run_worker(job: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "benchmarks", "--worker", json.dumps(job)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return {"error": " | ".join(err[-5:]) or f"worker exited {proc.returncode}", "worker_s": wall}
    lines = proc.stdout.decode().strip().splitlines()
    res: dict[str, Any] = json.loads(lines[-1])
    res["worker_s"] = wall
    return res


def _machine() -> dict[str, Any]:
    from desched import __version__

    commit = ""
    with contextlib.suppress(OSError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()
    mem_gib = 0.0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_gib, 1),
        "desched": __version__,
        "commit": commit,
        "generator_version": GENERATOR_VERSION,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure snapshot loading, one descheduling cycle per plugin, peak memory and "
        "'desched simulate' on generated clusters (method: docs/performance.md).",
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000], help="cluster sizes (nodes)")
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--policy",
        nargs="+",
        default=["all", "nodefit"],
        choices=sorted(POLICIES),
        help="policy variants: all = benchmarks/policy-all.yaml, nodefit = "
        "benchmarks/policy-all-nodefit.yaml (default: both)",
    )
    parser.add_argument(
        "--no-simulate", action="store_true", help="skip the end-to-end 'desched simulate' run"
    )
    parser.add_argument(
        "--simulate-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for 'desched simulate' (repeatable), e.g. --simulate-arg=--no-placement",
    )
    parser.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        metavar="P",
        help="place with kube-scheduler's percentageOfNodesToScore P (1..100; 'desched simulate' reads "
        "it from a KubeSchedulerConfiguration given by --kube-scheduler-config). 1 fixes "
        "numFeasibleNodesToFind at 100 from 100 to 9,999 nodes: the placement cost curve at a "
        "fixed search (default: kube-scheduler's adaptive percentage)",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="run the cycle under cProfile; write .prof and .txt here"
    )
    parser.add_argument(
        "--extender-nodes",
        type=int,
        default=1000,
        metavar="N",
        help="candidate nodes for the extender's prioritize/filter latency (default 1000; 0 skips it)",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per worker (default 3600)")
    parser.add_argument("--cache-dir", type=Path, help=f"snapshot cache (default {cache_dir()})")
    parser.add_argument("--markdown", metavar="FILE", help="also write the markdown tables here")
    parser.add_argument("--jsonl", metavar="FILE", help="also write the JSON lines here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    pct = args.percentage_of_nodes_to_score
    if pct is not None and not 1 <= pct <= 100:
        parser.error(f"--percentage-of-nodes-to-score: must be from 1 to 100, got {pct}")

    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    from desched.plugins import default_registry

    registry = default_registry(entry_points=False)
    machine = _machine()
    results: list[dict[str, Any]] = []
    jsonl = open(args.jsonl, "w") if args.jsonl else None  # noqa: SIM115
    all_plugins: list[str] = []
    missing: list[str] = []
    with tempfile.TemporaryDirectory(prefix="desched-bench-") as tmp:
        policies: dict[str, Path] = {}
        for variant in args.policy:
            doc = yaml.safe_load(POLICIES[variant].read_text())
            for name in plugin_names(doc):
                if name not in all_plugins:
                    all_plugins.append(name)
            filtered, dropped = drop_unregistered(doc, registry)
            for name in dropped:
                if name not in missing:
                    missing.append(name)
            path = Path(tmp) / f"policy-{variant}.yaml"
            path.write_text(yaml.safe_dump(filtered, sort_keys=False))
            policies[variant] = path
        simulate_args = list(args.simulate_arg)
        if pct is not None:
            config = Path(tmp) / "kube-scheduler-config.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "KubeSchedulerConfiguration",
                        "percentageOfNodesToScore": pct,
                    }
                )
            )
            simulate_args += ["--kube-scheduler-config", str(config)]
        if missing:
            print(
                f"warning: plugins not registered (not implemented yet), dropped from the policy: "
                f"{', '.join(missing)}",
                file=sys.stderr,
            )

        for nodes in args.nodes:
            spec = ClusterSpec(nodes, args.pods_per_node, args.seed)
            t0 = time.perf_counter()
            print(f"[{nodes} nodes] snapshot ...", file=sys.stderr, flush=True)
            path, generated = cached_snapshot(spec, args.cache_dir)
            gen_s = time.perf_counter() - t0
            size_mb = path.stat().st_size / 1e6
            print(
                f"[{nodes} nodes] {'generated' if generated else 'cached'} {path} ({size_mb:.0f} MB"
                f"{f', {gen_s:.1f} s' if generated else ''})",
                file=sys.stderr,
                flush=True,
            )
            for variant in args.policy:
                job: dict[str, Any] = {
                    "snapshot": str(path),
                    "policy": str(policies[variant]),
                    "simulate": not args.no_simulate,
                    "simulate_args": simulate_args,
                }
                if args.profile:
                    job["profile"] = str(Path(args.profile) / f"profile-n{nodes}-{variant}")
                print(f"[{nodes} nodes] policy {variant} ...", file=sys.stderr, flush=True)
                res = _run_worker(job, args.timeout)
                res.update(
                    {
                        "size_nodes": nodes,
                        "pods_per_node": args.pods_per_node,
                        "seed": args.seed,
                        "policy": variant,
                        "snapshot_mb": size_mb,
                        "snapshot_file": str(path),
                        "generated_s": gen_s if generated else None,
                        "profiled": bool(args.profile),
                        "simulate_args": args.simulate_arg,
                        "percentage_of_nodes_to_score": pct,
                        "missing_plugins": missing,
                        "machine": machine,
                    }
                )
                results.append(res)
                line = json.dumps(res)
                print(line, flush=True)
                if jsonl is not None:
                    jsonl.write(line + "\n")
                    jsonl.flush()
                if "error" in res:
                    print(f"[{nodes} nodes] policy {variant} failed: {res['error']}", file=sys.stderr)
        if args.extender_nodes > 0:
            print(f"[extender] {args.extender_nodes} candidate nodes ...", file=sys.stderr, flush=True)
            res = _run_worker({"extender_nodes": args.extender_nodes}, args.timeout)
            if "extender" not in res:
                res = {"extender": {"error": res.get("error", "no result")}}
            results.append(res)
            line = json.dumps(res)
            print(line, flush=True)
            if jsonl is not None:
                jsonl.write(line + "\n")
    if jsonl is not None:
        jsonl.close()
    md = markdown(results, all_plugins, missing, machine)
    print()
    print(md)
    if args.markdown:
        Path(args.markdown).write_text(md)
    failed = any(
        "error" in r
        or r.get("simulate_error")
        or r.get("simulate_noplace_error")
        or "error" in r.get("extender", {})
        for r in results
    )
    return 1 if failed else 0


# ============================================================================ the tables


def _f(value: Any, fmt: str = "{:.2f}") -> str:
    if value is None:
        return "-"
    return fmt.format(value)


def placement_cost(r: dict[str, Any]) -> dict[str, float] | None:
    """What placing the replacements costs in one result: the CPU seconds of ``desched simulate``
    beyond those of ``--no-placement``, per replacement and per (replacement * log2(nodes)) (the
    curve issue 16 asks to stay flat or fall as the cluster grows), and kube-scheduler's
    numFeasibleNodesToFind at that size (issue 28 measures the curve with it fixed); None
    without both runs."""
    from desched.scheduling.placement.order import num_feasible_nodes_to_find

    with_cpu, without_cpu = r.get("simulate_cpu_s"), r.get("simulate_noplace_cpu_s")
    placed, nodes = r.get("simulate_placed"), r.get("nodes")
    if with_cpu is None or without_cpu is None or not placed or not nodes or nodes < 2:
        return None
    cpu = max(with_cpu - without_cpu, 0.0)
    return {
        "feasible_nodes_to_find": num_feasible_nodes_to_find(nodes, r.get("percentage_of_nodes_to_score")),
        "cpu_s": cpu,
        "ms_per_replacement": cpu / placed * 1000,
        "us_per_replacement_log_nodes": cpu / (placed * math.log2(nodes)) * 1e6,
    }


def markdown(
    results: list[dict[str, Any]], plugins: list[str], missing: list[str], machine: dict[str, Any]
) -> str:
    """The results as markdown: a summary table and a per-plugin table (wall seconds, CPU seconds)."""
    lines = [
        f"Machine: {machine['cpus']} CPUs, {machine['memory_gib']} GiB, Python {machine['python']}, "
        f"{machine['platform']}; desched {machine['desched']} ({machine['commit'] or 'no commit'}), "
        f"generator v{machine['generator_version']}. Times are wall seconds, with CPU seconds of the "
        "process in parentheses.",
        "",
        "| nodes | pods | policy | snapshot MB | load s | cycle s | GC in cycle s | evictions "
        "| RSS after load MiB | peak RSS MiB | `desched simulate` s | its peak RSS MiB "
        "| `simulate --no-placement` s | its peak RSS MiB |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sized = [r for r in results if "size_nodes" in r]
    for r in sized:
        if "error" in r and "cycle_s" not in r:
            lines.append(
                f"| {r['size_nodes']:,} | - | {r['policy']} | {r['snapshot_mb']:.0f} | failed: "
                f"{r['error'][:120]} | | | | | | | | | |"
            )
            continue
        lines.append(
            f"| {r['nodes']:,} | {r['pods']:,} | {r['policy']} | {r['snapshot_mb']:.0f} "
            f"| {_f(r['load_s'])} ({_f(r.get('load_cpu_s'))}) "
            f"| {_f(r['cycle_s'])} ({_f(r.get('cycle_cpu_s'))}) "
            f"| {_f(r.get('cycle_gc_s'))} | {r['evictions']:,} "
            f"| {_f(r['rss_after_load_mib'], '{:.0f}')} | {_f(r['peak_rss_mib'], '{:.0f}')} "
            f"| {_f(r.get('simulate_s'))} ({_f(r.get('simulate_cpu_s'))}) "
            f"| {_f(r.get('simulate_peak_rss_mib'), '{:.0f}')} "
            f"| {_f(r.get('simulate_noplace_s'))} ({_f(r.get('simulate_noplace_cpu_s'))}) "
            f"| {_f(r.get('simulate_noplace_peak_rss_mib'), '{:.0f}')} |"
        )
    for r in sized:
        for key in ("simulate", "simulate_noplace"):
            if r.get(f"{key}_error"):
                command = "simulate --no-placement" if key == "simulate_noplace" else "simulate"
                lines += [
                    "",
                    f"`desched {command}` failed at {r['size_nodes']:,} nodes: {r[f'{key}_error'][-300:]}",
                ]
    curve = [r for r in sized if placement_cost(r) is not None]
    if curve:
        lines += [
            "",
            "Placement cost curve: the CPU seconds `desched simulate` spends beyond `--no-placement` "
            "(both runs above), per replacement placed and per (replacement * log2(nodes)), which "
            "stays flat or falls where the cost grows no faster than log(nodes):",
            "",
            "| nodes | policy | replacements | placement CPU s | ms per replacement "
            "| us per (replacement * log2(nodes)) | numFeasibleNodesToFind |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for r in curve:
            cost = placement_cost(r)
            assert cost is not None
            lines.append(
                f"| {r['nodes']:,} | {r['policy']} | {r['simulate_placed']:,} | {cost['cpu_s']:.2f} "
                f"| {cost['ms_per_replacement']:.3f} | {cost['us_per_replacement_log_nodes']:.2f} "
                f"| {cost['feasible_nodes_to_find']:,.0f} |"
            )
    ext = [r for r in results if "extender" in r]
    for r in ext:
        e = r["extender"]
        if "error" in e:
            lines += ["", f"Extender benchmark failed: {e['error']}"]
            continue
        lines += [
            "",
            f"`desched extender` latency at {e['nodes']:,} candidate nodes "
            f"({e['pods_in_cache']:,} pods in its cache, {e['requests']} requests per row, "
            "loopback HTTP, keep-alive):",
            "",
            "| call | p50 ms | p99 ms | mean ms | CPU ms per request |",
            "|---|---:|---:|---:|---:|",
        ]
        for verb in ("prioritize", "filter"):
            for mode, label in (("nodenames", "NodeNames (nodeCacheCapable)"), ("nodelist", "full NodeList")):
                m = e[verb][mode]
                lines.append(
                    f"| {verb}, {label} | {m['p50_ms']} | {m['p99_ms']} | {m['mean_ms']} | {m['cpu_ms']} |"
                )
    ok = [r for r in sized if "plugins" in r]
    if ok:
        lines += ["", "Seconds per plugin in the cycle, wall (CPU) [evictions]:", ""]
        header = "| plugin | " + " | ".join(f"{r['nodes']:,} nodes, {r['policy']}" for r in ok) + " |"
        lines += [header, "|---|" + "---:|" * len(ok)]
        seen: list[str] = []
        for r in ok:
            for run in r["plugins"]:
                if run["plugin"] not in seen:
                    seen.append(run["plugin"])
        for name in seen + [m for m in missing if m not in seen]:
            cells = []
            for r in ok:
                run = next((p for p in r["plugins"] if p["plugin"] == name), None)
                if run is None:
                    cells.append("not implemented" if name in missing else "-")
                elif run.get("error"):
                    cells.append(f"error: {run['error'][:60]}")
                else:
                    cells.append(
                        f"{run['seconds']:.3f} ({_f(run.get('cpu_s'), '{:.3f}')}) [{run['evicted']:,}]"
                    )
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        inside = [n for n in plugins if n not in seen and n not in missing]
        if inside:
            lines += [
                "",
                f"{', '.join(inside)} (Sort) and DefaultEvictor (Filter, PreEvictionFilter) run inside the "
                "plugins above: their time is counted there.",
            ]
    if missing:
        lines += [
            "",
            f"Not implemented at the time of measurement (dropped from the policy): {', '.join(missing)}.",
        ]
    if any(r.get("profiled") for r in results):
        lines += ["", "Measured under cProfile: times are inflated, compare them only with each other."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
