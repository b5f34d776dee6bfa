"""``desched extender``: a kube-scheduler HTTP extender scoring nodes with the generic
node-resources scorer (:mod:`desched.scheduling.scorer`).

The protocol is ``k8s.io/kube-scheduler/extender/v1``: kube-scheduler POSTs an ``ExtenderArgs``
(``{"Pod": <v1.Pod>, "Nodes": <v1.NodeList>|null, "NodeNames": [..]|null}``; the Go structs have
no json tags, hence the capitalised keys) to ``<urlPrefix>/<verb>``:

- ``filter`` answers an ``ExtenderFilterResult`` (``Nodes``, ``NodeNames``, ``FailedNodes``,
  ``FailedAndUnresolvableNodes``, ``Error``): the nodes the pod fits, as kube-scheduler's own
  filters judge it (node unschedulable, node selector and required node affinity, NoSchedule and
  NoExecute taints, resource requests and pod count). The pod is *not* on any node yet, so its
  requests are checked against what is left on every node. A node failing a static check goes
  to ``FailedAndUnresolvableNodes`` (preemption would not help), a node short of resources to
  ``FailedNodes``.
- ``prioritize`` answers a ``HostPriorityList`` (``[{"Host": .., "Score": 0..10}]``); kube-scheduler
  adds ``Score * weight * 10`` to its own 0..100 scores.

The verb is the last path segment (``filter``/``predicates``, ``prioritize``/``priorities``), so
any ``urlPrefix`` works. ``GET /healthz`` (also ``/livez``), ``/readyz`` (200 once the cache has
synced) and ``/metrics`` (Prometheus) are served on the same port.

Where the nodes come from: with ``nodeCacheCapable: false`` kube-scheduler sends the full Node
objects and the filter answer carries the passing ones back (byte for byte); with ``true`` it
sends names only, and the extender takes the nodes from its own cache. Either way the *pods* on
each node come from the extender's cache: a :class:`desched.cluster.live_source.LiveCache` of Nodes
and Pods (or a snapshot file, for offline use) feeding :class:`NodeUsageIndex`, which keeps every
node's allocatable and the running sums of its pods' requests, so a request costs a dictionary
lookup per node, never a pass over pods; for prioritize the same amounts of the scorer's resources
are kept as rows of numpy arrays, so a request costs one array indexing and the scorer runs on
columns (``GenericScorer.score_arrays``, the same floats as its lists). A pod counts on its node
from the moment the cache sees it bound until it finishes (Succeeded, Failed) or is deleted.
kube-scheduler's *assumed* pods (bound a moment ago, not yet seen through the watch) are not
known to the extender: between pods scheduled in quick succession the extender may lag by a few
milliseconds of watch latency.

A node kube-scheduler names but the cache has not seen yet passes the filter (kube-scheduler's
own filters have already checked it) and scores 0.

Time budget: kube-scheduler gives an extender ``httpTimeout`` (default 5 s); a filter call that
times out fails the pod's scheduling attempt. The extender checks its budget (``--timeout-budget``,
default 4 s, counted from the request's arrival) between chunks of nodes: over budget, the nodes
not yet looked at pass the filter, and score 0 in prioritize, and the answer goes out at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from desched.app.extender.metrics import ExtenderMetrics
from desched.app.extender.server import ExtenderServer
from desched.app.extender.usage import NodeUsageIndex
from desched.app.extender.verbs import Extender
from desched.app.extender.wire import (
    DEFAULT_PORT,
    DEFAULT_TIMEOUT_BUDGET,
    BadRequest,
    ExtenderArgs,
    ExtenderFilterResult,
    HostPriority,
    Reply,
)
from desched.kube import loop as kube_loop
from desched.runtime.signals import stop_on_signals
from desched.runtime.tls import server_context
from desched.scheduling.scorer import GenericScorer, GenericScorerArgs

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT_BUDGET",
    "BadRequest",
    "Extender",
    "ExtenderArgs",
    "ExtenderFilterResult",
    "ExtenderMetrics",
    "ExtenderOptions",
    "ExtenderServer",
    "HostPriority",
    "NodeUsageIndex",
    "Reply",
    "run_extender",
]


@dataclass(frozen=True)
class ExtenderOptions:
    args: GenericScorerArgs
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    kubeconfig: str | None = None
    context: str | None = None
    snapshot: str | None = None
    tls: tuple[str, str] | None = None
    budget: float = DEFAULT_TIMEOUT_BUDGET
    connect_timeout: float = 30.0


def run_extender(options: ExtenderOptions) -> int:
    """Serve until SIGTERM or SIGINT."""
    return kube_loop.run(_serve(options))


async def _serve(options: ExtenderOptions) -> int:
    scorer = GenericScorer(options.args)
    metrics = ExtenderMetrics()
    stop, signals = stop_on_signals()
    # what the extender opens is closed in the reverse order: the serving port, the credentials'
    # refresher, the watches, the API client
    async with contextlib.AsyncExitStack() as resources:
        connect: Callable[[], Awaitable[None]] | None = None
        monitor: Any = None
        if options.snapshot:
            from desched.cluster.file_source import load_snapshot_file

            snap = load_snapshot_file(options.snapshot)
            state = NodeUsageIndex.from_objects(snap.nodes, snap.pods)

            def ready() -> bool:
                return True
        else:
            from desched.cluster.live_source import LiveCache
            from desched.kube.client import api_client
            from desched.kube.connect import (
                ConnectionMonitor,
                discover,
                keep_credentials_fresh,
                load_config_bounded,
            )

            cfg, source = await load_config_bounded(
                options.kubeconfig, options.context, options.connect_timeout, stop, signals
            )
            monitor = ConnectionMonitor(source, bound=options.connect_timeout)
            # an exec credential plugin's token is replaced before it expires, for as long as we serve
            refresher = asyncio.create_task(keep_credentials_fresh(source, options.connect_timeout, stop))
            api = api_client(cfg)
            resources.push_async_callback(api.close)
            state = NodeUsageIndex()
            cache = LiveCache(api, ("Node", "Pod"), on_change=state.on_change, monitor=monitor)
            resources.push_async_callback(cache.stop)
            resources.push_async_callback(_cancelled, refresher)

            def ready() -> bool:
                return all(inf.synced.is_set() for inf in cache.informers.values())

            async def connect() -> None:
                await discover(api, monitor, need_eviction=False)
                cache.start()
                await cache.wait_synced()

        metrics.watch_state(state)
        extender = Extender(scorer, state, budget=options.budget)
        ctx = server_context(*options.tls) if options.tls else None
        server = ExtenderServer(
            extender, host=options.host, port=options.port, ssl_context=ctx, metrics=metrics, ready=ready
        )
        resources.push_async_callback(server.stop)
        await server.start()
        scheme = "https" if ctx else "http"
        print(f"desched extender serving {scheme}://{options.host}:{server.port} ({scorer})", file=sys.stderr)
        if connect is not None:
            await monitor.start(connect(), stop, signals)
            print(f"cache synced: {len(state.nodes)} nodes, {state.pod_count} pods on them", file=sys.stderr)
        await stop.wait()
    return 0


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
