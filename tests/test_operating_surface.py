"""The operating surface both servers share with Prometheus' own components.

In process (aiohttp's test client): build info and the process collectors on ``/metrics``,
basic auth on every path of the reactor with its bearer token still required on top.
Real processes: ``fleetwatch exporter`` and ``fleetwatch reactor`` serving HTTPS with basic
auth and required client certificates, scraped by a real Prometheus: ``up 1`` with the
right credentials, ``up 0`` with a wrong password or without the client certificate.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from exporter.server import MONITOR
from exporter.server import create_app as create_exporter
from exporter.settings import ExporterSettings
from fleetwatch.cli import build_parser, main, warn_old_spellings
from fleetwatch.common.flags import USED, old_spellings
from fleetwatch.common.logs import setup_logging
from fleetwatch.common.version import __version__
from fleetwatch.common.webconfig import parse_web_config
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload.certs import FleetCerts
from reactor.app import create_app
from reactor.context import ReactorSettings
from tests.helpers.quiet_http import fetch

PASSWORD = "scrape-s3cret"
TOKEN = "mutate-s3cret"
#: Cost 6: the answers are under test here, not bcrypt's cost (measured in docs/deployment.md).
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(6)).decode()


def basic(user: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


def samples(text: str) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


# -- in process -----------------------------------------------------------------------


async def test_reactor_metrics_carry_build_info_and_process_collectors(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    app = create_app(ReactorSettings(db_path=tmp_path / "state.db"), registry=registry)
    client: TestClient[Any, Any] = await aiohttp_client(app)
    resp = await client.get("/metrics")
    assert resp.status == 200
    found = samples(await resp.text())
    (info,) = found["fleetwatch_build_info"]
    assert info.labels["version"] == __version__
    assert info.labels["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert info.labels["revision"]
    assert info.value == 1
    for name in ("process_resident_memory_bytes", "process_start_time_seconds", "python_info"):
        assert name in found, sorted(found)
    assert any(name.startswith("python_gc_") for name in found)


async def test_both_servers_have_a_landing_page_that_links_their_endpoints(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """Before: the reactor answered 404 at ``/``, the exporter a page without a version."""
    reactor = create_app(
        ReactorSettings(db_path=tmp_path / "state.db"), registry=CollectorRegistry()
    )
    exporter = create_exporter(ExporterSettings(interval=60, timeout=2), run_loop=False)
    for app, name, links in (
        (reactor, "fleetwatch reactor", ["/clusters", "/apps", "/openapi.json"]),
        (exporter, "fleetwatch exporter", ["/sd/control-plane"]),
    ):
        client: TestClient[Any, Any] = await aiohttp_client(app)
        resp = await client.get("/")
        assert resp.status == 200
        assert resp.content_type == "text/html"
        page = await resp.text()
        assert f"{name} {__version__}" in page
        for path in ["/metrics", "/-/healthy", "/-/ready", *links]:
            assert f'href="{path}"' in page, (name, path)
            if path != "/-/ready":  # the exporter is ready after a cycle this test never runs
                assert (await client.get(path)).status == 200, (name, path)


async def test_reactor_basic_auth_guards_every_path_and_the_token_still_guards_mutations(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    web_config = parse_web_config(f"basic_auth_users:\n  prometheus: '{HASH}'\n", base=tmp_path)
    app = create_app(
        ReactorSettings(db_path=tmp_path / "state.db", token=TOKEN), web_config=web_config
    )
    client: TestClient[Any, Any] = await aiohttp_client(app)
    for path in ("/-/healthy", "/-/ready", "/metrics", "/clusters", "/openapi.json"):
        resp = await client.get(path)
        assert resp.status == 401, path
        assert resp.headers["WWW-Authenticate"].startswith("Basic")
        assert (await client.get(path, headers=basic("prometheus", "wrong"))).status == 401
        assert (await client.get(path, headers=basic("prometheus", PASSWORD))).status == 200
    cluster = {"name": "c1", "endpoint": "https://c1:6443", "kubeconfig_secret_ref": "/x"}
    # Basic auth lets a reader in, not a writer: mutations still need the bearer token ...
    resp = await client.post("/clusters", json=cluster, headers=basic("prometheus", PASSWORD))
    assert resp.status == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    # ... which is a credential of its own: Alertmanager sends one Authorization header.
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert (await client.post("/clusters", json=cluster, headers=bearer)).status == 201
    assert (await client.get("/clusters", headers=bearer)).status == 200
    wrong = {"Authorization": "Bearer not-the-token"}
    assert (await client.get("/clusters", headers=wrong)).status == 401


@pytest.mark.live
async def test_exporter_ready_after_its_first_cycle_with_build_info_rendered_per_cycle(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    async with StandinFleet(tmp_path / "fleet") as fleet:
        await fleet.add_cluster("good")
        folder = tmp_path / "kubeconfigs"
        folder.mkdir()
        fleet.write_kubeconfig(folder / "fleet.yaml", ["good"])
        settings = ExporterSettings(kubeconfig_path=None, kubeconfig_dir=folder, timeout=2)
        app = create_exporter(settings, run_loop=False)
        client: TestClient[Any, Any] = await aiohttp_client(app)
        assert (await client.get("/-/healthy")).status == 200
        resp = await client.get("/-/ready")
        assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        first = samples(await (await client.get("/metrics")).text())
        assert first["fleetwatch_build_info"][0].labels["version"] == __version__
        assert "process_cpu_seconds" in first and "python_info" in first  # _total cut
        # Rendered with the cycle, not per scrape: two scrapes in a row are the same bytes.
        one = await (await client.get("/metrics")).read()
        assert one == await (await client.get("/metrics")).read()
        await app[MONITOR].run_cycle()
        assert (await client.get("/-/ready")).status == 200
        after = await (await client.get("/metrics")).read()
        assert after != one and b"fleetwatch_build_info{" in after
        assert after.count(b"# TYPE process_start_time_seconds ") == 1


@pytest.mark.live
async def test_exporter_logs_a_change_of_state_at_info_and_the_rest_at_debug(
    aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with StandinFleet(tmp_path / "fleet") as fleet:
        for name in ("good", "bad"):
            await fleet.add_cluster(name)
        folder = tmp_path / "kubeconfigs"
        folder.mkdir()
        fleet.write_kubeconfig(folder / "fleet.yaml", ["good", "bad"])
        settings = ExporterSettings(kubeconfig_path=None, kubeconfig_dir=folder, timeout=2)
        app = create_exporter(settings, run_loop=False)
        await aiohttp_client(app)
        caplog.set_level(logging.DEBUG, logger="exporter")
        await app[MONITOR].run_cycle()  # both ONLINE: the summary line only
        await fleet.set_mode("bad", "not_ready")
        for _ in range(3):
            await app[MONITOR].run_cycle()
        await fleet.set_mode("bad", "ok")
        await app[MONITOR].run_cycle()

    def lines(name: str, level: int) -> list[str]:
        return [m for r in caplog.records if r.levelno == level and name in (m := r.getMessage())]

    changes = lines("cluster bad", logging.INFO)
    assert len(changes) == 2, changes
    assert "probe failed (not_ready)" in changes[0] and "[1 in a row]" in changes[0]
    assert "probe succeeded again after 3 failures" in changes[1]
    assert len([m for m in lines("cluster bad", logging.DEBUG) if "probe failed" in m]) == 2
    summaries = [r for r in caplog.records if r.getMessage().startswith("cycle ")]
    assert {r.levelname for r in summaries} == {"INFO"} and len(summaries) == 5
    assert not lines("good", logging.INFO)  # discovered at start-up: DEBUG, not a line each
    assert lines("discovered cluster good", logging.DEBUG)


# -- real processes and a real Prometheus ---------------------------------------------


def fleetwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleetwatch.cli", *args]


def _commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every (sub)command path of the parser: ("exporter",), ("cluster", "delete"), ..."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [(*prefix, name), *_commands(sub, (*prefix, name))]
    return found


def test_version_on_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands(build_parser())
    assert ("cluster", "delete") in commands and ("demo", "down") in commands
    for command in commands:
        with pytest.raises(SystemExit) as exited:
            main([*command, "--version"])
        assert exited.value.code in (0, None)
        name = " ".join(command)
        out = capsys.readouterr().out
        assert out.startswith(f"fleetwatch {name}, version {__version__} (revision: "), out


@pytest.mark.parametrize("flag", ["--probe.interval", "--interval"])
def test_demo_spells_the_probe_interval_as_the_exporter_and_keeps_the_old_spelling(
    flag: str,
) -> None:
    args = build_parser().parse_args(["demo", flag, "3.5"])
    assert args.interval == 3.5
    assert build_parser().parse_args(["demo"]).interval == 2.0


#: Every old spelling each (sub)command still takes, hidden, and the flag replacing it.
OLD_SPELLINGS: dict[tuple[str, ...], dict[str, str]] = {
    ("exporter",): {"--kubeconfig-dir": "--kubeconfig.dir"},
    ("discover",): {"--kubeconfig-dir": "--kubeconfig.dir"},
    ("reactor",): {"--kubeconfig-dir": "--kubeconfig.dir"},
    ("status",): {"--token-file": "--web.token-file"},
    ("cluster",): {},
    ("cluster", "delete"): {"--token-file": "--web.token-file"},
    ("cluster", "reset"): {"--token-file": "--web.token-file"},
    ("gate",): {"--token-file": "--web.token-file"},
    ("explain",): {"--token-file": "--web.token-file"},
    ("rules",): {
        "--failure-threshold": "--failure.threshold",
        "--probe-interval": "--probe.interval",
        "--storm-fraction": "--storm.fraction",
        "--storm-min-clusters": "--storm.min-clusters",
        "--exporter-job": "--exporter.job",
    },
    ("demo",): {
        "--interval": "--probe.interval",
        "--failure-threshold": "--failure.threshold",
        "--free-ports": "--web.free-ports",
        "--state-file": "--state.file",
    },
    ("demo", "down"): {"--state-file": "--state.file"},
    ("demo", "up"): {"--state-file": "--state.file"},
}
#: As Prometheus spells its flags: ``--area.name``, dotted, a hyphen only inside a word
#: after the first dot (``--web.listen-address``); ``--no-`` only where argparse makes a
#: switch's negation, as kingpin makes ``--no-web.enable-lifecycle``.
PROMETHEUS_SPELLING = re.compile(r"--[a-z0-9]+(\.[a-z0-9]+(-[a-z0-9]+)*)*")
#: Flags spelled as another tool of the stack spells them, on purpose: the contract names
#: kube-state-metrics' ``--metric-labels-allowlist`` so a user's allowlist reads the same in
#: both (the same grammar, the same ``label_<name>`` series).
BORROWED_SPELLINGS = frozenset({"--metric-labels-allowlist"})
#: What a command needs besides the flag under test (its positional arguments).
POSITIONAL = {("gate",): ["c1"], ("cluster", "delete"): ["c1"], ("cluster", "reset"): ["c1"]}
POSITIONAL |= {("explain",): ["c1"]}
POSITIONAL |= {("demo", "down"): ["demo-001"], ("demo", "up"): ["demo-001"]}


def _path_to(parser: argparse.ArgumentParser, command: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in command:
        parser = subcommand(parser, name)
    return parser


def _argv(command: tuple[str, ...], *flags: tuple[str, str | None]) -> list[str]:
    given = [word for flag, value in flags for word in (flag, value) if word is not None]
    return [*command, *POSITIONAL.get(command, []), *given]


def _value(action: argparse.Action) -> str | None:
    """A value the flag takes, by its type."""
    if action.nargs == 0:
        return None
    by_type: dict[object, str] = {int: "3", float: "0.25", Path: "/some/where"}
    return by_type.get(action.type, "job-x")


def test_every_command_is_in_the_table_of_old_spellings() -> None:
    assert set(_commands(build_parser())) == set(OLD_SPELLINGS)


@pytest.mark.parametrize("command", list(OLD_SPELLINGS), ids=" ".join)
def test_every_flag_shown_is_spelled_as_prometheus_spells_flags(command: tuple[str, ...]) -> None:
    """Before: --kubeconfig-dir, --failure-threshold, --token-file, --storm-fraction, ...
    were shown, beside dotted flags, on the same commands."""
    parser = _path_to(build_parser(), command)
    shown = [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option not in ("--help", "--version")
    ]
    assert shown or command == ("cluster",), command  # `cluster` has only actions
    for option in shown:
        action = parser._option_string_actions[option]
        if isinstance(action, argparse.BooleanOptionalAction) and option.startswith("--no-"):
            option = "--" + option.removeprefix("--no-")
        if option in BORROWED_SPELLINGS:
            continue
        assert PROMETHEUS_SPELLING.fullmatch(option), f"{' '.join(command)} {option}"


@pytest.mark.parametrize("command", list(OLD_SPELLINGS), ids=" ".join)
def test_old_spellings_are_hidden_aliases_on_every_command(command: tuple[str, ...]) -> None:
    parser = _path_to(build_parser(), command)
    assert old_spellings(parser) == OLD_SPELLINGS[command]
    helptext = parser.format_help()
    for old, new in OLD_SPELLINGS[command].items():
        assert new in helptext
        assert not re.search(rf"{re.escape(old)}\b(?![.-])", helptext), (command, old)


ALIASES = [(c, old, new) for c, table in OLD_SPELLINGS.items() for old, new in table.items()]


@pytest.mark.parametrize(
    ("command", "old", "new"), ALIASES, ids=[" ".join((*c, o)) for c, o, _ in ALIASES]
)
def test_an_old_spelling_stores_what_its_flag_stores_and_warns_once(
    command: tuple[str, ...], old: str, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given twice, the old spelling is named once; what it stores is the flag's."""
    parser = build_parser()
    value = _value(_path_to(parser, command)._option_string_actions[new])
    by_new = vars(parser.parse_args(_argv(command, (new, value))))
    by_old = vars(build_parser().parse_args(_argv(command, (old, value), (old, value))))
    assert by_old.pop(USED) == {old: new}
    assert by_old == by_new and USED not in by_new
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # pytest's capture handler among them
    try:
        warn_old_spellings(argparse.Namespace(**{**by_new, USED: {old: new}}))
    finally:
        root.handlers[:], root.level = handlers, level
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "level=warning" in lines[0], lines
    assert f"{old} is deprecated: spell it {new}" in lines[0]


def test_log_flags_are_everywhere_logs_are_written() -> None:
    parser = build_parser()
    for command in ("exporter", "discover", "reactor", "demo"):
        helptext = subcommand(parser, command).format_help()
        assert "--log.level" in helptext and "--log.format" in helptext, command
    args = parser.parse_args(["discover", "--log.format", "json"])
    assert (args.log_level, args.log_format) == ("info", "json")


@pytest.mark.parametrize("command", ["exporter", "discover", "reactor", "demo"])
@pytest.mark.parametrize("spelling", ["warn", "WARN", "warning"])
def test_log_level_warn_is_taken_as_prometheus_spells_it(command: str, spelling: str) -> None:
    """Before: ``--log.level warn`` (Prometheus' spelling) was refused."""
    args = build_parser().parse_args([command, "--log.level", spelling])
    assert args.log_level == "warn"
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # pytest's capture handler among them
    try:
        setup_logging(args.log_level)
        assert root.level == logging.WARNING
    finally:
        root.handlers[:], root.level = handlers, level


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found: argparse.ArgumentParser = choices.choices[name]
    return found


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> FleetCerts:
    return FleetCerts.create(tmp_path_factory.mktemp("pki"))


def web_config_file(root: Path, pki: FleetCerts, client_certs: bool = True) -> Path:
    """A web configuration file: TLS with the server's certificate, client certificates
    required unless ``client_certs`` is False, and basic auth for ``prometheus``."""
    files = pki.files
    tls = {"cert_file": str(files.server_cert), "key_file": str(files.server_key)}
    if client_certs:
        tls["client_auth_type"] = "RequireAndVerifyClientCert"
        tls["client_ca_file"] = str(files.ca_cert)
    path = root / "web.yml"
    users = {"prometheus": HASH}
    path.write_text(yaml.safe_dump({"tls_server_config": tls, "basic_auth_users": users}))
    return path


def get(url: str, ctx: ssl.SSLContext, headers: dict[str, str]) -> tuple[int, str]:
    return fetch(url, headers=headers, context=ctx)


def client_ctx(pki: FleetCerts, with_cert: bool) -> ssl.SSLContext:
    return pki.client_context(with_cert=with_cert)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, pki: FleetCerts) -> Iterator[dict[str, str]]:
    """The exporter and the reactor on HTTPS with basic auth and client certificates."""
    root = tmp_path_factory.mktemp("surface")
    config = web_config_file(root, pki)
    ports = {"exporter": free_port(), "reactor": free_port()}
    procs = [
        ManagedProcess(
            fleetwatch(
                "exporter",
                f"--web.listen-address=127.0.0.1:{ports['exporter']}",
                f"--web.config.file={config}",
                "--kubeconfig=",
                f"--kubeconfig.dir={root}/no-kubeconfigs",
                "--probe.interval=1",
            ),
            root / "exporter.log",
        ),
        ManagedProcess(
            fleetwatch(
                "reactor",
                f"--web.listen-address=127.0.0.1:{ports['reactor']}",
                f"--web.config.file={config}",
                f"--db.path={root}/state.db",
                "--kubeconfig=",
            ),
            root / "reactor.log",
            env={"FLEETWATCH_TOKEN": TOKEN},
        ),
    ]
    urls = {name: f"https://127.0.0.1:{port}" for name, port in ports.items()}
    try:
        for proc in procs:
            proc.start()
        ctx = client_ctx(pki, with_cert=True)
        for name, url in urls.items():
            wait_until(
                lambda url=url: get(f"{url}/-/ready", ctx, basic("prometheus", PASSWORD))[0] == 200,
                timeout=30,
                what=f"{name} ready over HTTPS",
            )
        yield urls
    finally:
        for proc in procs:
            proc.stop()


@pytest.mark.live
def test_both_servers_refuse_a_wrong_password_and_a_missing_client_certificate(
    servers: dict[str, str], pki: FleetCerts
) -> None:
    with_cert = client_ctx(pki, with_cert=True)
    without_cert = client_ctx(pki, with_cert=False)
    for name, url in servers.items():
        status, body = get(f"{url}/metrics", with_cert, basic("prometheus", PASSWORD))
        assert status == 200, (name, body)
        assert "fleetwatch_build_info{" in body and "process_cpu_seconds_total" in body, name
        assert get(f"{url}/metrics", with_cert, basic("prometheus", "wrong"))[0] == 401, name
        assert get(f"{url}/metrics", with_cert, {})[0] == 401, name
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            get(f"{url}/metrics", without_cert, basic("prometheus", PASSWORD))
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # no plain HTTP
            urllib.request.urlopen(url.replace("https", "http") + "/metrics", timeout=5)


@pytest.mark.live
def test_fleetwatch_status_reads_a_reactor_with_basic_auth_through_its_token(
    tmp_path: Path, pki: FleetCerts
) -> None:
    """HTTPS without client certificates: a private CA through $SSL_CERT_FILE, the token."""
    files = pki.files
    config = web_config_file(tmp_path, pki, client_certs=False)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    reactor = ManagedProcess(
        fleetwatch(
            "reactor",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--web.config.file={config}",
            f"--db.path={tmp_path}/state.db",
            "--kubeconfig=",
        ),
        tmp_path / "reactor.log",
        env={"FLEETWATCH_TOKEN": TOKEN},
    )
    with reactor.start():
        ctx = ssl.create_default_context(cafile=str(files.ca_cert))
        wait_until(
            lambda: get(f"{url}/-/ready", ctx, basic("prometheus", PASSWORD))[0] == 200,
            timeout=30,
            what="reactor ready over HTTPS",
        )
        env = {k: v for k, v in os.environ.items() if k != "FLEETWATCH_TOKEN"}
        env["SSL_CERT_FILE"] = str(files.ca_cert)

        def status(**extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                fleetwatch("status", "--reactor", url),
                capture_output=True,
                text=True,
                timeout=60,
                env={**env, **extra},
            )

        refused = status()
        assert refused.returncode == 1 and "Unauthorized" in refused.stderr, refused.stderr
        answered = status(FLEETWATCH_TOKEN=TOKEN)
        assert answered.returncode == 0, answered.stderr
        assert "(no clusters)" in answered.stdout


@pytest.mark.live
def test_prometheus_scrapes_both_over_https_with_basic_auth(
    servers: dict[str, str], pki: FleetCerts, tmp_path: Path
) -> None:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: run scripts/install.sh"
    files = pki.files
    tls = {"ca_file": str(files.ca_cert)}
    client_cert = {"cert_file": str(files.client_cert), "key_file": str(files.client_key)}
    jobs = {
        "good": ({**tls, **client_cert}, PASSWORD),
        "wrong-password": ({**tls, **client_cert}, "wrong"),
        "no-client-cert": (tls, PASSWORD),
    }
    scrape_configs = [
        {
            "job_name": f"{server}-{job}",
            "scheme": "https",
            "tls_config": tls_config,
            "basic_auth": {"username": "prometheus", "password": password},
            "static_configs": [{"targets": [urllib.parse.urlsplit(url).netloc]}],
        }
        for server, url in servers.items()
        for job, (tls_config, password) in jobs.items()
    ]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": scrape_configs})
    )
    port = free_port()
    prom_url = f"http://127.0.0.1:{port}"
    with ManagedProcess(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        tmp_path / "prometheus.log",
        ready_url=f"{prom_url}/-/ready",
    ).start(ready_timeout=30):

        def up() -> dict[str, str] | None:
            query = urllib.parse.urlencode({"query": "up"})
            with urllib.request.urlopen(f"{prom_url}/api/v1/query?{query}", timeout=5) as r:
                result = json.load(r)["data"]["result"]
            found = {s["metric"]["job"]: s["value"][1] for s in result}
            return found if len(found) == len(scrape_configs) else None

        def both_good_up() -> dict[str, str] | None:
            found = up()
            return found if found and found["exporter-good"] == found["reactor-good"] else None

        found = wait_until(both_good_up, timeout=30, what="every job scraped, the good ones up")
        assert found == {
            "exporter-good": "1",
            "exporter-wrong-password": "0",
            "exporter-no-client-cert": "0",
            "reactor-good": "1",
            "reactor-wrong-password": "0",
            "reactor-no-client-cert": "0",
        }
