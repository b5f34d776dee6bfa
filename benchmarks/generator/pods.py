"""The pods: where each replica lands (its workload's constraints, the pool's slots, the drift),
the state it is in (running, pending, crash-looping, failed, evicted, terminating, stuck in
ContainerCreating on a broken node ...), and each Pod object with its status, as kubectl lists
it; the PVCs, PDBs and Events the pods call for are handed to their parts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from benchmarks.generator.common import DAY, K8S_VERSION, MI, ZONES, Context, DaemonSetRow, Obj, Part, ts
from benchmarks.generator.events import Events
from benchmarks.generator.nodes import Node, NodePlan
from benchmarks.generator.objects import ClusterObjects
from benchmarks.generator.status import PodStatus
from benchmarks.generator.templates import Template, Templates
from benchmarks.generator.workloads import _DS_TOLERATIONS, Workload


class Pods(Part):
    """Places and writes every pod."""

    def __init__(
        self, ctx: Context, plan: NodePlan, templates: Templates, objects: ClusterObjects, events: Events
    ) -> None:
        super().__init__(ctx)
        self.plan = plan
        self.templates = templates
        self.objects = objects
        self.events = events
        self.status = PodStatus(ctx)

    def pods(self, daemonsets: list[DaemonSetRow], workloads: Iterable[Workload]) -> Iterator[Obj]:
        """The control plane's mirror pods, the DaemonSets' pods, then each workload's pods as it is
        drawn (drawing the next workload reads the slots its predecessors' pods took)."""
        for node in self.plan.nodes:
            if node.pool == "system":
                yield from self._mirror_pods(node)
        for ds in daemonsets:
            yield from self._daemonset_pods(*ds)
        for w in workloads:
            yield from self._workload_pods(w)

    def _emit(self, pod: Obj) -> Obj:
        self.stats.add("Pod")
        return pod

    def _mirror_pods(self, node: Node) -> Iterator[Obj]:
        for comp, cpu in (
            ("etcd", 100),
            ("kube-apiserver", 250),
            ("kube-controller-manager", 200),
            ("kube-scheduler", 100),
        ):
            name = f"{comp}-{node.name}"
            image = f"registry.k8s.io/{comp}:{'3.5.15-0' if comp == 'etcd' else K8S_VERSION}"
            created = ts(node.age_days * DAY)
            container = {
                "command": [comp, f"--advertise-address={node.internal_ip}", "--v=2"],
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "name": comp,
                "resources": {"requests": {"cpu": f"{cpu}m"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "livenessProbe": {
                    "failureThreshold": 8,
                    "httpGet": {"host": node.internal_ip, "path": "/livez", "port": 10257, "scheme": "HTTPS"},
                    "initialDelaySeconds": 10,
                    "periodSeconds": 10,
                    "successThreshold": 1,
                    "timeoutSeconds": 15,
                },
                "volumeMounts": [{"mountPath": "/etc/kubernetes/pki", "name": "k8s-certs", "readOnly": True}],
            }
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "annotations": {
                        "kubernetes.io/config.hash": self.hexid(128),
                        "kubernetes.io/config.mirror": self.hexid(128),
                        "kubernetes.io/config.seen": created,
                        "kubernetes.io/config.source": "file",
                    },
                    "creationTimestamp": created,
                    "labels": {"component": comp, "tier": "control-plane"},
                    "name": name,
                    "namespace": "kube-system",
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "controller": True,
                            "kind": "Node",
                            "name": node.name,
                            "uid": self.uid(),
                        }
                    ],
                    "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
                    "uid": self.uid(),
                },
                "spec": {
                    "containers": [container],
                    "dnsPolicy": "ClusterFirst",
                    "enableServiceLinks": True,
                    "hostNetwork": True,
                    "nodeName": node.name,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "priority": 2_000_001_000,
                    "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "tolerations": [{"effect": "NoExecute", "operator": "Exists"}],
                    "volumes": [
                        {
                            "hostPath": {"path": "/etc/kubernetes/pki", "type": "DirectoryOrCreate"},
                            "name": "k8s-certs",
                        }
                    ],
                },
                "status": self.status.of(
                    [container], [], node, node.internal_ip, created, "Burstable", "run", 0
                ),
            }
            node.pods += 1
            yield self._emit(pod)

    def _daemonset_pods(
        self, namespace: str, base: str, image: str, cpu: int, mem_mi: int, pool: str | None
    ) -> Iterator[Obj]:
        w = Workload(
            kind="DaemonSet",
            namespace=namespace,
            name=base,
            pool=pool or "*",
            replicas=0,
            app=base,
            team="platform",
            cpu_m=cpu,
            mem=mem_mi * MI,
            image=image,
            limits="burstable",
            priority_class="system-node-critical" if namespace == "kube-system" else "platform-critical",
            age_days=400,
            pod_age_days=(0.1, 60),
        )
        w.tolerations = list(_DS_TOLERATIONS)
        w.empty_dir = base in ("fluent-bit",)
        tpl = self.templates.template(w)
        revision = self.suffix(10)
        for node in self.plan.nodes:
            if pool is not None and node.pool != pool:
                continue
            node.free_cpu -= cpu
            node.free_mem -= mem_mi * MI
            labels = {**tpl.labels, "controller-revision-hash": revision, "pod-template-generation": "3"}
            name = self.ctx.pod_name(namespace, base)
            spec = dict(tpl.spec)
            spec["nodeName"] = node.name
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node.name]}
                                ]
                            }
                        ]
                    }
                }
            }
            age = min(node.age_days * DAY, self.rng.uniform(*w.pod_age_days) * DAY)
            yield self._emit(self._pod(tpl, w, name, labels, spec, node, age, "run", 0))

    def _workload_pods(self, w: Workload) -> Iterator[Obj]:
        rng = self.rng
        if w.anti_affinity == "required":
            # an operator keeps required anti-affinity schedulable: at most one replica per node
            w.replicas = max(1, min(w.replicas, len(self.plan.pools.get(w.pool, ())) - 1))
            if w.replicas >= 2 and w.kind == "Deployment" and self.ctx.min_left["anti_violation"] > 0:
                self.ctx.min_left["anti_violation"] -= 1
                w.anti_violation = True
        tpl = self.templates.template(w)
        if w.kind == "Deployment":
            hashes = [self.suffix(rng.choice((9, 10)))]
            if w.rollout:
                hashes.append(self.suffix(10))
        used: set[int] = set()
        exclude = None if w.duplicates else used
        zone_offset = rng.randrange(3)
        placed: list[Node] = []
        ready = 0
        for i in range(w.replicas):
            zone: str | None = None
            if w.tsc_zone:
                zone = (
                    ZONES[zone_offset]
                    if w.skew and i < max(2, int(w.replicas * 0.8))
                    else ZONES[(i + zone_offset) % 3]
                )
            elif w.preferred_zone and rng.random() < 0.85:
                zone = w.preferred_zone  # the scheduler mostly honours it
            node: Node | None
            if w.anti_violation and i == 1 and placed:
                node = placed[0]
                self.plan.drop_slot(w.pool)  # keep the pod count in step
            else:
                node = self.plan.take_slot(w.pool, zone, exclude, w.cpu_m, w.mem, w.gpu)
                if node is None and exclude is not None and w.anti_affinity != "required":
                    node = self.plan.take_slot(w.pool, zone, None, w.cpu_m, w.mem, w.gpu)
                if node is None:
                    self.plan.drop_slot(w.pool)
            state = self._pod_state(w, node, i)
            if node is not None:
                used.add(node.index)
                placed.append(node)
                if state not in ("succeeded", "failed", "evicted"):
                    node.free_cpu -= w.cpu_m + (100 if w.sidecar else 0)
                    node.free_mem -= w.mem + (128 * MI if w.sidecar else 0)
                    node.free_gpu -= w.gpu
            if state == "run":
                ready += 1
            labels = dict(tpl.labels)
            spec = dict(tpl.spec)
            owner: list[Obj] | None
            if w.kind == "Deployment":
                h = hashes[1] if len(hashes) > 1 and i % 2 == 1 else hashes[0]
                labels["pod-template-hash"] = h
                name = self.ctx.pod_name(w.namespace, f"{w.name}-{h}")
                owner = tpl.owner_for(h)
            elif w.kind == "StatefulSet":
                name = f"{w.name}-{i}"
                labels["apps.kubernetes.io/pod-index"] = str(i)
                labels["controller-revision-hash"] = f"{w.name}-{tpl.revision}"
                labels["statefulset.kubernetes.io/pod-name"] = name
                spec["hostname"] = name
                spec["subdomain"] = f"{w.name}-headless"
                claim = f"data-{name}"
                spec["volumes"] = [
                    {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
                    *tpl.spec["volumes"],
                ]
                self.objects.pvcs.append(self.objects.pvc(w, claim, node))
                owner = tpl.owner
            elif w.kind == "Job":
                name = self.ctx.pod_name(w.namespace, w.name)
                owner = tpl.owner
            else:
                name = w.name
                owner = None
            if node is not None:
                spec["nodeName"] = node.name
            age = rng.uniform(*w.pod_age_days) * DAY
            if node is not None:
                age = min(age, node.age_days * DAY)
            if state == "sandbox":
                age = rng.uniform(600, 1800)  # scaled out onto the broken node minutes ago
            pod = self._pod(tpl, w, name, labels, spec, node, age, state, i, owner=owner)
            yield self._emit(pod)
        if w.pdb:
            self.objects.pdbs.append(self.objects.pdb(w, tpl.labels["app.kubernetes.io/instance"], ready))

    def _pod_state(self, w: Workload, node: Node | None, index: int) -> str:
        if node is None:
            return "pending"
        r = self.rng.random()
        if w.job_states:
            return "succeeded" if r < 0.55 else "failed" if r < 0.72 else "run"
        if w.kind == "Pod":
            return "run"
        if node.broken_cni and w.kind == "Deployment" and r < 0.6:
            return "sandbox"
        if (
            index == 1
            and w.kind == "Deployment"
            and w.namespace.endswith("-prod")
            and self.ctx.min_left["crashloop"]
        ):
            self.ctx.min_left["crashloop"] -= 1
            return "crashloop"
        if r < 0.006:
            return "crashloop"
        if r < 0.022:
            return "restarted"
        if r < 0.025:
            return "imagepull"
        if r < 0.028:
            return "terminating"
        if r < 0.031 and w.kind == "Deployment":
            return "evicted"
        return "run"

    def _pod(
        self,
        tpl: Template,
        w: Workload,
        name: str,
        labels: dict[str, str],
        spec: Obj,
        node: Node | None,
        age: float,
        state: str,
        index: int,
        owner: list[Obj] | None = None,
    ) -> Obj:
        rng = self.rng
        created = ts(age)
        metadata: Obj = {}
        if tpl.annotations:
            metadata["annotations"] = tpl.annotations
        metadata["creationTimestamp"] = created
        if state == "terminating":
            metadata["deletionGracePeriodSeconds"] = 30
            metadata["deletionTimestamp"] = ts(rng.uniform(1, 25))
        if w.kind in ("Deployment", "DaemonSet", "Job"):
            metadata["generateName"] = name[: name.rfind("-") + 1]
        metadata["labels"] = labels
        metadata["managedFields"] = tpl.managed_fields
        metadata["name"] = name
        metadata["namespace"] = w.namespace
        if w.kind == "DaemonSet":
            owner = tpl.owner
        if owner:
            metadata["ownerReferences"] = owner
        metadata["resourceVersion"] = str(rng.randrange(10**8, 10**9))
        metadata["uid"] = self.uid()
        pod_ip = node.next_pod_ip() if node is not None else ""
        pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        if node is None:
            pod["status"] = {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "message": f"0/{self.spec.nodes} nodes are available: "
                        f"{self.spec.nodes // 3} Insufficient cpu, "
                        f"{self.spec.nodes - self.spec.nodes // 3} node(s) didn't match "
                        "pod anti-affinity rules. preemption: 0/"
                        f"{self.spec.nodes} nodes are available.",
                        "reason": "Unschedulable",
                        "status": "False",
                        "type": "PodScheduled",
                    }
                ],
                "phase": "Pending",
                "qosClass": tpl.qos,
            }
            self.events.add(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "FailedScheduling",
                pod["status"]["conditions"][0]["message"],
                "default-scheduler",
                "",
                1,
                age,
            )
            return pod
        pod["status"] = self.status.of(
            spec["containers"], tpl.init_names, node, pod_ip, created, tpl.qos, state, age
        )
        if state == "crashloop":
            restarts = pod["status"]["containerStatuses"][0]["restartCount"]
            self.events.add(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "BackOff",
                "Back-off restarting failed container",
                "kubelet",
                node.name,
                restarts // 3 + 1,
                age,
            )
        elif state == "imagepull":
            self.events.add(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "Failed",
                f'Failed to pull image "{w.image}": rpc error: code = NotFound desc = failed to pull and '
                f'unpack image "{w.image}": not found',
                "kubelet",
                node.name,
                rng.randint(3, 20),
                age,
            )
            self.events.add(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "Failed",
                "Error: ImagePullBackOff",
                "kubelet",
                node.name,
                rng.randint(3, 60),
                age,
            )
        elif state == "sandbox":
            self.events.add(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for "
                f'sandbox "{self.hexid()}": plugin type="calico" failed (add): '
                "error getting ClusterInformation: "
                "connection is unauthorized: Unauthorized",
                "kubelet",
                node.name,
                rng.randint(5, 40),
                age,
                recent=True,
            )
        elif rng.random() < 0.02:
            self.events.add(
                w.namespace,
                name,
                metadata["uid"],
                "Normal",
                "Pulled",
                f'Container image "{w.image}" already present on machine',
                "kubelet",
                node.name,
                1,
                min(age, 3000),
            )
        return pod
