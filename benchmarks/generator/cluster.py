"""The whole cluster: its parts drawn in one order from one random source, and listed in the
order kubectl lists the kinds (Namespaces, PriorityClasses, Nodes, Pods, PDBs, PVCs, Events)."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks.generator.common import ClusterSpec, Context, GenerationStats, Obj
from benchmarks.generator.events import Events
from benchmarks.generator.nodes import NodePlan
from benchmarks.generator.objects import ClusterObjects
from benchmarks.generator.pods import Pods
from benchmarks.generator.templates import Templates
from benchmarks.generator.workloads import Workloads, daemonsets, teams


def generate(spec: ClusterSpec, stats: GenerationStats | None = None) -> Iterator[Obj]:
    """Every object of the cluster, in the order kubectl would list them (lazily: nothing is drawn
    before the first object is asked for)."""
    ctx = Context(spec, stats)
    plan = NodePlan(ctx)
    objects = ClusterObjects(ctx)
    events = Events(ctx)
    pods = Pods(ctx, plan, Templates(ctx), objects, events)
    ds = daemonsets(spec)
    plan.plan(ds)
    objects.plan_namespaces(teams(spec))
    yield from objects.namespace_objects()
    yield from objects.priority_class_objects()
    for node in plan.nodes:
        yield plan.node_object(node)
    yield from pods.pods(ds, Workloads(ctx, plan, objects.namespaces))
    yield from objects.pdbs
    yield from objects.pvcs
    yield from events.items
