"""The exporter's cost before any probe: imports, discovery and credentials, per context.

What a ``fleetwatch exporter`` process costs that does not depend on connections or check
results, measured on the exporter's own code (no TLS fleet, no network):

- ``imports``: the resident memory (``VmRSS``) of a fresh interpreter after importing
  each module that matters (``fleetwatch.cli``, ``exporter.cli``, the kubernetes client,
  the reactor...), and which heavy modules ``import fleetwatch.cli`` pulls in
  (``python -X importtime``, cumulative microseconds);
- ``idle``: a real ``fleetwatch exporter`` with no cluster at all, once its first cycle
  is done (``/-/ready`` answers 200): its ``VmRSS`` and ``VmHWM``;
- ``contexts``: N contexts in kubeconfigs written for the run, every context with an
  embedded CA, client certificate and key, in one of two layouts: ``files`` (one
  kubeconfig per 5,000 contexts in a folder, as ``bench.probe_cycle``'s sharded fleet)
  or ``folder`` (one file per cluster, each in a sub-folder named after its Secret, as
  mounted Secrets). And one of two materials: ``shared`` (every context the same CA and
  client certificate, as ``bench.probe_cycle``'s stand-in fleet) or ``distinct`` (a CA
  and a client certificate of its own per cluster, RSA 2048 as kubeadm makes them: what
  a real fleet looks like). In a worker process of its own per case, it measures:

  - the first scan (``Discoverer.scan``): CPU and wall seconds, the transient peak of
    resident memory above the process before it (``VmHWM``, reset through
    ``/proc/self/clear_refs``), and the memory it keeps (``VmRSS`` after
    ``gc.collect()`` and ``malloc_trim(0)``, over the process before the scan);
  - a second scan of the unchanged files (CPU; parses must not grow);
  - resolving every context through the exporter's own ``CredentialCache`` (the worker
    threads, the shared builds, the ``ssl.SSLContext`` per distinct TLS material): CPU,
    wall, memory kept, and how many distinct ``SSLContext`` objects that made;
  - resolving every context again after forgetting every credential (what a 401 or an
    expiry does): CPU, and the proof that no kubeconfig was parsed again.

- ``sslcontexts``: what one ``ssl.SSLContext`` costs (resident memory and CPU), bare,
  with a CA, and with a client certificate and key too, for RSA 2048 (kubeadm) and for
  ECDSA P-256 (the stand-in), as many as the smallest ``--contexts``.

For ``distinct``, the CAs are self-signed certificates of one RSA 2048 key and the client
certificates share another RSA 2048 key (generating 10,000 RSA keys would take minutes of
CPU): each context's PEM bytes are still its own (a comment line naming the cluster
precedes the key, which OpenSSL skips), so the bytes kept and the work of loading them
are what distinct keys cost.

Run: ``.venv/bin/python -m bench.discovery_credentials --contexts 1000 10000``
(``--cases imports,idle,contexts`` to choose; ``--layouts``, ``--materials``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ctypes
import datetime
import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import REPO, machine_load, memory_kib, write_result

#: Contexts per kubeconfig in the ``files`` layout (bench.probe_cycle's shard size).
PER_FILE = 5000

#: Modules whose import cost is measured, each in a fresh interpreter.
MODULES = (
    "fleetwatch.cli",
    "exporter.cli",
    "exporter.server",
    "exporter.cycle",
    "exporter.net.credentials",
    "fleetwatch.discovery.scan",
    "kubernetes.client",
    "kubernetes.config.kube_config",
    "reactor.cli",
    "aiohttp.web",
    "prometheus_client",
    "yaml",
    "ssl",
)

#: Top-level packages whose presence ``import fleetwatch.cli`` reports.
HEAVY = ("kubernetes", "pydantic", "psycopg", "reactor", "aiohttp", "prometheus_client", "yaml")


# --- fixtures: kubeconfigs with embedded credentials ------------------------------------


def _material(count: int, distinct: bool) -> list[tuple[bytes, bytes, bytes]]:
    """(CA PEM, client certificate PEM, client key PEM) per cluster."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key: Any
    client_key: Any
    if distinct:
        ca_key = rsa.generate_private_key(65537, 2048)
        client_key = rsa.generate_private_key(65537, 2048)
    else:  # the stand-in's shape: ECDSA P-256, one CA and one client for the fleet
        ca_key, client_key = (
            ec.generate_private_key(ec.SECP256R1()),
            ec.generate_private_key(ec.SECP256R1()),
        )
    key_pem = client_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )

    def cert(subject: x509.Name, issuer: x509.Name, public: Any, ca: bool) -> bytes:
        built = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        return built.public_bytes(serialization.Encoding.PEM)

    admin = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-admin"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
        ]
    )
    out: list[tuple[bytes, bytes, bytes]] = []
    for i in range(count if distinct else 1):
        issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kubernetes-{i}")])
        ca_pem = cert(issuer, issuer, ca_key.public_key(), True)
        client_pem = cert(admin, issuer, client_key.public_key(), False)
        own_key = f"cluster-{i:05d}\n".encode() + key_pem if distinct else key_pem
        out.append((ca_pem, client_pem, own_key))
    return out if distinct else out * count


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _entries(i: int, material: tuple[bytes, bytes, bytes]) -> tuple[dict[str, Any], ...]:
    name = f"cluster-{i:05d}"
    ca, cert, key = material
    cluster = {
        "name": name,
        "cluster": {
            "server": f"https://127.0.0.1:{20000 + i % 40000}",
            "certificate-authority-data": _b64(ca),
        },
    }
    user = {
        "name": f"{name}-admin",
        "user": {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)},
    }
    context = {"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}
    return cluster, user, context


def _kubeconfig(entries: list[tuple[dict[str, Any], ...]]) -> str:
    import yaml

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [e[0] for e in entries],
        "users": [e[1] for e in entries],
        "contexts": [e[2] for e in entries],
        "current-context": entries[0][2]["name"],
    }
    return str(yaml.dump(doc, Dumper=yaml.CSafeDumper, default_flow_style=False))


def write_fixtures(root: Path, count: int, layout: str, distinct: bool) -> dict[str, Any]:
    """The kubeconfigs of one case under ``root``; returns what was written."""
    material = _material(count, distinct)
    entries = [_entries(i, material[i]) for i in range(count)]
    root.mkdir(parents=True, exist_ok=True)
    files = 0
    if layout == "files":
        for start in range(0, count, PER_FILE):
            (root / f"shard-{start // PER_FILE}.yaml").write_text(
                _kubeconfig(entries[start : start + PER_FILE])
            )
            files += 1
    else:  # one Secret per cluster, each mounted in a folder of its own (key ``value``)
        for entry in entries:
            folder = root / f"{entry[2]['name']}-kubeconfig"
            folder.mkdir()
            (folder / "value").write_text(_kubeconfig([entry]))
            files += 1
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {"files": files, "bytes": size, "ca_pem_bytes": len(material[0][0])}


# --- the worker: discovery and credentials, alone in a process ---------------------------

_LIBC = ctypes.CDLL("libc.so.6")


def _settle() -> None:
    """Collect garbage and give freed heap back, so RSS is what is kept."""
    gc.collect()
    _LIBC.malloc_trim(0)


def _rss_mib() -> float:
    return memory_kib(os.getpid())["VmRSS"] / 1024


def _reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux: ``5`` into ``clear_refs``)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_mib() -> float:
    return memory_kib(os.getpid())["VmHWM"] / 1024


async def _resolve_all(cache: Any, contexts: list[Any]) -> int:
    """Resolve every context as the probes of a first cycle do; returns the failures."""
    results = await asyncio.gather(*(cache.resolve(c) for c in contexts), return_exceptions=True)
    return sum(1 for r in results if isinstance(r, BaseException))


def worker(kubeconfig_dir: Path, count: int) -> dict[str, Any]:
    from exporter.net.credentials import CredentialCache
    from fleetwatch.discovery import Discoverer

    _settle()
    base = _rss_mib()
    out: dict[str, Any] = {"rss_before_mib": round(base, 1)}
    discoverer = Discoverer(None, kubeconfig_dir)

    _reset_peak()
    cpu0, t0 = time.process_time(), time.perf_counter()
    found = discoverer.scan()
    cpu1, t1 = time.process_time(), time.perf_counter()
    peak = _peak_mib()
    _settle()
    kept = _rss_mib()
    assert len(found.clusters) == count, (len(found.clusters), found.problems[:3])
    out["scan"] = {
        "cpu_s": round(cpu1 - cpu0, 3),
        "wall_s": round(t1 - t0, 3),
        "peak_above_before_mib": round(peak - base, 1),
        "kept_mib": round(kept - base, 1),
        "kept_bytes_per_context": round((kept - base) * 2**20 / count),
        "parses": discoverer.parses,
        "problems": len(found.problems),
    }

    cpu0 = time.process_time()
    again = discoverer.scan()
    out["rescan_unchanged"] = {
        "cpu_s": round(time.process_time() - cpu0, 3),
        "parses": discoverer.parses,
        "clusters": len(again.clusters),
    }

    contexts = [discoverer.context_config(c) for c in again.clusters]
    assert all(c is not None for c in contexts)

    async def resolve_phases() -> dict[str, Any]:
        cache = CredentialCache(10.0)
        try:
            phases: dict[str, Any] = {}
            _settle()
            before = _rss_mib()
            _reset_peak()
            cpu0, t0 = time.process_time(), time.perf_counter()
            failed = await _resolve_all(cache, contexts)
            cpu1, t1 = time.process_time(), time.perf_counter()
            peak = _peak_mib()
            ssl_contexts = {id(e.ssl_context) for e in _entries_of(cache) if e.ssl_context}
            _settle()
            after = _rss_mib()
            phases["resolve"] = {
                "cpu_s": round(cpu1 - cpu0, 3),
                "wall_s": round(t1 - t0, 3),
                "cpu_ms_per_context": round((cpu1 - cpu0) / count * 1000, 4),
                "builds": cache.builds,
                "failed": failed,
                "ssl_contexts": len(ssl_contexts),
                "peak_above_before_mib": round(peak - before, 1),
                "kept_mib": round(after - before, 1),
                "kept_bytes_per_context": round((after - before) * 2**20 / count),
            }
            parses = discoverer.parses
            for ctx in contexts:
                cache.invalidate(ctx)
            cpu0 = time.process_time()
            failed = await _resolve_all(cache, contexts)
            phases["re_resolve_after_401"] = {
                "cpu_s": round(time.process_time() - cpu0, 3),
                "failed": failed,
                "parses_during": discoverer.parses - parses,
            }
            _settle()  # discovery and credentials, both held: what a running exporter keeps
            phases["kept_bytes_per_context"] = round((_rss_mib() - base) * 2**20 / count)
            return phases
        finally:
            cache.close()

    out.update(asyncio.run(resolve_phases()))
    return out


def _entries_of(cache: Any) -> list[Any]:
    """The credentials a cache holds (a private table: the benchmark counts SSL contexts)."""
    return list(cache._entries.values())


# --- what one SSLContext costs ----------------------------------------------------------


def ssl_context_worker(count: int, kind: str) -> dict[str, Any]:
    """Memory and CPU of ``count`` SSLContexts: bare, with a CA, with a client certificate
    and key too (as ``exporter.net.credentials`` builds them: CA from memory, chain through an
    in-memory file), each with material of its own."""
    import ssl

    material = _material(count, True) if kind == "rsa" else _material(1, False) * count
    out: dict[str, Any] = {"kind": kind, "contexts": count}
    for stage in ("bare", "ca", "ca_cert_key"):
        _settle()
        before = _rss_mib()
        cpu0 = time.process_time()
        held = []
        for ca, cert, key in material:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if stage != "bare":
                ctx.load_verify_locations(cadata=ca.decode())
            if stage == "ca_cert_key":
                fd = os.memfd_create("bench-chain", os.MFD_CLOEXEC)
                try:
                    os.write(fd, cert + b"\n" + key)
                    ctx.load_cert_chain(f"/proc/self/fd/{fd}")
                finally:
                    os.close(fd)
            held.append(ctx)
        cpu = time.process_time() - cpu0
        _settle()
        out[stage] = {
            "kib_per_context": round((_rss_mib() - before) * 1024 / count, 1),
            "cpu_ms_per_context": round(cpu / count * 1000, 3),
        }
        del held
    return out


# --- imports and the idle exporter ---------------------------------------------------


def _python() -> str:
    return sys.executable


def _env() -> dict[str, str]:
    """This checkout's code first, whatever the virtualenv's editable install points at
    (a copy of another commit measures that commit)."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def import_costs() -> dict[str, Any]:
    """RSS of a fresh interpreter after each import, and what fleetwatch.cli pulls in."""
    probe = (
        "import re,sys\n"
        "{stmt}\n"
        "s=open('/proc/self/status').read()\n"
        "print(int(re.search(r'VmRSS:\\s+(\\d+)',s).group(1)), "
        "' '.join(sorted(m for m in {heavy!r} if m in sys.modules)))\n"
    )
    rss: dict[str, Any] = {}
    for module in ("(python itself)", *MODULES):
        stmt = "pass" if module.startswith("(") else f"import {module}"
        done = subprocess.run(
            [_python(), "-c", probe.format(stmt=stmt, heavy=HEAVY)],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        kib, _, loaded = done.stdout.strip().partition(" ")
        rss[module] = {"rss_mib": round(int(kib) / 1024, 1), "loads": loaded.split()}
    timed = subprocess.run(
        [_python(), "-X", "importtime", "-c", "import fleetwatch.cli"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    cumulative: dict[str, int] = {}
    for line in timed.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$", line)
        if m and m.group(4).split(".")[0] in (
            *HEAVY,
            "discovery",
            "exporter",
            "fleetwatch",
            "common",
        ):
            name = m.group(4)
            if "." not in name or name in ("exporter.cli", "fleetwatch.cli", "kubernetes.client"):
                cumulative[name] = max(cumulative.get(name, 0), int(m.group(2)))
    return {"rss": rss, "importtime_us_of_fleetwatch_cli": cumulative}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def idle_exporter(workdir: Path) -> dict[str, Any]:
    """A real ``fleetwatch exporter`` with no cluster: memory once its first cycle is done."""
    empty = workdir / "empty"
    empty.mkdir()
    port = _free_port()
    exe = str(Path(_python()).parent / "fleetwatch")
    argv = [exe, "exporter", "--kubeconfig=", "--kubeconfig-dir", str(empty),
            "--web.listen-address", f"127.0.0.1:{port}", "--probe.interval", "1"]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=workdir, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        ready_s = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        ready_s = time.perf_counter() - t0
                        break
            except OSError:
                time.sleep(0.05)  # not a synchronisation: the poll interval of a deadline
        if ready_s is None:
            raise RuntimeError("the exporter never became ready")
        mem = memory_kib(proc.pid)
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        modules = _modules_of(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return {
        "ready_s": round(ready_s, 3),
        "cpu_s_to_ready": round(cpu, 3),
        "rss_mib": round(mem["VmRSS"] / 1024, 1),
        "hwm_mib": round(mem["VmHWM"] / 1024, 1),
        "heavy_libraries_mapped": modules,
    }


def _modules_of(pid: int) -> list[str]:
    """Heavy libraries whose files the process has mapped (compiled parts of them)."""
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    return sorted(m for m in ("pydantic_core", "psycopg", "_cffi_backend") if m in maps)


# --- the driver ---------------------------------------------------------------------


def run_case(count: int, layout: str, material: str, workdir: Path) -> dict[str, Any]:
    folder = workdir / f"{layout}-{material}-{count}"
    written = write_fixtures(folder, count, layout, material == "distinct")
    with machine_load() as load:
        argv = [_python(), "-m", "bench.discovery_credentials", "--worker", str(folder),
                "--contexts", str(count)]  # fmt: skip
        done = subprocess.run(
            argv,
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"worker failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"layout": layout, "material": material, "contexts": count, **written,
            **result, "load": load}  # fmt: skip


def _run_ssl_worker(count: int, kind: str) -> dict[str, Any]:
    argv = [_python(), "-m", "bench.discovery_credentials", "--ssl-worker", kind,
            "--contexts", str(count)]  # fmt: skip
    with machine_load() as load:
        done = subprocess.run(
            argv, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=1800, check=True
        )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "load": load}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--contexts", type=int, nargs="+", default=[1000])
    parser.add_argument("--layouts", default="files,folder")
    parser.add_argument("--materials", default="shared,distinct")
    parser.add_argument("--cases", default="imports,idle,sslcontexts,contexts")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ssl-worker", choices=("rsa", "ec"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.contexts[0])))
        return {}
    if args.ssl_worker is not None:
        print(json.dumps(ssl_context_worker(args.contexts[0], args.ssl_worker)))
        return {}
    cases = args.cases.split(",")
    data: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fleetwatch-bench-dc-") as tmp:
        workdir = Path(tmp)
        if "imports" in cases:
            with machine_load() as load:
                data["imports"] = import_costs()
            data["imports"]["load"] = load
        if "idle" in cases:
            with machine_load() as load:
                data["idle"] = idle_exporter(workdir)
            data["idle"]["load"] = load
        if "sslcontexts" in cases:
            data["ssl_contexts"] = [
                _run_ssl_worker(min(args.contexts), kind) for kind in ("rsa", "ec")
            ]
        if "contexts" in cases:
            data["contexts"] = [
                run_case(count, layout, material, workdir)
                for count in args.contexts
                for layout in args.layouts.split(",")
                for material in args.materials.split(",")
            ]
    write_result("discovery_credentials", data, args.out)
    return data


if __name__ == "__main__":
    main()
