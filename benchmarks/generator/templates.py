"""Pods and their scheduling constraints: what all pods of a workload share (the pod template as
its controller stamps it): labels, annotations, the app container (requests and limits, env,
ports, probes, security context), init containers and the Istio sidecar, volumes, the node
selector, node affinity, pod (anti-)affinity, topology spread constraints, tolerations, the
priority, the owner references and managedFields."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.generator.common import DAY, MI, Obj, Part, fields_v1, sha, ts
from benchmarks.generator.constraints import (
    HOSTNAME_KEY,
    ZONE_KEY,
    match_in,
    preferred_node_term,
    required_node_affinity,
    spread,
)
from benchmarks.generator.objects import _PRIORITY_VALUE
from benchmarks.generator.workloads import Workload


class Templates(Part):
    """Draws each workload's pod template."""

    def template(self, w: Workload) -> Template:
        rng = self.rng
        labels = {
            "app.kubernetes.io/instance": w.name if w.kind != "Job" else w.app,
            "app.kubernetes.io/name": w.app,
        }
        if w.kind not in ("Job", "Pod"):
            labels["app.kubernetes.io/component"] = rng.choice(("server", "worker", "api", "controller"))
            labels["app.kubernetes.io/part-of"] = w.team
            labels["app.kubernetes.io/version"] = w.image.rsplit(":", 1)[-1][:63]
            if rng.random() < 0.5:
                labels["app.kubernetes.io/managed-by"] = "Helm"
                labels["helm.sh/chart"] = (
                    f"{w.app[:40]}-{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
                )
        labels["team"] = w.team
        owner_uid = self.uid()
        tpl = Template(labels=labels, revision=self.suffix(10))
        if w.kind == "Job":
            labels["batch.kubernetes.io/controller-uid"] = owner_uid
            labels["batch.kubernetes.io/job-name"] = w.name
            labels["controller-uid"] = owner_uid
            labels["job-name"] = w.name
        annotations: Obj = {}
        if w.ports:
            annotations["prometheus.io/scrape"] = "true"
            annotations["prometheus.io/port"] = "9090"
        if w.kind in ("Deployment", "StatefulSet", "DaemonSet"):
            annotations["checksum/config"] = sha(w.namespace + w.name)
            if rng.random() < 0.3:
                annotations["kubectl.kubernetes.io/restartedAt"] = ts(rng.uniform(1, 60) * DAY)
        if w.sidecar:
            annotations["sidecar.istio.io/status"] = json.dumps(
                {
                    "initContainers": ["istio-init"],
                    "containers": ["istio-proxy"],
                    "volumes": [
                        "workload-socket",
                        "credential-socket",
                        "workload-certs",
                        "istio-envoy",
                        "istio-data",
                        "istio-podinfo",
                        "istio-token",
                        "istiod-ca-cert",
                    ],
                    "imagePullSecrets": None,
                    "revision": "default",
                },
                separators=(",", ":"),
            )
            annotations["kubectl.kubernetes.io/default-container"] = w.app[:63]
        tpl.annotations = annotations or None

        containers = [self.app_container(w)]
        if w.sidecar:
            containers.append(_istio_proxy())
        init_containers: list[Obj] = []
        if w.init:
            init_containers.append(
                {
                    "command": ["/bin/sh", "-c", "until nc -z db 5432; do sleep 2; done; /app/migrate up"],
                    "image": w.image,
                    "imagePullPolicy": "IfNotPresent",
                    "name": "migrate",
                    "resources": {
                        "limits": {"cpu": f"{max(100, w.cpu_m)}m", "memory": f"{w.mem // MI}Mi"},
                        "requests": {
                            "cpu": f"{max(100, w.cpu_m // 2)}m",
                            "memory": f"{max(64, w.mem // MI // 2)}Mi",
                        },
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            )
        if w.sidecar:
            init_containers.append(
                {
                    "args": [
                        "istio-iptables",
                        "-p",
                        "15001",
                        "-z",
                        "15006",
                        "-u",
                        "1337",
                        "-m",
                        "REDIRECT",
                        "-i",
                        "*",
                        "-x",
                        "",
                        "-b",
                        "*",
                        "-d",
                        "15090,15021,15020",
                        "--log_output_level=default:info",
                    ],
                    "image": "docker.io/istio/proxyv2:1.23.3",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "istio-init",
                    "resources": {
                        "limits": {"cpu": "2", "memory": "1Gi"},
                        "requests": {"cpu": "10m", "memory": "40Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
                        "privileged": False,
                        "readOnlyRootFilesystem": False,
                        "runAsGroup": 0,
                        "runAsNonRoot": False,
                        "runAsUser": 0,
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            )
        api_volume = f"kube-api-access-{self.suffix()}"
        for c in containers:
            c.setdefault("volumeMounts", []).append(
                {
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "name": api_volume,
                    "readOnly": True,
                }
            )
        volumes: list[Obj] = []
        if w.kind != "DaemonSet" and w.kind != "Pod":
            volumes.append(
                {"configMap": {"defaultMode": 420, "name": f"{w.name[:40]}-config"}, "name": "config"}
            )
        if w.empty_dir:
            volumes.append({"emptyDir": {"sizeLimit": "1Gi"}, "name": "tmp"})
        if w.kind == "DaemonSet" and w.name in ("calico-node", "fluent-bit", "node-exporter", "ebs-csi-node"):
            volumes.append(
                {
                    "hostPath": {"path": "/var/log" if w.name == "fluent-bit" else "/proc", "type": ""},
                    "name": "host",
                }
            )
        if w.sidecar:
            volumes.append({"emptyDir": {"medium": "Memory"}, "name": "istio-envoy"})
            volumes.append(
                {
                    "name": "istio-token",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {
                                "serviceAccountToken": {
                                    "audience": "istio-ca",
                                    "expirationSeconds": 43200,
                                    "path": "istio-token",
                                }
                            }
                        ],
                    },
                }
            )
        volumes.append(
            {
                "name": api_volume,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                "name": "kube-root-ca.crt",
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        "path": "namespace",
                                    }
                                ]
                            }
                        },
                    ],
                },
            }
        )

        spec: Obj = {}
        affinity = self.affinity(w, labels)
        if affinity:
            spec["affinity"] = affinity
        spec["containers"] = containers
        spec["dnsPolicy"] = "ClusterFirst"
        spec["enableServiceLinks"] = True
        if init_containers:
            spec["initContainers"] = init_containers
        if w.node_selector:
            spec["nodeSelector"] = w.node_selector
        pc = w.priority_class or "default-priority"  # admission fills in the global default
        spec["preemptionPolicy"] = "Never" if pc in ("batch-low", "preview-low") else "PreemptLowerPriority"
        spec["priority"] = _PRIORITY_VALUE[pc]
        spec["priorityClassName"] = pc
        spec["restartPolicy"] = w.restart_policy
        spec["schedulerName"] = "default-scheduler"
        spec["securityContext"] = (
            {"fsGroup": 10001, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
            if w.kind != "DaemonSet"
            else {}
        )
        spec["serviceAccount"] = w.app[:63] if w.kind != "Job" else "default"
        spec["serviceAccountName"] = spec["serviceAccount"]
        spec["terminationGracePeriodSeconds"] = 30 if w.kind != "StatefulSet" else 120
        spec["tolerations"] = w.tolerations
        if w.tsc_zone or w.tsc_host:
            constraints: list[Obj] = []
            selector = {
                "matchLabels": {
                    "app.kubernetes.io/instance": labels["app.kubernetes.io/instance"],
                    "app.kubernetes.io/name": w.app,
                }
            }
            if w.tsc_zone:
                constraints.append(spread(selector, ZONE_KEY, "DoNotSchedule"))
            if w.tsc_host:
                constraints.append(spread(selector, HOSTNAME_KEY, "ScheduleAnyway"))
            spec["topologySpreadConstraints"] = constraints
        spec["volumes"] = volumes
        tpl.spec = spec
        tpl.qos = "Guaranteed" if w.limits == "guaranteed" and not w.sidecar else "Burstable"
        tpl.init_names = [c["name"] for c in init_containers]

        if w.kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            api = "batch/v1" if w.kind == "Job" else "apps/v1"
            tpl.owner_uids = {}
            tpl.owner = [
                {
                    "apiVersion": api,
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": w.kind,
                    "name": w.name,
                    "uid": owner_uid,
                }
            ]
            tpl.rs_base = w.name
            tpl.uid_source = self.uid
        manager = "kubelet" if w.kind == "Pod" else "kube-controller-manager"
        tpl.managed_fields = [
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": fields_v1(
                        {"annotations": annotations, "labels": labels, "ownerReferences": tpl.owner or []}, 2
                    ),
                    "f:spec": fields_v1(spec, 2),
                },
                "manager": manager if w.kind != "Pod" else "kubectl-run",
                "operation": "Update",
                "time": ts(w.pod_age_days[0] * DAY),
            },
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": _STATUS_FIELDS,
                "manager": "kubelet",
                "operation": "Update",
                "subresource": "status",
                "time": ts(rng.uniform(60, 3600)),
            },
        ]
        return tpl

    def app_container(self, w: Workload) -> Obj:
        rng = self.rng
        req: Obj = {"cpu": f"{w.cpu_m}m", "memory": f"{w.mem // MI}Mi"}
        if w.gpu:
            req["nvidia.com/gpu"] = str(w.gpu)
        resources: Obj = {"requests": req}
        if w.limits == "guaranteed":
            resources["limits"] = dict(req)
        elif w.limits == "burstable":
            resources["limits"] = {"memory": f"{w.mem * rng.choice((1, 2)) // MI}Mi"}
            if rng.random() < 0.5:
                resources["limits"]["cpu"] = f"{w.cpu_m * rng.choice((2, 4))}m"
            if w.gpu:
                resources["limits"]["nvidia.com/gpu"] = str(w.gpu)
        env: list[Obj] = [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {
                "name": "NODE_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
            },
        ]
        if w.kind != "DaemonSet":
            env += [
                {"name": "LOG_LEVEL", "value": rng.choice(("info", "warn", "debug"))},
                {
                    "name": "ENVIRONMENT",
                    "value": "production" if w.namespace.endswith("-prod") else "staging",
                },
                {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.monitoring:4317"},
            ]
            for k in range(rng.randint(0, 4)):
                key = rng.choice(
                    (
                        "DATABASE_URL",
                        "REDIS_HOST",
                        "KAFKA_BROKERS",
                        "API_KEY",
                        "FEATURE_FLAGS",
                        "HTTP_TIMEOUT",
                        "MAX_CONNECTIONS",
                        "CACHE_TTL",
                        "REGION",
                        "S3_BUCKET",
                    )
                )
                if k % 3 == 0:
                    env.append(
                        {
                            "name": f"{key}_{k}",
                            "valueFrom": {
                                "secretKeyRef": {"key": key.lower(), "name": f"{w.app[:40]}-secrets"}
                            },
                        }
                    )
                else:
                    env.append(
                        {"name": f"{key}_{k}", "value": f"{w.app}-{key.lower()}-{rng.randint(1, 999)}"}
                    )
        c: Obj = {"env": env, "image": w.image, "imagePullPolicy": "IfNotPresent", "name": w.app[:63]}
        if w.ports:
            c["ports"] = [
                {"containerPort": 8080, "name": "http", "protocol": "TCP"},
                {"containerPort": 9090, "name": "metrics", "protocol": "TCP"},
            ]
        if w.probes:
            c["livenessProbe"] = {
                "failureThreshold": 3,
                "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                "initialDelaySeconds": 15,
                "periodSeconds": 10,
                "successThreshold": 1,
                "timeoutSeconds": 2,
            }
            c["readinessProbe"] = {
                "failureThreshold": 3,
                "httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                "periodSeconds": 5,
                "successThreshold": 1,
                "timeoutSeconds": 1,
            }
            if rng.random() < 0.15:
                c["startupProbe"] = {
                    "failureThreshold": 30,
                    "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                    "periodSeconds": 5,
                    "successThreshold": 1,
                    "timeoutSeconds": 1,
                }
        c["resources"] = resources
        c["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
        }
        c["terminationMessagePath"] = "/dev/termination-log"
        c["terminationMessagePolicy"] = "File"
        mounts: list[Obj] = []
        if w.kind not in ("DaemonSet", "Pod"):
            mounts.append({"mountPath": "/etc/app", "name": "config", "readOnly": True})
        if w.empty_dir:
            mounts.append({"mountPath": "/tmp", "name": "tmp"})
        if w.pvc:
            mounts.append({"mountPath": "/data", "name": "data"})
        c["volumeMounts"] = mounts
        return c

    def affinity(self, w: Workload, labels: dict[str, str]) -> Obj | None:
        out: Obj = {}
        node_aff: Obj = {}
        if w.required_pool or w.required_gpu:
            expr = (
                match_in("node-pool", w.required_pool)
                if w.required_pool
                else match_in("nvidia.com/gpu.present", "true")
            )
            node_aff.update(required_node_affinity(expr, match_in("kubernetes.io/os", "linux")))
        preferred = []
        if w.preferred_zone:
            preferred.append(preferred_node_term(50, match_in(ZONE_KEY, w.preferred_zone)))
        if w.preferred_spot:
            preferred.append(preferred_node_term(100, match_in("lifecycle", "spot")))
        if preferred:
            node_aff["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if node_aff:
            out["nodeAffinity"] = node_aff
        selector = {
            "matchLabels": {
                "app.kubernetes.io/instance": labels["app.kubernetes.io/instance"],
                "app.kubernetes.io/name": w.app,
            }
        }
        if w.anti_affinity == "required":
            out["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        elif w.anti_affinity == "preferred":
            out["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {
                            "labelSelector": selector,
                            "topologyKey": "kubernetes.io/hostname",
                        },
                        "weight": 100,
                    }
                ]
            }
        if w.pod_affinity_to:
            out["podAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": w.pod_affinity_to}},
                            "namespaceSelector": {},
                            "topologyKey": "topology.kubernetes.io/zone",
                        },
                        "weight": 20,
                    }
                ]
            }
        return out or None


@dataclass(eq=False)
class Template:
    """What all pods of one workload share (the pod template, as the controller stamps it)."""

    labels: dict[str, str]
    revision: str
    annotations: Obj | None = None
    spec: Obj = field(default_factory=dict)
    qos: str = "Burstable"
    init_names: list[str] = field(default_factory=list)
    owner: list[Obj] | None = None
    owner_uids: dict[str, str] | None = None
    rs_base: str = ""
    managed_fields: list[Obj] = field(default_factory=list)
    uid_source: Callable[[], str] | None = None

    def owner_for(self, pod_template_hash: str) -> list[Obj]:
        """A Deployment's pods are owned by its ReplicaSet ``<deployment>-<pod-template-hash>``."""
        assert self.owner_uids is not None and self.uid_source is not None
        uid = self.owner_uids.get(pod_template_hash)
        if uid is None:
            uid = self.owner_uids[pod_template_hash] = self.uid_source()
        return [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": f"{self.rs_base}-{pod_template_hash}",
                "uid": uid,
            }
        ]


def _istio_proxy() -> Obj:
    return {
        "args": [
            "proxy",
            "sidecar",
            "--domain",
            "$(POD_NAMESPACE).svc.cluster.local",
            "--proxyLogLevel=warning",
            "--proxyComponentLogLevel=misc:error",
            "--log_output_level=default:info",
        ],
        "env": [
            {"name": n, "value": v}
            for n, v in (
                ("PILOT_CERT_PROVIDER", "istiod"),
                ("CA_ADDR", "istiod.istio-system.svc:15012"),
                ("PROXY_CONFIG", "{}"),
                ("ISTIO_META_CLUSTER_ID", "Kubernetes"),
                ("TRUST_DOMAIN", "cluster.local"),
                ("ISTIO_META_MESH_ID", "cluster.local"),
                ("ISTIO_META_INTERCEPTION_MODE", "REDIRECT"),
            )
        ]
        + [
            {
                "name": "INSTANCE_IP",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
            },
            {
                "name": "SERVICE_ACCOUNT",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.serviceAccountName"}},
            },
        ],
        "image": "docker.io/istio/proxyv2:1.23.3",
        "imagePullPolicy": "IfNotPresent",
        "name": "istio-proxy",
        "ports": [{"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"}],
        "readinessProbe": {
            "failureThreshold": 4,
            "httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"},
            "periodSeconds": 15,
            "successThreshold": 1,
            "timeoutSeconds": 3,
        },
        "resources": {
            "limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "runAsUser": 1337,
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"mountPath": "/etc/istio/proxy", "name": "istio-envoy"},
            {"mountPath": "/var/run/secrets/tokens", "name": "istio-token"},
        ],
    }


_STATUS_FIELDS = fields_v1(
    {
        "status": {
            "conditions": [
                {"type": t, "lastProbeTime": "", "lastTransitionTime": "", "status": ""}
                for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
            ],
            "containerStatuses": {},
            "hostIP": "",
            "hostIPs": {},
            "phase": "",
            "podIP": "",
            "podIPs": {},
            "startTime": "",
        }
    }
)
