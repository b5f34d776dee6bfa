"""Connecting: kubeconfig merging as kubectl does, client-go's QPS defaults, the User-Agent, how
failures are said, the bounded stop-aware start and rate-limited failure logs (no API server
needed; the e2e tier runs the same paths against a real one in tests/e2e/test_startup.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from desched.cluster.live_source import RESOURCES, WORKLOAD_KINDS
from desched.errors import UserError
from desched.kube.client import ApiError, ClientSource, load_client_config, rate_limiter, user_agent
from desched.kube.connect import (
    WORKLOAD_RESOURCES,
    ConnectionMonitor,
    StartupFailed,
    _Version,
    describe,
    skew_warning,
)

SOURCE = ClientSource("https://10.0.0.1:6443", "/etc/kc", "desched")


def kubeconfig(
    path: Path,
    *,
    current: str | None,
    contexts: dict[str, tuple[str, str]],
    clusters: dict[str, str],
    users: dict[str, str],
) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in clusters.items()],
        "users": [{"name": n, "user": {"token": t}} for n, t in users.items()],
        "contexts": [{"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in contexts.items()],
    }
    if current is not None:
        doc["current-context"] = current
    path.write_text(json.dumps(doc))
    return path


def load(monkeypatch: pytest.MonkeyPatch, env: str | None, **kw: Any) -> tuple[str, str, ClientSource]:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    if env is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)
    else:
        monkeypatch.setenv("KUBECONFIG", env)
    cfg, source = asyncio.run(load_client_config(**kw))
    return str(cfg.host), str(cfg.api_key.get("BearerToken", "")), source


def test_kubeconfig_list_merges_as_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = kubeconfig(
        tmp_path / "a",
        current="ctx-a",
        contexts={"ctx-a": ("c1", "u1")},
        clusters={"c1": "https://first:6443"},
        users={"u1": "token-from-a"},
    )
    b = kubeconfig(
        tmp_path / "b",
        current="ctx-b",  # kubectl: the first file that sets current-context wins, so not this one
        contexts={"ctx-a": ("c2", "u2"), "ctx-b": ("c2", "u2")},  # ctx-a: the first file's wins
        clusters={"c1": "https://second:6443", "c2": "https://only-in-b:6443"},
        users={"u1": "token-from-b", "u2": "token-u2"},
    )
    host, token, source = load(monkeypatch, f"{a}:{tmp_path / 'missing'}:{b}")
    assert (host, token) == ("https://first:6443", "Bearer token-from-a")
    assert source.user == "u1" and str(a) in source.origin and str(b) in source.origin
    # entries only the second file defines are usable through the first's names
    host, token, _ = load(monkeypatch, f"{a}:{b}", context="ctx-b")
    assert (host, token) == ("https://only-in-b:6443", "Bearer token-u2")
    # the order decides
    host, token, _ = load(monkeypatch, f"{b}:{a}")
    assert (host, token) == ("https://only-in-b:6443", "Bearer token-u2")


def test_current_context_from_the_first_file_that_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = kubeconfig(tmp_path / "a", current=None, contexts={}, clusters={}, users={})
    b = kubeconfig(
        tmp_path / "b",
        current="x",
        contexts={"x": ("c", "u")},
        clusters={"c": "https://b:6443"},
        users={"u": "t"},
    )
    assert load(monkeypatch, f"{a}:{b}")[0] == "https://b:6443"


def test_kubeconfig_flag_is_one_file_and_wins_over_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = kubeconfig(
        tmp_path / "a",
        current="x",
        contexts={"x": ("c", "u")},
        clusters={"c": "https://a:1"},
        users={"u": "t"},
    )
    b = kubeconfig(
        tmp_path / "b",
        current="x",
        contexts={"x": ("c", "u")},
        clusters={"c": "https://b:1"},
        users={"u": "t"},
    )
    assert load(monkeypatch, str(a), kubeconfig=str(b))[0] == "https://b:1"
    with pytest.raises(UserError, match="does not exist"):
        load(monkeypatch, None, kubeconfig=f"{a}:{b}")  # --kubeconfig is a single file, as upstream


def test_kubeconfig_problems_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="none of the files"):
        load(monkeypatch, f"{tmp_path / 'x'}:{tmp_path / 'y'}")
    bad = tmp_path / "bad"
    bad.write_text("- a list\n")
    with pytest.raises(UserError, match="not a kubeconfig"):
        load(monkeypatch, str(bad))
    bomb = tmp_path / "bomb"  # read by the one bounded YAML loader: refused before it is expanded
    bomb.write_text(
        'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        + "".join(
            f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
    )
    with pytest.raises(UserError, match=r"cannot read .*bomb: YAML expands to more than 100000 values"):
        load(monkeypatch, str(bomb))
    two = tmp_path / "two"
    two.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(UserError, match=r"cannot read .*two: expected a single document"):
        load(monkeypatch, str(two))
    a = kubeconfig(tmp_path / "a", current="nope", contexts={}, clusters={}, users={})
    with pytest.raises(UserError, match="nope"):
        load(monkeypatch, str(a))
    exec_user = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://a:1"}}],
        "users": [
            {
                "name": "eks",
                "user": {
                    "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no-such-plugin-xq"}
                },
            }
        ],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "eks"}}],
        "current-context": "x",
    }
    (tmp_path / "exec").write_text(json.dumps(exec_user))
    with pytest.raises(UserError) as err:
        load(monkeypatch, str(tmp_path / "exec"))
    assert (
        "'no-such-plugin-xq'" in str(err.value)
        and "'eks'" in str(err.value)
        and "not found" in str(err.value)
    )


def test_qps_and_burst_zero_are_client_gos_defaults() -> None:
    limiter = rate_limiter(0, 0)
    assert limiter is not None and (limiter.qps, limiter.capacity) == (5.0, 10)
    limiter = rate_limiter(50, 100)
    assert limiter is not None and (limiter.qps, limiter.capacity) == (50, 100)
    limiter = rate_limiter(20, 0)
    assert limiter is not None and (limiter.qps, limiter.capacity) == (20, 10)
    assert rate_limiter(-1, 0) is None  # client-go: a negative QPS disables the limiter


def test_user_agent_names_desched_its_version_and_platform() -> None:
    from desched import __version__

    ua = user_agent()
    assert re.fullmatch(rf"desched/{re.escape(__version__)} \([a-z0-9]+/[a-z0-9_]+\)( [0-9a-f]{{7}})?", ua), (
        ua
    )


def test_the_workload_resources_are_what_the_workload_informers_read() -> None:
    def resource(path: str) -> str:
        parts = path.strip("/").split("/")  # api/v1/<plural> or apis/<group>/v1/<plural>
        return parts[-1] + (f".{parts[1]}" if parts[0] == "apis" else "")

    assert {resource(RESOURCES[kind].path) for kind in WORKLOAD_KINDS} == WORKLOAD_RESOURCES


def test_http_failures_are_said_for_an_operator() -> None:
    f = describe(ApiError(401, "Unauthorized"), SOURCE)
    assert f.permanent and f.message == (
        "401 Unauthorized from the API server at https://10.0.0.1:6443: the credentials in /etc/kc "
        "(user 'desched') were rejected"
    )
    forbidden = (
        'pods is forbidden: User "system:serviceaccount:kube-system:descheduler" cannot list resource '
        '"pods" in API group "" at the cluster scope'
    )
    f = describe(ApiError(403, forbidden), SOURCE)
    assert f.permanent
    assert f.message.startswith(
        "403 Forbidden from the API server at https://10.0.0.1:6443: "
        "system:serviceaccount:kube-system:descheduler cannot list pods at the cluster scope (RBAC"
    )
    f = describe(
        ApiError(403, forbidden.replace('""', '"policy"').replace('"pods"', '"poddisruptionbudgets"')), SOURCE
    )
    assert "cannot list poddisruptionbudgets.policy at the cluster scope" in f.message
    assert f.message.endswith(
        "(RBAC: bind the ClusterRole in deploy/kubernetes/base/rbac.yaml to this identity)"
    )
    # what only defaultConstraints reads: the hint names the kustomize Component that grants it
    f = describe(ApiError(403, forbidden.replace('""', '"apps"').replace('"pods"', '"statefulsets"')), SOURCE)
    assert f.permanent and f.message == (
        "403 Forbidden from the API server at https://10.0.0.1:6443: "
        "system:serviceaccount:kube-system:descheduler cannot list statefulsets.apps at the cluster scope "
        "(RBAC: defaultConstraints reads Services and workload controllers: add the kustomize component "
        "deploy/kubernetes/workloads to your overlay, or bind the ClusterRole in its rbac.yaml to this "
        "identity)"
    )
    f = describe(ApiError(503, "etcd is down"), SOURCE)
    assert not f.permanent and f.key == "http-5xx"
    assert (
        f.message == "the API server at https://10.0.0.1:6443 answered 503 Service Unavailable: etcd is down"
    )
    assert not describe(ApiError(429, "slow down"), SOURCE).permanent
    assert "\n" not in describe(ApiError(500, "a\nb"), SOURCE).message


def test_connection_refused_is_said_as_such() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there

    async def attempt() -> BaseException:
        async with aiohttp.ClientSession() as session:
            try:
                await session.get(f"http://127.0.0.1:{port}/version")
            except aiohttp.ClientError as e:
                return e
        raise AssertionError("connected to a closed port")

    f = describe(asyncio.run(attempt()), SOURCE)
    assert (f.key, f.permanent) == ("refused", False)
    assert f.message == "cannot reach the API server at https://10.0.0.1:6443: connection refused"
    assert describe(TimeoutError(), SOURCE, "GET /version").key == "timeout"


def test_version_skew_warns_beyond_three_minors() -> None:
    assert skew_warning(_Version(major="1", minor="36", git_version="v1.36.3")) is None
    assert skew_warning(_Version(major="1", minor="33+", git_version="v1.33.1-gke")) is None
    assert skew_warning(_Version(major="1", minor="39")) is None
    warn = skew_warning(_Version(major="1", minor="32", git_version="v1.32.0"))
    assert warn is not None and "v1.32.0" in warn and "1.33 to 1.39" in warn
    assert skew_warning(_Version(major="1", minor="40")) is not None
    assert "cannot tell" in (skew_warning(_Version(major="", minor="")) or "")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_start_is_bounded_by_time_without_an_answer() -> None:
    async def main() -> None:
        monitor = ConnectionMonitor(SOURCE, bound=0.3)
        stop = asyncio.Event()
        with pytest.raises(
            UserError, match=r"no answer from the API server at https://10\.0\.0\.1:6443 within 0\.3s"
        ):
            await monitor.start(asyncio.sleep(60), stop, [])
        # progress moves the deadline: steady answers keep a long start alive
        monitor = ConnectionMonitor(SOURCE, bound=0.3)

        async def slow_but_steady() -> str:
            for _ in range(8):
                await asyncio.sleep(0.1)
                monitor.progress()
            return "synced"

        assert await monitor.start(slow_but_steady(), stop, []) == "synced"

    asyncio.run(main())


def test_the_start_ends_at_once_on_a_permanent_failure_or_a_signal() -> None:
    async def main() -> None:
        monitor = ConnectionMonitor(SOURCE, bound=30)
        stop = asyncio.Event()

        async def forbidden(timeout: float) -> None:
            raise ApiError(401, "Unauthorized")

        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(UserError, match="401 Unauthorized"):
            await monitor.start(monitor.retry("GET /version", forbidden), stop, [])
        assert loop.time() - began < 1

        # an informer's failure (reported, not raised) ends it too
        monitor = ConnectionMonitor(SOURCE, bound=30)

        async def informer() -> None:
            await asyncio.sleep(0.05)
            monitor.failure("Pod list", ApiError(403, "forbidden"))
            await asyncio.sleep(60)

        with pytest.raises(UserError, match="403 Forbidden"):
            await monitor.start(informer(), stop, [])

        monitor = ConnectionMonitor(SOURCE, bound=30)
        signals: list[str] = []

        def sigterm() -> None:
            signals.append("SIGTERM")
            stop.set()

        loop.call_later(0.1, sigterm)
        began = loop.time()
        with pytest.raises(UserError, match="stopped by SIGTERM during start-up"):
            await monitor.start(asyncio.sleep(60), stop, signals)
        assert loop.time() - began < 1

    asyncio.run(main())


def test_retry_gives_up_only_on_permanent_failures() -> None:
    async def main() -> None:
        monitor = ConnectionMonitor(SOURCE, bound=30)
        calls = []

        async def flaky(timeout: float) -> str:
            calls.append(timeout)
            if len(calls) < 3:
                raise ApiError(503, "starting")
            return "ok"

        assert await monitor.retry("GET /version", flaky) == "ok"
        assert len(calls) == 3 and monitor.last is not None and monitor.last.key == "http-5xx"

        async def denied(timeout: float) -> str:
            raise ApiError(403, "no")

        with pytest.raises(StartupFailed):
            await monitor.retry("GET /version", denied)

    asyncio.run(main())


def test_live_failures_are_logged_once_per_class_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()

    async def main() -> None:
        monitor = ConnectionMonitor(SOURCE, bound=30, log_interval=10, clock=clock)
        for _ in range(20):  # 20 failures in 5 s: one line
            monitor.failure("Pod watch", ApiError(500, "boom"))
            monitor.failure("Node watch", ApiError(502, "bad gateway"))
            clock.now += 0.25
        clock.now += 6  # past the interval: one more line, with the count
        monitor.failure("Pod watch", ApiError(500, "boom"))
        monitor.failure("Pod list", ApiError(401, "Unauthorized"))  # another class: its own line

    with caplog.at_level(logging.WARNING, logger="desched.kube.connect"):
        asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("Pod watch: the API server at https://10.0.0.1:6443 answered 500")
    assert "39 more like it in the last 11s" in lines[1]
    assert "401 Unauthorized" in lines[2]
    assert not any(r.exc_info for r in caplog.records)


def test_git_sha_from_a_checkout_a_worktree_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from desched import buildinfo

    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "refs" / "heads" / "main").write_text(sha + "\n")
    assert buildinfo._checkout_head(repo) == sha
    # a worktree: .git is a file pointing at its gitdir; refs live in the common dir
    common = repo / ".git"
    wt_gitdir = common / "worktrees" / "wt"
    wt_gitdir.mkdir(parents=True)
    (wt_gitdir / "HEAD").write_text("ref: refs/heads/feature\n")
    (wt_gitdir / "commondir").write_text("../..\n")
    (common / "packed-refs").write_text(f"# pack-refs\n{sha.replace('0', 'f')} refs/heads/feature\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {wt_gitdir}\n")
    assert buildinfo._checkout_head(worktree) == sha.replace("0", "f")
    assert buildinfo._checkout_head(tmp_path / "nothing") == ""
    monkeypatch.setenv("DESCHED_GIT_SHA", sha.upper())
    buildinfo.git_sha.cache_clear()
    try:
        assert buildinfo.git_sha() == sha
    finally:
        monkeypatch.delenv("DESCHED_GIT_SHA")
        buildinfo.git_sha.cache_clear()


def test_a_failing_informer_makes_the_cache_unsynced_and_recovers_with_the_server() -> None:
    from desched.cluster.live_source import LiveCache

    class Api:
        """Refuses every request until ``up``; then answers empty lists and watches that end."""

        def __init__(self) -> None:
            self.up = False

        async def call_api(self, path: str, method: str, **kw: Any) -> Any:
            if not self.up:
                raise ApiError(503, "the apiserver is starting")
            watch = ("watch", "true") in kw.get("query_params", [])
            return Answer(b"" if watch else b'{"metadata": {"resourceVersion": "7"}, "items": []}')

    class Answer:
        status = 200

        def __init__(self, body: bytes) -> None:
            self.body = body
            self.content = self

        async def read(self) -> bytes:
            return self.body

        async def iter_any(self) -> Any:
            await asyncio.sleep(0.05)
            for chunk in (self.body,):
                yield chunk

        def release(self) -> None:
            pass

    async def main() -> None:
        api = Api()
        monitor = ConnectionMonitor(SOURCE, bound=30)
        monitor.starting = False
        cache = LiveCache(api, ("Node", "Pod"), monitor=monitor)  # type: ignore[arg-type]
        cache.start()
        await asyncio.sleep(2.0)  # 0.5 + 1 s of backoff gone by: the next retry is ~2 s away
        problems = cache.unsynced()
        assert len(problems) == 1, problems  # one cause, both kinds named
        assert problems[0].startswith("Node, Pod: the API server at https://10.0.0.1:6443 answered 503")
        api.up = True
        monitor.progress()  # another request got an answer: the informers stop backing off
        for _ in range(10):  # within 0.5 s, not at the end of the backoff
            if not cache.unsynced():
                break
            await asyncio.sleep(0.05)
        assert cache.unsynced() == []
        await cache.stop()

    asyncio.run(main())
