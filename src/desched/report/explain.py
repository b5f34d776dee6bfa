"""``simulate --explain NS/NAME`` and ``--explain-all``: what each profile and plugin decided, and why.

An :class:`Explainer` listens on the framework's decision-findings channel (the one the logs read
at ``--v=4``) and files what it hears under the plugin run it happened in. It then renders, for a
pod, every plugin run of every profile with its verdict and reason, and, for ``-o json``, the
candidates each plugin considered under that plugin's entry of ``summary.plugins``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TextIO

from desched.framework.findings import Finding, Verdict
from desched.framework.framework import PluginRun

NOT_A_CANDIDATE = "nothing reported: not among the candidates this plugin reports on"


class Explainer:
    def __init__(self, pods: Collection[str], *, everything: bool = False) -> None:
        #: the pods asked about, as namespace/name
        self.pods = set(pods)
        self.everything = everything
        self.cycle = 1
        self._current: list[Finding] = []
        #: (cycle, plugin run, its findings), in the order the runs happened
        self.runs: list[tuple[int, PluginRun, list[Finding]]] = []
        #: the node each asked pod was on when the simulation started
        self.nodes: dict[str, str] = {}

    def sink(self, finding: Finding) -> None:
        if self.everything or not finding.name or finding.pod in self.pods:
            self._current.append(finding)

    def on_plugin_run(self, run: PluginRun) -> None:
        self.runs.append((self.cycle, run, self._current))
        self._current = []

    # ---------------------------------------------------------------- output

    def decisions(self, pod: str) -> list[dict[str, Any]]:
        """Every plugin run, with what it decided about ``pod`` (one entry per finding, or one
        saying the pod was not a candidate)."""
        node = self.nodes.get(pod, "")
        out: list[dict[str, Any]] = []
        gone = False
        for cycle, run, findings in self.runs:
            if gone:
                break
            mine = [f for f in findings if f.pod == pod or (not f.name and f.node in ("", node))]
            base = {"cycle": cycle, "profile": run.profile, "plugin": run.plugin}
            if not mine:
                if cycle == 1:
                    out.append({**base, "verdict": "none", "reason": NOT_A_CANDIDATE})
                continue
            for f in mine:
                out.append({**base, "verdict": f.verdict.value, "reason": f.reason})
                if f.name and f.verdict is Verdict.EVICTED:
                    gone = True
        return out

    def amend(self, doc: dict[str, Any]) -> None:
        """Adds ``explain`` (the asked pods) and, with ``--explain-all``, ``considered`` under each
        plugin of ``summary.plugins``."""
        if self.pods:
            doc["explain"] = {pod: self.decisions(pod) for pod in sorted(self.pods)}
        if self.everything:
            plugins = doc["summary"]["plugins"]
            for entry, (_, _, findings) in zip(plugins, self.runs, strict=True):
                entry["considered"] = [
                    {
                        "namespace": f.namespace,
                        "name": f.name,
                        "node": f.node,
                        "verdict": f.verdict.value,
                        "reason": f.reason,
                    }
                    for f in findings
                ]

    def write_text(self, out: TextIO) -> None:
        if self.everything:
            out.write("\nConsidered (every candidate of every plugin, with its verdict):\n")
            for cycle, run, findings in self.runs:
                for f in findings:
                    who = f.pod or f"node {f.node or '(all)'}"
                    plugin = f"{run.profile}/{run.plugin}"
                    out.write(f"  cycle {cycle}  {plugin}  {f.verdict.value:<11}  {who}: {f.reason}\n")
        for pod in sorted(self.pods):
            node = self.nodes.get(pod, "")
            out.write(f"\nExplain {pod} (on node {node}):\n")
            rows = self.decisions(pod)
            width = max((len(f"{r['profile']}/{r['plugin']}") for r in rows), default=10)
            for r in rows:
                who = f"{r['profile']}/{r['plugin']}"
                out.write(f"  cycle {r['cycle']}  {who:<{width}}  {r['verdict']:<11}  {r['reason']}\n")
            if not rows:
                out.write("  no plugin ran (the cycle was skipped)\n")
