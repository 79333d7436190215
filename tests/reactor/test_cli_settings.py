"""Flags and environment of `fleetwatch reactor`: flags win, the token file is trimmed."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwatch.cli import build_parser
from fleetwatch.cli.status import render_status
from fleetwatch.common.web import parse_listen_address
from fleetwatch.kube.informer import BESIDE_REQUESTS
from reactor.cd.settings import CdSettings
from reactor.cli import settings_from
from reactor.context import ReactorSettings


def settings(argv: list[str], env: dict[str, str]) -> ReactorSettings:
    return settings_from(build_parser().parse_args(["reactor", *argv]), env)


def test_defaults_and_environment(tmp_path: Path) -> None:
    env = {
        "FLEETWATCH_TOKEN": " from-env\n",
        "KUBECONFIG_PATH": str(tmp_path / "main"),
        "KUBECONFIG_DIR": str(tmp_path / "dir"),
    }
    s = settings([], env)
    assert s.token == "from-env"
    assert s.kubeconfig_path == tmp_path / "main"
    assert s.kubeconfig_dir == tmp_path / "dir"
    assert s.db_path == Path("fleetwatch.db")
    assert s.max_body_bytes == 4 * 1024 * 1024
    assert settings([], {}).token is None


def test_an_empty_kubeconfig_flag_turns_the_main_file_off(tmp_path: Path) -> None:
    # As in the exporter: --kubeconfig= means "none", not the working directory.
    env = {"KUBECONFIG_PATH": str(tmp_path / "main")}
    assert settings(["--kubeconfig="], env).kubeconfig_path is None
    assert settings([f"--kubeconfig={tmp_path / 'k'}"], env).kubeconfig_path == tmp_path / "k"


def test_flags_win_over_the_environment(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("from-file\n")
    env = {"FLEETWATCH_TOKEN": "from-env", "KUBECONFIG_PATH": "/env/main", "KUBECONFIG_DIR": "/env"}
    s = settings(
        [
            f"--web.token-file={token}",
            "--kubeconfig=/flag/main",
            "--kubeconfig.dir=/flag",
            "--web.max-body-bytes=2048",
            "--db.path=/tmp/x.db",
        ],
        env,
    )
    assert s.token == "from-file"
    assert s.kubeconfig_path == Path("/flag/main")
    assert s.kubeconfig_dir == Path("/flag")
    assert s.max_body_bytes == 2048


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--web.token-file=/nonexistent/token"], "No such file"),
        (["--web.max-body-bytes=10"], "at least 1024"),
    ],
)
def test_bad_settings(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings(argv, {})


def test_empty_token_file(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        settings([f"--web.token-file={tmp_path / 't'}"], {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:9714", ("127.0.0.1", 9714)), (":80", (None, 80)), ("[::1]:9", ("::1", 9))],
)
def test_listen_address(text: str, expected: tuple[str | None, int]) -> None:
    """``:PORT`` is every interface (None for aiohttp), as in Prometheus and the exporter."""
    assert parse_listen_address(text) == expected


def test_listen_address_without_port() -> None:
    with pytest.raises(ValueError, match="host:port"):
        parse_listen_address("localhost")


def test_alertmanager_flags() -> None:
    s = settings([], {})
    assert (s.alertmanager_urls, s.reconcile_interval_s, s.min_uptime_s) == ((), 60.0, 300.0)
    s = settings(
        [
            "--alertmanager.url=http://127.0.0.1:9093",
            "--alertmanager.url=https://am2.example:9093",
            "--alertmanager.reconcile-interval=5",
            "--alertmanager.min-uptime=0",
        ],
        {},
    )
    assert s.alertmanager_urls == ("http://127.0.0.1:9093", "https://am2.example:9093")
    assert (s.reconcile_interval_s, s.min_uptime_s) == (5.0, 0.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--alertmanager.url=ftp://u:secret@h"], "must be an http"),
        (["--alertmanager.url=http://u:secret@h:port"], "not a number"),
        (["--alertmanager.reconcile-interval=-1"], r"0 \(off\) or more"),
        (["--alertmanager.min-uptime=-1"], "0 or more"),
    ],
)
def test_bad_alertmanager_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        settings(argv, {})
    assert "secret" not in str(raised.value)
    assert "secret" not in repr(ReactorSettings(alertmanager_urls=("http://u:secret@h:9093",)))


def test_render_status_empty() -> None:
    from datetime import UTC, datetime

    assert render_status([], [], datetime.now(UTC)) == "(no clusters)\n\n(no apps)"


def test_the_paused_column_tells_an_outage_from_a_person_and_never_hides_either() -> None:
    from datetime import UTC, datetime

    from reactor.api.responses import paused_json
    from reactor.statemachine import AppStatus
    from reactor.store import AppRecord

    def app(name: str, paused: bool | None, mark: str | None, source: str = "flux") -> AppRecord:
        return AppRecord(1, name, 1, "c1", AppStatus.DEPLOYED, None, None, source, paused, mark)

    found = {
        "ours": paused_json(app("ours", True, "12")),
        "theirs": paused_json(app("theirs", True, None)),
        "running": paused_json(app("running", False, None)),
        "leftover": paused_json(app("leftover", False, "12")),  # a mark without the pause
        "api": paused_json(app("api", None, None, "api")),
    }
    assert found == {
        "ours": {"by": "outage", "outage": "12"},
        "theirs": {"by": "person"},
        "running": None,
        "leftover": None,
        "api": None,
    }
    apps = [
        {"name": n, "cluster": "c1", "status": "DEPLOYED", "source": "flux", "paused": p}
        for n, p in found.items()
    ]
    lines = render_status([], apps, datetime.now(UTC)).splitlines()
    assert lines[2].split() == ["APP", "CLUSTER", "STATUS", "PAUSED", "SOURCE", "REASON"]
    shown = {line.split()[0]: line.split()[3] for line in lines[3:]}
    assert shown == {
        "ours": "outage:12",
        "theirs": "person",
        "running": "-",
        "leftover": "-",
        "api": "-",
    }


def test_the_discovery_kubernetes_flags_are_the_exporters() -> None:
    assert settings([], {}).kubernetes is None
    s = settings(
        [
            "--discovery.kubernetes",
            "--discovery.kubernetes.kubeconfig=/etc/mgmt.yaml",
            "--discovery.kubernetes.namespace=argocd",
            "--discovery.kubernetes.namespace=fleet",
            "--discovery.kubernetes.label-selector=team in (a,b)",
        ],
        {},
    )
    assert s.kubernetes is not None
    assert s.kubernetes.kubeconfig == "/etc/mgmt.yaml"
    assert s.kubernetes.namespaces == ("argocd", "fleet")
    assert str(s.kubernetes.label_selector) == "team in (a,b)"
    assert s.kubernetes.exec_plugins is False
    # Listed beside the requests it answers: its pages paced, as the CD objects' are.
    assert s.kubernetes.informer == BESIDE_REQUESTS == CdSettings().informer
    assert BESIDE_REQUESTS.list_pause > 0
    # In a discovery process of its own unless told otherwise (reactor.secretlink).
    assert s.discovery_process is True
    inline = settings(["--discovery.kubernetes", "--no-discovery.kubernetes.process"], {})
    assert inline.discovery_process is False
    with pytest.raises(ValueError, match=r"--discovery\.kubernetes\.label-selector: "):
        settings(["--discovery.kubernetes", "--discovery.kubernetes.label-selector=a in"], {})
