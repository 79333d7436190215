"""Which client lists and watches the management cluster's Secrets: measured, not assumed.

The management stand-in runs in the parent (``ThreadedManagementCluster``) with N Argo CD
cluster Secrets (default 5,000, about 600 bytes each); each client runs in a worker
process of its own, so its CPU (``time.process_time``: every thread of the worker) and
memory are its own. Per client, in order:

- ``list``: the first complete list, paged by 500 (``limit``/``continue``): wall and CPU
  seconds;
- ``rest``: a watch from the list's revision with bookmarks (every second here, 60 s on a
  real server), CPU seconds over ``--rest`` seconds with nothing changing;
- ``modified``: the parent rewrites every Secret (batches of 500) when the worker says
  ``go``; the worker's CPU seconds from then until it received all N ``MODIFIED``
  events, and wall (which includes the stand-in's own writes);
- ``rss``: ``VmRSS`` and ``VmHWM`` at the end (MiB), and ``VmRSS`` after the imports.

Clients: ``aiohttp`` (``fleetwatch.kube.informer`` with ``fleetwatch.kube.kubeapi``: what fleetwatch
ships), ``kubernetes`` (the synchronous client, ``watch.Watch().stream`` in a thread, as
the user named it; its models as ``CoreV1Api`` returns them), ``kubernetes_asyncio``
(installed by hand: ``pip install kubernetes_asyncio``; skipped when missing).

    python -m bench.informer_clients [--secrets 5000] [--rest 30] [--clients aiohttp,...]
        [--no-modify]   # the list and the watch at rest only
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SELECTOR = "argocd.argoproj.io/secret-type=cluster"


def secret(i: int, generation: int) -> dict[str, Any]:
    config = {"bearerToken": f"token-{i}-{generation}", "tlsClientConfig": {"insecure": True}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-{i:05d}",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "data": {
            "name": base64.b64encode(f"c{i:05d}".encode()).decode(),
            "server": base64.b64encode(f"https://10.{i // 250}.{i % 250}.1:6443".encode()).decode(),
            "config": base64.b64encode(json.dumps(config).encode()).decode(),
        },
    }


def memory() -> dict[str, float]:
    out: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


class Skip(Exception):
    """``--no-modify``: the worker stops before the rewrite."""


class Probe:
    """What a worker reports (JSON lines; ``go``: rewrite the Secrets now)."""

    def __init__(self, modify: bool = True) -> None:
        self.results: dict[str, Any] = {}
        self.modify = modify

    def say(self, **values: Any) -> None:
        if values.get("go") and not self.modify:
            raise Skip()
        print(json.dumps(values), flush=True)


def run_aiohttp(kubeconfig: str, n: int, rest: float, probe: Probe) -> None:
    from fleetwatch.discovery.kubecreds import from_kubeconfig
    from fleetwatch.discovery.secretwatch import WatchSpec
    from fleetwatch.kube.informer import InformerSettings, Reflector
    from fleetwatch.kube.kubeapi import KubeApi
    from fleetwatch.kube.objects import slim

    probe.results["rss_imported"] = memory()["VmRSS"]

    async def main() -> None:
        modified = 0
        done = asyncio.Event()

        def changed() -> None:
            nonlocal modified
            modified += 1
            if modified >= n and reflector.synced:
                done.set()

        async with KubeApi(from_kubeconfig([Path(kubeconfig)], "bench")) as api:
            spec = WatchSpec("argocd", SELECTOR, "", None)
            settings = InformerSettings(page_size=500, watch_seconds=(3000.0, 3000.0))
            reflector = Reflector(api, spec, settings, on_change=changed, transform=slim)
            w0, c0 = time.monotonic(), time.process_time()
            await reflector._list()
            probe.results["list"] = [time.monotonic() - w0, time.process_time() - c0]
            assert len(reflector.store) == n, len(reflector.store)
            task = asyncio.create_task(reflector.run(), name="bench-reflector")
            await asyncio.sleep(0.5)
            c0 = time.process_time()
            await asyncio.sleep(rest)
            probe.results["rest"] = time.process_time() - c0
            modified = 0
            w0, c0 = time.monotonic(), time.process_time()
            probe.say(go=True)
            await asyncio.wait_for(done.wait(), 300)
            probe.results["modified"] = [time.monotonic() - w0, time.process_time() - c0]
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


def run_kubernetes(kubeconfig: str, n: int, rest: float, probe: Probe) -> None:
    import kubernetes

    probe.results["rss_imported"] = memory()["VmRSS"]
    client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
    v1 = kubernetes.client.CoreV1Api(client)
    w0, c0 = time.monotonic(), time.process_time()
    items: dict[str, Any] = {}
    token = None
    while True:
        page = v1.list_secret_for_all_namespaces(
            label_selector=SELECTOR, limit=500, _continue=token
        )
        for item in page.items:
            items[item.metadata.uid] = item
        token = page.metadata._continue
        if not token:
            break
    rv = page.metadata.resource_version
    probe.results["list"] = [time.monotonic() - w0, time.process_time() - c0]
    assert len(items) == n
    seen = threading.Event()
    counter = {"modified": 0}

    def watch() -> None:
        w = kubernetes.watch.Watch()
        for event in w.stream(
            v1.list_secret_for_all_namespaces,
            label_selector=SELECTOR,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=3000,
        ):
            if event["type"] == "MODIFIED":
                items[event["object"].metadata.uid] = event["object"]
                counter["modified"] += 1
                if counter["modified"] >= n:
                    seen.set()
                    w.stop()

    thread = threading.Thread(target=watch, daemon=True, name="bench-watch")
    thread.start()
    time.sleep(0.5)
    c0 = time.process_time()
    time.sleep(rest)
    probe.results["rest"] = time.process_time() - c0
    w0, c0 = time.monotonic(), time.process_time()
    probe.say(go=True)
    if not seen.wait(300):
        probe.results["received"] = counter["modified"]
    probe.results["modified"] = [time.monotonic() - w0, time.process_time() - c0]


def run_kubernetes_asyncio(kubeconfig: str, n: int, rest: float, probe: Probe) -> None:
    from kubernetes_asyncio import client, config, watch

    probe.results["rss_imported"] = memory()["VmRSS"]

    async def main() -> None:
        api_client = await config.new_client_from_config(config_file=kubeconfig)
        async with api_client:
            v1 = client.CoreV1Api(api_client)
            w0, c0 = time.monotonic(), time.process_time()
            items: dict[str, Any] = {}
            token = None
            while True:
                kwargs: dict[str, Any] = {"label_selector": SELECTOR, "limit": 500}
                if token:
                    kwargs["_continue"] = token
                page = await v1.list_secret_for_all_namespaces(**kwargs)
                for item in page.items:
                    items[item.metadata.uid] = item
                token = page.metadata._continue
                if not token:
                    break
            rv = page.metadata.resource_version
            probe.results["list"] = [time.monotonic() - w0, time.process_time() - c0]
            done = asyncio.Event()

            async def run_watch() -> None:
                modified = 0
                w = watch.Watch()
                async for event in w.stream(
                    v1.list_secret_for_all_namespaces,
                    label_selector=SELECTOR,
                    resource_version=rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=3000,
                ):
                    if event["type"] == "MODIFIED":
                        items[event["object"].metadata.uid] = event["object"]
                        modified += 1
                        if modified >= n:
                            done.set()

            task = asyncio.create_task(run_watch(), name="bench-watch")
            await asyncio.sleep(0.5)
            c0 = time.process_time()
            await asyncio.sleep(rest)
            probe.results["rest"] = time.process_time() - c0
            w0, c0 = time.monotonic(), time.process_time()
            probe.say(go=True)
            await asyncio.wait_for(done.wait(), 300)
            probe.results["modified"] = [time.monotonic() - w0, time.process_time() - c0]
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


RUNNERS = {
    "aiohttp": run_aiohttp,
    "kubernetes": run_kubernetes,
    "kubernetes_asyncio": run_kubernetes_asyncio,
}


def worker(client: str, kubeconfig: str, n: int, rest: float, modify: bool) -> None:
    probe = Probe(modify)
    with contextlib.suppress(Skip):
        RUNNERS[client](kubeconfig, n, rest, probe)
    probe.results["rss"] = memory()
    probe.say(result=probe.results)


def write(mgmt: Any, n: int, generation: int) -> None:
    """Every Secret written, 500 a request (the control API's body limit)."""
    for start in range(0, n, 500):
        mgmt.seed([secret(i, generation) for i in range(start, min(n, start + 500))])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--secrets", type=int, default=5000)
    parser.add_argument("--rest", type=float, default=30.0)
    parser.add_argument("--no-modify", dest="modify", action="store_false")
    parser.add_argument("--clients", default="aiohttp,kubernetes,kubernetes_asyncio")
    parser.add_argument("worker", nargs="*")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.secrets, args.rest, args.modify)
        return
    from fleetwatch.standin.management import ManagementSettings, ThreadedManagementCluster

    # In this (parent) process, on its own thread: the workers' CPU is theirs alone.
    with (
        tempfile.TemporaryDirectory() as tmp,
        ThreadedManagementCluster(
            Path(tmp) / "mgmt", ManagementSettings(bookmark_seconds=1.0)
        ) as mgmt,
    ):
        generation = 0
        write(mgmt, args.secrets, generation)
        for client in args.clients.split(","):
            argv = [
                sys.executable,
                "-m",
                "bench.informer_clients",
                "--secrets",
                str(args.secrets),
                "--rest",
                str(args.rest),
                *([] if args.modify else ["--no-modify"]),
                client,
                str(mgmt.kubeconfig),
            ]
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                message = json.loads(line)
                if message.get("go"):
                    generation += 1
                    write(mgmt, args.secrets, generation)
                elif "result" in message:
                    print(
                        json.dumps({"client": client, "secrets": args.secrets, **message["result"]})
                    )
            if proc.wait() != 0:
                print(json.dumps({"client": client, "failed": proc.returncode}))


if __name__ == "__main__":
    main()
