"""Events and anomalies: the Events kubelet and kube-scheduler would have recorded about the
generated pods (FailedScheduling, BackOff of crash loops, image pull failures,
FailedCreatePodSandBox on the node whose CNI broke, some Pulled), which RemoveAnomalyPods and
the reports read."""

from __future__ import annotations

from benchmarks.generator.common import HOUR, Context, Obj, Part, ts


class Events(Part):
    """The Events of the cluster, in the order the pods they are about were made."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.items: list[Obj] = []

    def add(
        self,
        namespace: str,
        pod: str,
        uid: str,
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str,
        count: int,
        age: float,
        *,
        recent: bool = False,
    ) -> None:
        first = ts(min(age, 3 * HOUR))
        last = ts(self.rng.uniform(5, 200 if recent else 600))
        self.items.append(
            {
                "apiVersion": "v1",
                "count": count,
                "eventTime": None,
                "firstTimestamp": first,
                "involvedObject": {
                    "apiVersion": "v1",
                    "fieldPath": "spec.containers{app}" if host else "",
                    "kind": "Pod",
                    "name": pod,
                    "namespace": namespace,
                    "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
                    "uid": uid,
                },
                "kind": "Event",
                "lastTimestamp": last,
                "message": message,
                "metadata": {
                    "creationTimestamp": first,
                    "name": f"{pod}.{self.hexid(64)[:16]}",
                    "namespace": namespace,
                    "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
                    "uid": self.uid(),
                },
                "reason": reason,
                "reportingComponent": component,
                "reportingInstance": host,
                "source": {"component": component, **({"host": host} if host else {})},
                "type": type_,
            }
        )
        self.stats.add("Event")
