"""A real, throw-away Kubernetes control plane for desched's end-to-end tests.

``ControlPlane`` runs, on loopback and free ports, from binaries built by
``hack/e2e/build-control-plane.sh`` (cached, so only the first run on a machine compiles):

- etcd (data dir in a temp dir, ``--unsafe-no-fsync``),
- kube-apiserver (TLS with a CA generated here, static-token authn, ``Node,RBAC`` authz,
  ServiceAccount token signing),
- on request: kube-scheduler, kube-controller-manager and kwok (fake nodes whose pods go Running).

Stdlib only (plus PyYAML for scheduler configs). Every process runs in its own process group and
is killed on :meth:`ControlPlane.stop`; logs are files in the work dir (``*.log``).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "e2e" / "build-control-plane.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")

#: Annotation that makes kwok manage a node (see :meth:`ControlPlane.fake_node`).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


class ControlPlaneError(RuntimeError):
    """A component failed to build, start or become ready."""


@dataclass(frozen=True)
class TokenUser:
    """One line of the apiserver's static token file."""

    token: str
    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@dataclass
class _Proc:
    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    log_file: Any = None
    restarts: int = field(default=0)
    #: the kube-apiserver start (its ``restarts``) this process was started after
    apiserver_epoch: int = field(default=0)

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child if the Python process dies without stopping it (SIGKILLed
    test runner, CI time-out); Linux only, best effort."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


try:
    import ctypes

    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
except Exception:  # pragma: no cover - non-glibc platforms
    _LIBC = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        data = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"<no log: {e}>"
    return "\n".join(data[-lines:])


def ensure_binaries(env: Mapping[str, str] | None = None) -> Path:
    """Return the directory holding the control-plane binaries, building them if needed.

    ``DESCHED_E2E_BIN_DIR`` points at prebuilt binaries and skips the build script.
    """
    env = dict(os.environ if env is None else env)
    override = env.get("DESCHED_E2E_BIN_DIR")
    if override:
        bin_dir = Path(override)
        missing = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
        if missing:
            raise ControlPlaneError(f"DESCHED_E2E_BIN_DIR={bin_dir} lacks {', '.join(missing)}")
        return bin_dir
    if not BUILD_SCRIPT.exists():
        raise ControlPlaneError(f"build script not found: {BUILD_SCRIPT}")
    # Progress goes to our stderr (pytest shows it when setup fails, or with -s); stdout's last
    # line is the bin dir.
    # Own process group, killed whole if we are interrupted (pytest-timeout, Ctrl-C), so no
    # orphaned `go build` keeps the cache lock.
    popen = subprocess.Popen(
        ["bash", str(BUILD_SCRIPT)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    try:
        stdout, stderr = popen.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        raise
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, stdout, stderr)
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(err.splitlines()[-60:])
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed (exit {proc.returncode}):\n{tail}")
    out = proc.stdout.decode().strip().splitlines()
    if not out:
        raise ControlPlaneError(f"{BUILD_SCRIPT} printed no bin dir; stderr:\n{err[-4000:]}")
    return Path(out[-1])


class ControlPlane:
    """etcd + kube-apiserver (+ optional scheduler, controller-manager, kwok) on loopback.

    Usage::

        cp = ControlPlane().start()
        try:
            cp.kubeconfig            # admin kubeconfig file (token of a system:masters user)
            cp.request("GET", "/api/v1/namespaces")
            cp.start_kwok(); cp.start_scheduler(); cp.start_controller_manager()
        finally:
            cp.stop()

    ``extra_tokens`` adds static-token users (the token file is read once at apiserver start):
    a mapping ``token -> (user, [groups])``. Two are always present: :attr:`admin_token`
    (group ``system:masters``) and :attr:`unprivileged_token` (user ``e2e-unprivileged``, no RBAC
    bindings). For per-test identities without a restart, create a ServiceAccount plus RBAC and use
    :meth:`service_account_token`.
    """

    #: False here; True on the stand-in for an existing cluster (tests/e2e/conftest.py).
    external = False

    def __init__(
        self,
        *,
        workdir: str | os.PathLike[str] | None = None,
        bin_dir: str | os.PathLike[str] | None = None,
        extra_tokens: Mapping[str, tuple[str, Sequence[str]]] | None = None,
        apiserver_args: Sequence[str] = (),
        keep_workdir: bool | None = None,
        verbosity: int = 1,
        start_timeout: float = 90.0,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="desched-e2e-")).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = Path(bin_dir) if bin_dir else None
        if keep_workdir is None:
            keep_workdir = os.environ.get("DESCHED_E2E_KEEP_WORKDIR", "") not in ("", "0")
        self.keep_workdir = keep_workdir
        self.verbosity = verbosity
        self.start_timeout = start_timeout
        self.extra_apiserver_args = list(apiserver_args)

        self.admin_token = secrets.token_hex(16)
        self.unprivileged_token = secrets.token_hex(16)
        self.scheduler_token = secrets.token_hex(16)
        self.controller_manager_token = secrets.token_hex(16)
        self.tokens: list[TokenUser] = [
            TokenUser(self.admin_token, "e2e-admin", ("system:masters",)),
            TokenUser(self.unprivileged_token, "e2e-unprivileged"),
            TokenUser(self.scheduler_token, "system:kube-scheduler"),
            TokenUser(self.controller_manager_token, "system:kube-controller-manager"),
        ]
        for tok, (user, groups) in (extra_tokens or {}).items():
            self.tokens.append(TokenUser(tok, user, tuple(groups)))

        self.etcd_port = 0
        self.apiserver_port = 0
        self.server = ""
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.ca_file = self.workdir / "pki" / "ca.crt"
        self._procs: dict[str, _Proc] = {}
        self._ssl: ssl.SSLContext | None = None
        self._started = False
        self._stopped = False
        self._env = self._child_env()

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Build/find binaries, generate credentials, start etcd and kube-apiserver."""
        if self._started:
            return self
        self._started = True
        atexit.register(self.stop)
        try:
            if self.bin_dir is None:
                self.bin_dir = ensure_binaries()
            self._write_pki()
            self._write_token_file()
            self._start_etcd()
            self._start_apiserver()
            self._write_kubeconfig(self.kubeconfig, self.admin_token, "e2e-admin")
        except BaseException:
            self.stop(keep_logs=bool(self._procs))  # keep the logs of whatever was started
            raise
        return self

    def stop(self, keep_logs: bool = False) -> None:
        """Kill every process (whole process groups) and remove the work dir."""
        if self._stopped:
            return
        self._stopped = True
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self._procs.get(name)
            if proc is not None:
                self._kill(proc, grace=3.0)
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if self._own_workdir and not (keep_logs or self.keep_workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart_apiserver(self, graceful: bool = True) -> None:
        """Stop kube-apiserver and start it again on the same port with the same etcd.

        ``graceful=False`` kills it with SIGKILL (a crash) instead of SIGTERM.
        """
        proc = self._procs["kube-apiserver"]
        self._kill(proc, grace=3.0 if graceful else 0.0)
        proc.restarts += 1
        self._spawn(proc)
        self._wait_apiserver_ready(proc)

    def stop_apiserver(self, graceful: bool = True) -> None:
        """Stop kube-apiserver only (e.g. to test a client's behaviour while it is down)."""
        self._kill(self._procs["kube-apiserver"], grace=3.0 if graceful else 0.0)

    def start_apiserver(self) -> None:
        """Start kube-apiserver again after :meth:`stop_apiserver` (same port, same etcd)."""
        proc = self._procs["kube-apiserver"]
        if proc.running():
            return
        proc.restarts += 1
        self._spawn(proc)
        self._wait_apiserver_ready(proc)

    def stop_component(self, name: str) -> bool:
        """Stop an optional component (``kube-scheduler``, ``kube-controller-manager``, ``kwok``) if
        it runs; return whether it did. Its ``start_*`` method starts it again."""
        if name in ("etcd", "kube-apiserver"):
            raise ValueError(f"{name} is not optional: use stop_apiserver/stop")
        proc = self._procs.get(name)
        if proc is None or not proc.running():
            return False
        self._kill(proc, grace=3.0)
        return True

    def logs(self, name: str, lines: int = 60) -> str:
        """Tail of a component's log (``etcd``, ``kube-apiserver``, ``kwok``, ...)."""
        proc = self._procs.get(name)
        return log_tail(proc.log_path, lines) if proc else f"<{name} never started>"

    def running(self, name: str) -> bool:
        proc = self._procs.get(name)
        return proc is not None and proc.running()

    def _running_fresh(self, name: str) -> bool:
        """Whether the optional component ``name`` runs and was started after kube-apiserver's
        latest start. One that lived through an apiserver restart is stopped (False), so its
        ``start_*`` starts a fresh one: the session shares one control plane, and a kube-scheduler
        that lived through another module's outages was once seen binding a pod to a node whose
        new taint its cache never got (its watches had failed with 403s while the restarted
        apiserver's authorizer was not ready); a test starting it expects a working one."""
        proc = self._procs.get(name)
        if proc is None or not proc.running():
            return False
        if proc.apiserver_epoch == self._procs["kube-apiserver"].restarts:
            return True
        self._kill(proc, grace=3.0)
        return False

    # ------------------------------------------------------------------ optional components

    def start_scheduler(
        self, config_path: str | os.PathLike[str] | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        """Start kube-scheduler (leader election off). No-op if it already runs, started after
        kube-apiserver's latest start (one that lived through an apiserver restart is started
        afresh).

        ``config_path`` is a KubeSchedulerConfiguration file; its ``clientConnection.kubeconfig``
        and ``leaderElection`` are filled in (in a copy) when absent.
        """
        if self._running_fresh("kube-scheduler"):
            return
        kubeconfig = self.kubeconfig_for_token(self.scheduler_token, name="kube-scheduler")
        port = free_port()
        args = [
            str(self._bin("kube-scheduler")),
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={self.workdir / 'kube-scheduler-certs'}",
            f"--v={self.verbosity}",
        ]
        if config_path is None:
            args += [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
        else:
            import yaml  # PyYAML: allowed for tests

            cfg = yaml.safe_load(Path(config_path).read_text()) or {}
            cfg.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
            cfg.setdefault("kind", "KubeSchedulerConfiguration")
            conn = cfg.setdefault("clientConnection", {})
            conn.setdefault("kubeconfig", str(kubeconfig))
            cfg.setdefault("leaderElection", {}).setdefault("leaderElect", False)
            merged = self.workdir / "kube-scheduler-config.yaml"
            merged.write_text(yaml.safe_dump(cfg))
            args.append(f"--config={merged}")
        args += list(extra_args)
        proc = self._add_proc("kube-scheduler", args)
        self._spawn(proc)
        self._wait_https_healthz(proc, port)

    def start_controller_manager(self, controllers: str = "*", extra_args: Sequence[str] = ()) -> None:
        """Start kube-controller-manager: ServiceAccounts, PDB status (disruption controller),
        ReplicaSets/Deployments, garbage collection, node lifecycle... No-op if running (and fresh:
        as :meth:`start_scheduler`).

        Controllers use their own ServiceAccount credentials (TokenRequest), as in kubeadm.
        """
        if self._running_fresh("kube-controller-manager"):
            return
        kubeconfig = self.kubeconfig_for_token(self.controller_manager_token, name="kube-controller-manager")
        port = free_port()
        args = [
            str(self._bin("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--controllers={controllers}",
            f"--service-account-private-key-file={self.workdir / 'pki' / 'sa.key'}",
            f"--root-ca-file={self.ca_file}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={self.workdir / 'kube-controller-manager-certs'}",
            f"--v={self.verbosity}",
            *extra_args,
        ]
        proc = self._add_proc("kube-controller-manager", args)
        self._spawn(proc)
        self._wait_https_healthz(proc, port)

        # /healthz answers before the controllers run; the `default` ServiceAccount appearing
        # shows they do (and kcm exits if the apiserver vanishes while it starts them).
        def default_sa() -> tuple[bool, str]:
            status, _ = self.raw_request(
                "GET", "/api/v1/namespaces/default/serviceaccounts/default", timeout=5
            )
            return status == 200, f"default/default ServiceAccount: HTTP {status}"

        self._wait(proc, default_sa, "running its controllers")

    def start_kwok(
        self,
        extra_configs: Sequence[str | os.PathLike[str]] = (),
        extra_args: Sequence[str] = (),
        stages: str | os.PathLike[str] | None = None,
    ) -> None:
        """Start kwok managing nodes annotated ``kwok.x-k8s.io/node=fake`` (see :meth:`fake_node`).

        kwok keeps such nodes Ready (status + leases) and moves pods bound to them to Running; it
        finalizes deleted pods. Its Stage objects are kwokctl's defaults (``kwok-stages.yaml`` next
        to the binaries) or ``stages``; ``extra_configs`` adds kwok config files (more Stages, ...).
        No-op if it already runs and is fresh (as :meth:`start_scheduler`).
        """
        if self._running_fresh("kwok"):
            return
        key, value = KWOK_NODE_ANNOTATION
        stages = Path(stages) if stages is not None else self._bin("kwok-stages.yaml")
        if not stages.exists():
            raise ControlPlaneError(f"{stages} missing: re-run {BUILD_SCRIPT}")
        port = free_port()
        args = [
            str(self._bin("kwok")),
            f"--kubeconfig={self.kubeconfig}",
            # An explicit --config also keeps a developer's ~/.kwok/kwok.yaml out.
            f"--config={stages}",
            *(f"--config={c}" for c in extra_configs),
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            "--cidr=10.0.0.1/24",
            "--node-ip=10.0.0.1",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{port}",
            *extra_args,
        ]
        proc = self._add_proc("kwok", args)
        self._spawn(proc)
        self._wait_http(proc, f"http://127.0.0.1:{port}/healthz", verify=False)

    # ------------------------------------------------------------------ credentials

    def kubeconfig_for_token(self, token: str, name: str | None = None) -> Path:
        """Write a kubeconfig (``<workdir>/<name>.kubeconfig``) that authenticates with ``token``
        and trusts the cluster CA; return its path."""
        name = name or f"token-{token[:8]}"
        path = self.workdir / f"{name}.kubeconfig"
        self._write_kubeconfig(path, token, name)
        return path

    def service_account_token(self, namespace: str, name: str, expiration_seconds: int = 3600) -> str:
        """A bound token for an existing ServiceAccount (TokenRequest API, via the admin token)."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds},
        }
        resp = self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
        return str(resp["status"]["token"])

    # ------------------------------------------------------------------ tiny REST client

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Any:
        """JSON request to the apiserver (admin token unless ``token``). Raises :class:`ApiError`."""
        status, data = self.raw_request(
            method, path, body, token=token, content_type=content_type, timeout=timeout
        )
        if status >= 400:
            raise ApiError(status, method, path, data)
        return json.loads(data) if data else None

    def raw_request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, bytes]:
        """Like :meth:`request` but returns ``(status, body bytes)`` and never raises on HTTP errors."""
        payload = None
        if body is not None:
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=payload, method=method)
        req.add_header("Authorization", f"Bearer {token or self.admin_token}")
        req.add_header("Accept", "application/json")
        if payload is not None:
            req.add_header("Content-Type", content_type)
        try:
            with self._opener().open(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def watch(self, path: str, timeout: float = 300.0) -> Iterator[tuple[float, dict[str, Any]]]:
        """Watch ``path`` (a collection) from now on: the watch is open when this returns; iterating
        gives ``(time.monotonic() when read, event)`` per watch event until the server ends the
        watch after ``timeout``."""
        rv = self.request("GET", f"{path}?limit=1")["metadata"]["resourceVersion"]
        query = urllib.parse.urlencode(
            {"watch": "true", "resourceVersion": rv, "timeoutSeconds": str(int(timeout))}
        )
        req = urllib.request.Request(f"{self.server}{path}?{query}")
        req.add_header("Authorization", f"Bearer {self.admin_token}")
        resp = self._opener().open(req, timeout=timeout + 10)

        def events() -> Iterator[tuple[float, dict[str, Any]]]:
            with resp:
                for line in resp:
                    yield time.monotonic(), json.loads(line)

        return events()

    def fake_node(
        self,
        name: str,
        *,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: str = "110",
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Mapping[str, Any]] = (),
        unschedulable: bool = False,
    ) -> dict[str, Any]:
        """Manifest of a kwok-managed fake node (create it with ``request("POST", "/api/v1/nodes", ...)``)."""
        key, value = KWOK_NODE_ANNOTATION
        all_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **(labels or {}),
        }
        capacity = {"cpu": cpu, "memory": memory, "pods": pods}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "annotations": {key: value}, "labels": all_labels},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": capacity, "capacity": capacity},
        }

    def create_fake_node(
        self, name: str, *, wait_ready: bool = True, timeout: float = 60.0, **kw: Any
    ) -> Any:
        """Create a kwok-managed node (see :meth:`fake_node` for ``kw``) and, by default, wait
        until it is Ready and schedulable; return the node object. Needs :meth:`start_kwok`.

        The apiserver's TaintNodesByCondition admission plugin gives every new node the
        ``node.kubernetes.io/not-ready:NoSchedule`` taint, which kube-controller-manager's node
        lifecycle controller lifts once the node is Ready. Without kube-controller-manager running,
        this method lifts it itself (and only that taint).
        """
        self.request("POST", "/api/v1/nodes", self.fake_node(name, **kw))
        if not wait_ready:
            return self.request("GET", f"/api/v1/nodes/{name}")
        deadline = time.monotonic() + timeout
        while True:
            node = self.request("GET", f"/api/v1/nodes/{name}")
            conds = node.get("status", {}).get("conditions") or []
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
            taints = node.get("spec", {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != "node.kubernetes.io/not-ready"]
            if ready and len(kept) == len(taints):
                return node
            if ready and not self.running("kube-controller-manager"):
                node["spec"]["taints"] = kept
                status, _ = self.raw_request("PUT", f"/api/v1/nodes/{name}", node)
                if status not in (200, 409):  # 409: kwok updated it meanwhile; retry
                    raise ControlPlaneError(f"could not lift the not-ready taint of {name}: HTTP {status}")
                continue
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"node {name} not Ready and untainted after {timeout:.0f}s "
                    f"(is kwok running?): conditions={conds} taints={taints}\n{self.logs('kwok')}"
                )
            time.sleep(0.25)

    # ------------------------------------------------------------------ internals

    def _child_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
        env.pop("KUBECONFIG", None)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def _bin(self, name: str) -> Path:
        assert self.bin_dir is not None, "call start() first"
        return self.bin_dir / name

    def _opener(self) -> urllib.request.OpenerDirector:
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=str(self.ca_file))
        # No proxies for loopback, whatever the environment says.
        return urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self._ssl)
        )

    def _openssl(self, *args: str) -> None:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise ControlPlaneError("openssl CLI not found (apt-get install openssl)")
        res = subprocess.run([openssl, *args], capture_output=True, check=False)
        if res.returncode != 0:
            raise ControlPlaneError(f"openssl {' '.join(args)} failed: {res.stderr.decode(errors='replace')}")

    def _write_pki(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(exist_ok=True)
        # Cluster CA, and the apiserver's serving certificate signed by it.
        self._openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "3650",
            "-subj", "/CN=desched-e2e-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            "-keyout", str(pki / "ca.key"), "-out", str(self.ca_file),
        )  # fmt: skip
        self._openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", "/CN=kube-apiserver",
            "-keyout", str(pki / "apiserver.key"), "-out", str(pki / "apiserver.csr"),
        )  # fmt: skip
        ext = pki / "apiserver.ext"
        ext.write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
        )
        self._openssl(
            "x509", "-req", "-sha256", "-days", "3650", "-in", str(pki / "apiserver.csr"),
            "-CA", str(self.ca_file), "-CAkey", str(pki / "ca.key"), "-CAcreateserial",
            "-extfile", str(ext), "-out", str(pki / "apiserver.crt"),
        )  # fmt: skip
        # ServiceAccount token signing key pair.
        self._openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
        self._openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))

    def _write_token_file(self) -> None:
        lines = []
        for i, t in enumerate(self.tokens):
            groups = ",".join(t.groups)
            line = f"{t.token},{t.user},{t.uid or f'e2e-uid-{i}'}"
            if groups:
                line += f',"{groups}"'
            lines.append(line)
        path = self.workdir / "tokens.csv"
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)

    def _write_kubeconfig(self, path: Path, token: str, user: str) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "desched-e2e",
                    "cluster": {
                        "server": self.server,
                        # Embedded, so the file works wherever it is copied.
                        "certificate-authority-data": base64.b64encode(self.ca_file.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "desched-e2e", "context": {"cluster": "desched-e2e", "user": user}}],
            "current-context": "desched-e2e",
        }
        # JSON is valid YAML: every kubeconfig loader accepts it.
        path.write_text(json.dumps(cfg, indent=2) + "\n")
        path.chmod(0o600)

    def _add_proc(self, name: str, args: list[str]) -> _Proc:
        proc = _Proc(name=name, args=args, log_path=self.workdir / f"{name}.log")
        self._procs[name] = proc
        return proc

    def _spawn(self, proc: _Proc) -> None:
        apiserver = self._procs.get("kube-apiserver")
        proc.apiserver_epoch = apiserver.restarts if apiserver is not None else 0
        proc.log_file = open(proc.log_path, "ab")  # noqa: SIM115 - closed in _kill
        proc.log_file.write(f"\n==== start #{proc.restarts}: {' '.join(proc.args)}\n".encode())
        proc.log_file.flush()
        proc.popen = subprocess.Popen(
            proc.args,
            stdin=subprocess.DEVNULL,
            stdout=proc.log_file,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            env=self._env,
            start_new_session=True,  # own process group: killpg gets it and anything it spawned
            preexec_fn=_die_with_parent,
        )

    def _kill(self, proc: _Proc, grace: float = 10.0) -> None:
        p = proc.popen
        if p is not None:
            steps = [(signal.SIGTERM, grace)] if grace > 0 else []
            for sig, wait in [*steps, (signal.SIGKILL, 10.0)]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
                try:
                    p.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            # The leader may be gone while children of its group linger.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        if proc.log_file is not None:
            with contextlib.suppress(Exception):
                proc.log_file.close()
            proc.log_file = None

    def _fail(self, proc: _Proc, why: str) -> ControlPlaneError:
        return ControlPlaneError(f"{proc.name} {why}; log {proc.log_path}:\n{log_tail(proc.log_path)}")

    def _wait(self, proc: _Proc, probe: Any, what: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last = ""
        while time.monotonic() < deadline:
            if not proc.running():
                code = proc.popen.returncode if proc.popen else None
                raise self._fail(proc, f"exited with code {code} before {what}")
            try:
                ok, last = probe()
                if ok:
                    return
            except (OSError, urllib.error.URLError, ValueError) as e:
                last = repr(e)
            time.sleep(0.25)
        raise self._fail(proc, f"not {what} after {timeout or self.start_timeout:.0f}s (last probe: {last})")

    def _wait_http(self, proc: _Proc, url: str, verify: bool = True, token: str | None = None) -> None:
        ctx = (
            ssl.create_default_context(cafile=str(self.ca_file))
            if verify
            else ssl._create_unverified_context()
        )
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx)
        )

        def probe() -> tuple[bool, str]:
            req = urllib.request.Request(url)
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with opener.open(req, timeout=5) as resp:
                    return resp.status == 200, f"HTTP {resp.status}"
            except urllib.error.HTTPError as e:
                return False, f"HTTP {e.code}: {e.read()[:300]!r}"

        self._wait(proc, probe, f"healthy at {url}")

    def _wait_https_healthz(self, proc: _Proc, port: int) -> None:
        self._wait_http(proc, f"https://127.0.0.1:{port}/healthz", verify=False)

    def _start_etcd(self) -> None:
        for attempt in range(3):
            self.etcd_port, peer_port = free_port(), free_port()
            client = f"http://127.0.0.1:{self.etcd_port}"
            peer = f"http://127.0.0.1:{peer_port}"
            args = [
                str(self._bin("etcd")),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",  # a test cluster: durability does not matter, speed does
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ]
            proc = self._add_proc("etcd", args)
            self._spawn(proc)
            try:
                self._wait(proc, lambda c=client: self._etcd_healthy(c), "healthy", timeout=30)
                return
            except ControlPlaneError:
                if attempt < 2 and "address already in use" in log_tail(proc.log_path):
                    self._kill(proc)
                    shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
                    continue
                raise

    @staticmethod
    def _etcd_healthy(client: str) -> tuple[bool, str]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(client + "/health", timeout=5) as resp:
            body = resp.read().decode()
        return '"health":"true"' in body.replace(" ", ""), body

    def _apiserver_args(self) -> list[str]:
        pki = self.workdir / "pki"
        return [
            str(self._bin("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.apiserver_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--cert-dir={self.workdir / 'kube-apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={self.ca_file}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--anonymous-auth=false",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            "--profiling=false",
            f"--v={self.verbosity}",
            *self.extra_apiserver_args,
        ]

    def _start_apiserver(self) -> None:
        for attempt in range(3):
            self.apiserver_port = free_port()
            self.server = f"https://127.0.0.1:{self.apiserver_port}"
            proc = self._add_proc("kube-apiserver", self._apiserver_args())
            self._spawn(proc)
            try:
                self._wait_apiserver_ready(proc)
                return
            except ControlPlaneError:
                if attempt < 2 and "address already in use" in log_tail(proc.log_path):
                    self._kill(proc)
                    continue
                raise

    def _wait_apiserver_ready(self, proc: _Proc) -> None:
        self._wait_http(proc, f"{self.server}/readyz", token=self.admin_token)

        # /readyz covers the RBAC bootstrap; the system namespaces come from a controller
        # running right after, so wait for them too.
        def namespaces() -> tuple[bool, str]:
            for ns in ("default", "kube-system", "kube-node-lease"):
                status, _ = self.raw_request("GET", f"/api/v1/namespaces/{ns}", timeout=5)
                if status != 200:
                    return False, f"namespace {ns}: HTTP {status}"
            return True, "ok"

        self._wait(proc, namespaces, "serving the system namespaces")


class ApiError(Exception):
    """A non-2xx answer of the apiserver."""

    def __init__(self, status: int, method: str, path: str, body: bytes) -> None:
        self.status = status
        self.body = body
        try:
            self.status_obj: dict[str, Any] = json.loads(body)
        except ValueError:
            self.status_obj = {}
        self.reason = self.status_obj.get("reason", "")
        msg = self.status_obj.get("message") or body[:500].decode(errors="replace")
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {msg}")
