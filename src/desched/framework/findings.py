"""Decision findings: what each plugin of each profile decided about a pod, and why (the typed
reports a plugin attaches to the cycle result are :mod:`desched.framework.reports`).

One channel per cycle, reached through a plugin's handle (``handle.findings``). Plugins report
the candidates they considered and left (``left(pod, reason)``), the framework reports what the
profile's filters refused (with DefaultEvictor's reasons) and what became of each eviction
request. Everything that explains a decision reads this channel: the logs at ``--v=4``,
``simulate --explain`` and ``simulate -o json --explain-all``.

Reasons cost time to build (numbers formatted into text), and a cycle looks at every pod of the
cluster, so nothing is built unless someone listens: plugins test ``findings.enabled`` (a plain
attribute) before composing a reason, and the framework does the same.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from desched.k8s.objects import Pod

#: The logger the findings are written to at verbosity 4 (``--vmodule=findings=4`` selects them).
log = logging.getLogger("desched.findings")


class Verdict(enum.StrEnum):
    #: The plugin considered the pod (or its node) and did not ask to evict it.
    LEFT = "left"
    #: The profile's Filter or PreEvictionFilter plugins refused the pod.
    FILTERED = "filtered"
    #: Evicted (or, in a dry run or simulation, would be).
    EVICTED = "evicted"
    #: Asked for, but not done: a limit, an API refusal, or already evicted by another plugin.
    NOT_EVICTED = "not evicted"


@dataclass(frozen=True, slots=True)
class Finding:
    profile: str
    plugin: str
    #: The pod's namespace and name; both empty for a finding about a whole node.
    namespace: str
    name: str
    node: str
    verdict: Verdict
    reason: str

    @property
    def pod(self) -> str:
        return f"{self.namespace}/{self.name}" if self.name else ""


FindingSink = Callable[[Finding], None]


class Findings:
    """The cycle's channel: sinks receive every finding; none attached means reporting is off."""

    def __init__(self) -> None:
        self.sinks: list[FindingSink] = []
        self.enabled = False

    def attach(self, sink: FindingSink) -> None:
        self.sinks.append(sink)
        self.enabled = True

    def detach(self, sink: FindingSink) -> None:
        self.sinks.remove(sink)
        self.enabled = bool(self.sinks)

    def report(self, finding: Finding) -> None:
        for sink in self.sinks:
            sink(finding)


class PluginFindings:
    """One plugin's view of the channel: reports carry its profile and plugin names."""

    __slots__ = ("_channel", "plugin", "profile")

    def __init__(self, channel: Findings, profile: str, plugin: str) -> None:
        self._channel = channel
        self.profile = profile
        self.plugin = plugin

    @property
    def enabled(self) -> bool:
        return self._channel.enabled

    def left(self, pod: Pod, reason: str) -> None:
        """The plugin considered ``pod`` and left it, because ``reason`` (with the numbers)."""
        self.report(pod, Verdict.LEFT, reason)

    def node_left(self, node: str, reason: str) -> None:
        """The plugin left every pod of ``node``, because ``reason`` (e.g. the node is not over target)."""
        self._channel.report(Finding(self.profile, self.plugin, "", "", node, Verdict.LEFT, reason))

    def report(self, pod: Pod, verdict: Verdict, reason: str) -> None:
        meta = pod.metadata
        self._channel.report(
            Finding(self.profile, self.plugin, meta.namespace, meta.name, pod.spec.node_name, verdict, reason)
        )


def log_sink(finding: Finding) -> None:
    """Writes a finding as a V(4) log line with structured fields."""
    from desched.logs import V4

    extra: dict[str, object] = {"pod": finding.pod} if finding.name else {}
    extra.update(
        node=finding.node,
        profile=finding.profile,
        plugin=finding.plugin,
        verdict=finding.verdict.value,
        reason=finding.reason,
    )
    log.log(V4, _POD_MESSAGES[finding.verdict] if finding.name else "node's pods left", extra=extra)


_POD_MESSAGES = {
    Verdict.LEFT: "pod left",
    Verdict.FILTERED: "pod filtered",
    Verdict.EVICTED: "pod evicted",
    Verdict.NOT_EVICTED: "pod not evicted",
}
