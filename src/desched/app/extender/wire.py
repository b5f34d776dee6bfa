"""The extender protocol on the wire (``k8s.io/kube-scheduler/extender/v1``): what kube-scheduler
sends and what the extender answers, decoded and encoded with msgspec, and the limits of a request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import msgspec

from desched.k8s.objects import NodeSpec, Pod, ResourceList

DEFAULT_PORT: Final = 8888
DEFAULT_TIMEOUT_BUDGET: Final = 4.0
#: Nodes handled between two looks at the clock.
CHUNK: Final = 256
#: The largest request body accepted (a NodeList of thousands of nodes with images is big).
MAX_BODY: Final = 512 * 1024 * 1024
#: Request buffers kept between requests (kube-scheduler sends one request at a time; a request
#: read while the buffer is in use gets a buffer of its own, dropped after unless the pool has room).
POOLED_BUFFERS: Final = 1

FILTER: Final = "filter"
PRIORITIZE: Final = "prioritize"
#: Path segment -> verb. ``predicates``/``priorities`` are the names older examples use.
VERBS: Final[Mapping[str, str]] = {
    "filter": FILTER,
    "predicates": FILTER,
    "prioritize": PRIORITIZE,
    "priorities": PRIORITIZE,
}

EMPTY: Final[Mapping[str, int]] = {}


class NodeListIn(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class ExtenderArgs(msgspec.Struct, rename="pascal"):
    """``extenderv1.ExtenderArgs``; node items stay raw so that filter can return them as sent."""

    pod: Pod | None = None
    nodes: NodeListIn | None = None
    node_names: list[str] | None = None


# What the verbs read of a Node sent in full: decoding only these fields (not conditions,
# images, annotations, managedFields) is most of the cost of a request with 1,000 nodes.
class WireMeta(msgspec.Struct, rename="camel"):
    name: str = ""
    resource_version: str = ""
    labels: dict[str, str] | None = None


class WireStatus(msgspec.Struct):
    allocatable: ResourceList | None = None
    capacity: ResourceList | None = None


class WireNode(msgspec.Struct):
    metadata: WireMeta = msgspec.field(default_factory=WireMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: WireStatus = msgspec.field(default_factory=WireStatus)


class ScoreMeta(msgspec.Struct, rename="camel", gc=False):
    name: str = ""
    resource_version: str = ""


class ScoreNode(msgspec.Struct, gc=False):  # strings and Raw only: no cycles to collect
    metadata: ScoreMeta = msgspec.field(default_factory=ScoreMeta)
    # decoded (allocatable) only when the node's resourceVersion is not cached: parsing the
    # quantities of 1,000 nodes was a third of a prioritize call
    status: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class ScoreNodeList(msgspec.Struct):
    items: list[ScoreNode] | None = None


class PrioritizeArgs(msgspec.Struct, rename="pascal"):
    """ExtenderArgs as prioritize reads it: one pass, and only names and allocatable of nodes."""

    pod: Pod | None = None
    nodes: ScoreNodeList | None = None
    node_names: list[str] | None = None


class NodeListOut(msgspec.Struct, rename="camel"):
    items: list[msgspec.Raw]
    api_version: str = "v1"
    kind: str = "NodeList"
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class ExtenderFilterResult(msgspec.Struct, rename="pascal"):
    """``extenderv1.ExtenderFilterResult``."""

    nodes: NodeListOut | None = None
    node_names: list[str] | None = None
    failed_nodes: dict[str, str] = msgspec.field(default_factory=dict)
    failed_and_unresolvable_nodes: dict[str, str] = msgspec.field(default_factory=dict)
    error: str = ""


class HostPriority(msgspec.Struct, rename="pascal", gc=False):  # a str and an int: no cycles
    """``extenderv1.HostPriority``: Score is 0..10."""

    host: str
    score: int


FILTER_DECODER = msgspec.json.Decoder(ExtenderArgs)
PRIORITIZE_DECODER = msgspec.json.Decoder(PrioritizeArgs)
NODE_DECODER = msgspec.json.Decoder(WireNode)
STATUS_DECODER = msgspec.json.Decoder(WireStatus | None)
ENCODER = msgspec.json.Encoder()


class BadRequest(Exception):
    """The request body is not an ExtenderArgs."""


@dataclass(frozen=True)
class Reply:
    body: bytes
    nodes: int
    over_budget: bool
