"""A pod's status by the state it is in: running (and ready), restarted, crash-looping, pulling
an image in vain, stuck in ContainerCreating (the broken CNI), succeeded, failed, evicted by the
kubelet, terminating; conditions, container and init container statuses, as the kubelet writes
them."""

from __future__ import annotations

from benchmarks.generator.common import Obj, Part, sha, ts
from benchmarks.generator.nodes import Node


class PodStatus(Part):
    """Draws the status of a placed pod."""

    def of(
        self,
        containers: list[Obj],
        init_names: list[str],
        node: Node,
        pod_ip: str,
        created: str,
        qos: str,
        state: str,
        age: float,
    ) -> Obj:
        rng = self.rng
        started = created
        ready = state in ("run", "restarted", "terminating")
        if state == "sandbox":
            return {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "False",
                        "type": "PodReadyToStartContainers",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "Initialized",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "message": f"containers with unready status: [{containers[0]['name']}]",
                        "reason": "ContainersNotReady",
                        "status": "False",
                        "type": "Ready",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "PodScheduled",
                    },
                ],
                "containerStatuses": [
                    {
                        "image": c["image"],
                        "imageID": "",
                        "lastState": {},
                        "name": c["name"],
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {"waiting": {"reason": "ContainerCreating"}},
                    }
                    for c in containers
                ],
                "hostIP": node.internal_ip,
                "hostIPs": [{"ip": node.internal_ip}],
                "phase": "Pending",
                "qosClass": qos,
                "startTime": created,
            }
        finished = state in ("succeeded", "failed", "evicted")
        phase = {
            "succeeded": "Succeeded",
            "failed": "Failed",
            "evicted": "Failed",
            "imagepull": "Pending",
        }.get(state, "Running")
        tstatus = "True" if ready else "False"
        conditions = [
            {
                "lastProbeTime": None,
                "lastTransitionTime": created,
                "status": "True" if not finished else "False",
                "type": "PodReadyToStartContainers",
            },
            {"lastProbeTime": None, "lastTransitionTime": created, "status": "True", "type": "Initialized"},
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(max(0, age - 30)),
                "status": tstatus,
                "type": "Ready",
                **({} if ready else {"reason": "PodCompleted" if finished else "ContainersNotReady"}),
            },
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(max(0, age - 30)),
                "status": tstatus,
                "type": "ContainersReady",
                **({} if ready else {"reason": "PodCompleted" if finished else "ContainersNotReady"}),
            },
            {"lastProbeTime": None, "lastTransitionTime": created, "status": "True", "type": "PodScheduled"},
        ]
        statuses = []
        for k, c in enumerate(containers):
            cs: Obj = {
                "containerID": f"containerd://{self.hexid()}",
                "image": c["image"],
                "imageID": f"{c['image'].rsplit(':', 1)[0]}@sha256:{sha(c['image'])}",
                "lastState": {},
                "name": c["name"],
                "ready": ready,
                "restartCount": 0,
                "started": ready,
                "state": {"running": {"startedAt": ts(max(0, age - 20))}},
            }
            if k == 0 and state == "crashloop":
                restarts = rng.randint(100, 4000)
                reason = rng.choice(("Error", "OOMKilled"))
                cs["restartCount"] = restarts
                cs["lastState"] = {
                    "terminated": {
                        "containerID": f"containerd://{self.hexid()}",
                        "exitCode": 137 if reason == "OOMKilled" else 1,
                        "finishedAt": ts(90),
                        "reason": reason,
                        "startedAt": ts(120),
                    }
                }
                cs["state"] = {
                    "waiting": {
                        "message": f"back-off 5m0s restarting failed container={c['name']}",
                        "reason": "CrashLoopBackOff",
                    }
                }
                cs["started"] = False
            elif k == 0 and state == "restarted":
                cs["restartCount"] = rng.randint(1, 30)
                cs["lastState"] = {
                    "terminated": {
                        "containerID": f"containerd://{self.hexid()}",
                        "exitCode": 137,
                        "finishedAt": ts(rng.uniform(100, age + 101)),
                        "reason": "OOMKilled",
                        "startedAt": started,
                    }
                }
            elif state == "imagepull":
                cs["image"] = c["image"]
                cs.pop("containerID")
                cs["imageID"] = ""
                cs["state"] = {
                    "waiting": {
                        "message": f'Back-off pulling image "{c["image"]}"',
                        "reason": "ImagePullBackOff",
                    }
                }
            elif finished:
                failed = state != "succeeded"
                reason = "Completed" if not failed else rng.choice(("Error", "OOMKilled", "Error"))
                if state == "evicted":
                    reason = "ContainerStatusUnknown"
                cs["state"] = {
                    "terminated": {
                        "containerID": f"containerd://{self.hexid()}",
                        "exitCode": 0 if not failed else 137 if reason == "OOMKilled" else 1,
                        "finishedAt": ts(max(0, age - rng.uniform(60, 900))),
                        "reason": reason,
                        "startedAt": ts(max(0, age - 20)),
                    }
                }
            statuses.append(cs)
        status: Obj = {
            "conditions": conditions,
            "containerStatuses": statuses,
            "hostIP": node.internal_ip,
            "hostIPs": [{"ip": node.internal_ip}],
        }
        if init_names:
            status["initContainerStatuses"] = [
                {
                    "containerID": f"containerd://{self.hexid()}",
                    "image": "init",
                    "imageID": "",
                    "lastState": {},
                    "name": n,
                    "ready": True,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "containerID": f"containerd://{self.hexid()}",
                            "exitCode": 0,
                            "finishedAt": ts(max(0, age - 25)),
                            "reason": "Completed",
                            "startedAt": started,
                        }
                    },
                }
                for n in init_names
            ]
        status["phase"] = phase
        if state == "evicted":
            status["message"] = (
                "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi."
            )
            status["reason"] = "Evicted"
        if pod_ip and not finished:
            status["podIP"] = pod_ip
            status["podIPs"] = [{"ip": pod_ip}]
        status["qosClass"] = qos
        status["startTime"] = started
        return status
