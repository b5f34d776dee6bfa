"""Serialisation to a snapshot: the cluster as the v1 ``List`` kubectl prints (compact, as the API
server sends it and ``desched snapshot`` writes it; ``pretty`` indents like kubectl), a cache of
snapshot files keyed by spec and generator version, and the command line
(``python -m benchmarks.generator --nodes 50 -o cluster.json``)."""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path
from typing import BinaryIO

import msgspec

from benchmarks.generator.cluster import generate
from benchmarks.generator.common import ClusterSpec, GenerationStats

_INDENT = 4


def write_snapshot(spec: ClusterSpec, out: BinaryIO, *, pretty: bool = False) -> GenerationStats:
    """Write the cluster as a v1 List: compact JSON, as the API server sends it and ``desched snapshot``
    writes it; ``pretty`` indents it as ``kubectl get -o json`` prints it (about 3 times the bytes)."""
    stats = GenerationStats()
    encoder = msgspec.json.Encoder()
    total = 0
    head = b'{\n    "apiVersion": "v1",\n    "items": [\n' if pretty else b'{"apiVersion":"v1","items":['
    out.write(head)
    total += len(head)
    first = True
    sep = b",\n" if pretty else b","
    for obj in generate(spec, stats):
        data = encoder.encode(obj)
        if pretty:
            data = b"        " + msgspec.json.format(data, indent=_INDENT).replace(b"\n", b"\n        ")
        if obj["kind"] == "Pod":
            stats.pod_bytes += len(data)
        if not first:
            out.write(sep)
            total += len(sep)
        first = False
        out.write(data)
        total += len(data)
    tail = (
        b'\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n'
        if pretty
        else b'],"kind":"List","metadata":{"resourceVersion":""}}'
    )
    out.write(tail)
    stats.total_bytes = total + len(tail)
    return stats


def snapshot_bytes(spec: ClusterSpec, *, pretty: bool = False) -> bytes:
    buf = io.BytesIO()
    write_snapshot(spec, buf, pretty=pretty)
    return buf.getvalue()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "desched" / "bench"


def cached_snapshot(spec: ClusterSpec, directory: Path | None = None) -> tuple[Path, bool]:
    """The snapshot file of ``spec``, generated unless cached. Returns (path, generated now)."""
    directory = directory or cache_dir()
    path = directory / spec.cache_name
    if path.exists():
        return path, False
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        with tmp.open("wb") as f:
            write_snapshot(spec, f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.generator",
        description="Write a realistic generated cluster snapshot (a v1 List, JSON).",
    )
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pretty", action="store_true", help="indent as kubectl does (about 3x the bytes)")
    parser.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    try:
        spec = ClusterSpec(args.nodes, args.pods_per_node, args.seed)
    except ValueError as e:
        parser.error(str(e))
    t0 = time.perf_counter()
    if args.output == "-":
        stats = write_snapshot(spec, sys.stdout.buffer, pretty=args.pretty)
    else:
        with open(args.output, "wb") as f:
            stats = write_snapshot(spec, f, pretty=args.pretty)
    pods = stats.counts.get("Pod", 0)
    print(
        f"generated {', '.join(f'{v} {k}' for k, v in stats.counts.items())}: "
        f"{stats.total_bytes / 1e6:.1f} MB, "
        f"mean pod {stats.pod_bytes / max(1, pods) / 1024:.1f} KiB, in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0
