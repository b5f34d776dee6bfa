"""An exec credential plugin's token is replaced before it expires (desched.kube.client.ExecCredentials,
desched.kube.connect.keep_credentials_fresh): the next request carries the new token; a plugin that
fails or hangs on a refresh is reported in one warning, ended, retried, and the old token kept."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from tests.kubeapi import exec_kubeconfig

from desched.kube import loop as kube_loop
from desched.kube.client import ExecCredentials, api_client, load_client_config, request
from desched.kube.connect import keep_credentials_fresh

# The plugin: the n-th run gives token "t-n" expiring REFRESH_AHEAD + 1 s from now (so it is due
# again a second later), unless run n is told to fail or hang (argv[2]: "N:fail", "N:hang"), or to
# give no expiry ("noexpiry").
PLUGIN = """\
import datetime, json, os, sys, time
counter = sys.argv[1]
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
mode = sys.argv[2] if len(sys.argv) > 2 else ""
if mode == f"{n}:fail":
    print("the SSO session expired", file=sys.stderr)
    sys.exit(3)
if mode == f"{n}:hang":
    open(counter + ".pid", "w").write(str(os.getpid()))
    time.sleep(60)
status = {"token": f"t-{n}"}
if mode != "noexpiry":
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=AHEAD + 1)
    status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
kind = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}
print(json.dumps(kind | {"status": status}))
""".replace("AHEAD", str(int(ExecCredentials.REFRESH_AHEAD)))


def _running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _kubeconfig(tmp_path: Path, server: str, mode: str = "") -> tuple[Path, Path]:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    counter = tmp_path / "runs"
    args = [str(plugin), str(counter)] + ([mode] if mode else [])
    kc = exec_kubeconfig(tmp_path / "kc", server, [sys.executable, *args])
    return kc, counter


def test_the_next_request_carries_the_new_token(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    async def version(req: web.Request) -> web.Response:
        seen.append(req.headers.get("Authorization", ""))
        return web.json_response({"major": "1", "minor": "36"})

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/version", version)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            kc, counter = _kubeconfig(tmp_path, f"http://127.0.0.1:{server.port}")
            cfg, source = await load_client_config(str(kc))
            assert source.credentials is not None
            due = source.credentials.due_in()
            assert due is not None and 0 <= due <= 1.5
            api = api_client(cfg)
            try:
                await request(api, "GET", "/version")
                stop = asyncio.Event()
                task = asyncio.create_task(keep_credentials_fresh(source, 5.0, stop))
                for _ in range(200):  # the refresh comes about a second in
                    if counter.read_text() == "2":
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.2)
                await request(api, "GET", "/version")
                stop.set()
                await asyncio.wait_for(task, 5)
            finally:
                await api.close()
        finally:
            await server.close()

    with caplog.at_level(logging.DEBUG, logger="desched"):
        kube_loop.run(main())
    assert seen == ["Bearer t-1", "Bearer t-2"]
    assert any("refreshed the credentials of user 'u'" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("2:fail", "exec: process returned 3. the SSO session expired"),
        ("2:hang", "did not finish within 1s"),
    ],
)
def test_a_failed_refresh_keeps_the_token_says_so_and_ends_the_plugin(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str, said: str
) -> None:
    async def main() -> tuple[Any, str]:
        kc, counter = _kubeconfig(tmp_path, "https://127.0.0.1:1", mode)
        cfg, source = await load_client_config(str(kc))
        stop = asyncio.Event()
        task = asyncio.create_task(keep_credentials_fresh(source, 1.0, stop))
        await asyncio.sleep(3.0)  # due after ~1 s, then the plugin's run (the hang's bound: 1 s)
        stop.set()
        await asyncio.wait_for(task, 5)
        return cfg.api_key["BearerToken"], counter.read_text()

    with caplog.at_level(logging.WARNING, logger="desched"):
        token, runs = kube_loop.run(main())
    assert token == "Bearer t-1" and runs == "2"  # retried only after CREDENTIALS_RETRY (5 s)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    said_at_start = f"refreshing the credentials of user 'u' in {tmp_path / 'kc'} failed: {said} "
    assert warnings[0].startswith(said_at_start)
    # the token in use expires REFRESH_AHEAD + 1 s after the first run: about 300 s from now
    assert re.search(r"\(the token in use: expires in (29\d|30\d)s; retrying in 5s\)$", warnings[0])
    if mode.endswith("hang"):
        assert not _running(int((tmp_path / "runs.pid").read_text()))


def test_nothing_to_refresh_without_an_expiry(tmp_path: Path) -> None:
    async def main() -> tuple[Any, float]:
        kc, _ = _kubeconfig(tmp_path, "https://127.0.0.1:1", "noexpiry")
        _, source = await load_client_config(str(kc))
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.wait_for(keep_credentials_fresh(source, 1.0, asyncio.Event()), 2)
        return source.credentials, loop.time() - began

    credentials, took = kube_loop.run(main())
    assert credentials is None and took < 0.5


def test_stopping_during_a_hanging_refresh_ends_the_plugin(tmp_path: Path) -> None:
    async def main() -> int:
        kc, _ = _kubeconfig(tmp_path, "https://127.0.0.1:1", "2:hang")
        _, source = await load_client_config(str(kc))
        task = asyncio.create_task(keep_credentials_fresh(source, 30.0, asyncio.Event()))
        pidfile = tmp_path / "runs.pid"
        for _ in range(100):
            if pidfile.exists():
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return int(pidfile.read_text())

    assert not _running(kube_loop.run(main()))
