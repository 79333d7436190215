"""The strict config file: each invalid case paired with its exact message."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.configfile import (
    DEFAULT_ETCD_TIMEOUT_SECONDS,
    ConfigError,
    EtcdConfig,
    ExporterConfig,
    load_config,
)


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    for name in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / name).write_text("not used by the loader\n")
    return tmp_path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleetwatch.yml"
    path.write_text(text)
    return path


def test_full_config_loads_with_relative_paths_resolved(pki: Path) -> None:
    path = write(
        pki,
        """
clusters:
  prod-eu-1:
    etcd:
      endpoints: [https://127.0.0.11:2379, "https://127.0.0.12:2379/"]
      ca_file: ca.crt
      cert_file: client.crt
      key_file: client.key
      timeout_seconds: 2
  dev: {}
""",
    )
    config = load_config(path)
    assert config.etcd_for("prod-eu-1") == EtcdConfig(
        endpoints=("https://127.0.0.11:2379", "https://127.0.0.12:2379"),
        ca_file=pki / "ca.crt",
        cert_file=pki / "client.crt",
        key_file=pki / "client.key",
        timeout_seconds=2.0,
    )
    assert config.etcd_for("dev") is None
    assert config.etcd_for("unknown") is None


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "clusters:\n", "clusters: {}\n"])
def test_empty_configs_are_valid(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)) == ExporterConfig()


def test_plain_http_endpoint_gets_default_timeout(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379']}}}")
    )
    etcd = config.etcd_for("a")
    assert etcd is not None
    assert etcd.timeout_seconds == DEFAULT_ETCD_TIMEOUT_SECONDS
    assert etcd.ca_file is None


INVALID = [
    (
        "clusterz: {}",
        "top level: unknown key 'clusterz' (allowed: clusters)",
    ),
    (
        "clusters: {a: {etcd: {endpoint: ['http://127.0.0.1:2379']}}}",
        "clusters.a.etcd: unknown key 'endpoint' (allowed: endpoints, ca_file, cert_file,"
        " key_file, timeout_seconds)",
    ),
    (
        "clusters: {a: {etcdd: {}}}",
        "clusters.a: unknown key 'etcdd' (allowed: etcd)",
    ),
    ("- a\n- b\n", "top level: must be a mapping, got a list"),
    ("clusters: [a]", "clusters: must be a mapping, got a list"),
    ("clusters: {a: 3}", "clusters.a: must be a mapping, got int"),
    ("clusters: {a: {etcd: }}", "clusters.a.etcd: must be a mapping, got nothing"),
    ("clusters: {1: {}}", "clusters: cluster names must be non-empty strings, got 1"),
    ("clusters: {a: {etcd: {ca_file: ca.crt}}}", "clusters.a.etcd: missing key 'endpoints'"),
    (
        "clusters: {a: {etcd: {endpoints: []}}}",
        "clusters.a.etcd.endpoints: must be a non-empty list of URLs",
    ),
    (
        "clusters: {a: {etcd: {endpoints: 'http://127.0.0.1:2379'}}}",
        "clusters.a.etcd.endpoints: must be a non-empty list of URLs",
    ),
    (
        "clusters: {a: {etcd: {endpoints: [2379]}}}",
        "clusters.a.etcd.endpoints[0]: must be a URL string, got int",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['127.0.0.1:2379']}}}",
        "clusters.a.etcd.endpoints[0]: '127.0.0.1:2379' must start with http:// or https://",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1']}}}",
        "clusters.a.etcd.endpoints[0]: 'http://127.0.0.1' needs a host and a port",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:99999']}}}",
        "clusters.a.etcd.endpoints[0]: 'http://127.0.0.1:99999' is not a valid URL",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379/health']}}}",
        "clusters.a.etcd.endpoints[0]: 'http://127.0.0.1:2379/health' must not have a path,"
        " query or fragment",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['https://root:s3cret@127.0.0.1:2379']}}}",
        "clusters.a.etcd.endpoints[0]: credentials in the URL are not allowed",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379', 'http://127.0.0.1:2379']}}}",
        "clusters.a.etcd.endpoints: the same URL is listed twice",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379', 'https://127.0.0.1:2380']}}}",
        "clusters.a.etcd.endpoints: mixes http and https URLs",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379'], ca_file: ca.crt}}}",
        "clusters.a.etcd.ca_file: TLS files need https endpoints",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['https://127.0.0.1:2379'], cert_file: client.crt}}}",
        "clusters.a.etcd: cert_file and key_file go together; key_file is missing",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['https://127.0.0.1:2379'], key_file: client.key}}}",
        "clusters.a.etcd: cert_file and key_file go together; cert_file is missing",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['https://127.0.0.1:2379'], ca_file: ''}}}",
        "clusters.a.etcd.ca_file: must be a file path",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379'], timeout_seconds: 1}}}",
        "clusters.a.etcd.timeout_seconds: 1 is outside 1.5-60 (etcd's health check blocks"
        " ~1 s without quorum)",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379'], timeout_seconds: 3s}}}",
        "clusters.a.etcd.timeout_seconds: must be a number of seconds",
    ),
    (
        "clusters: {a: {etcd: {endpoints: ['http://127.0.0.1:2379'], timeout_seconds: true}}}",
        "clusters.a.etcd.timeout_seconds: must be a number of seconds",
    ),
    ("clusters:\n  a: {}\n  a: {}\n", "duplicate key 'a' (line 3)"),
    (
        "clusters: {a: [}",
        "not valid YAML (line 1, column 16): expected the node content, but found '}'",
    ),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_config_names_key_and_place(pki: Path, text: str, message: str) -> None:
    path = write(pki, text)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == f"{path}: {message}"


def test_missing_certificate_file_is_named(tmp_path: Path) -> None:
    path = write(
        tmp_path, "clusters: {a: {etcd: {endpoints: ['https://127.0.0.1:2379'], ca_file: ca.crt}}}"
    )
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == (
        f"{path}: clusters.a.etcd.ca_file: {tmp_path / 'ca.crt'} is not a readable file"
    )


def test_missing_config_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yml"
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == f"{path}: cannot read: No such file or directory"


def test_credential_never_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "clusters: {a: {etcd: {endpoints: ['https://u:hunter2@h:1']}}}")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert "hunter2" not in str(exc.value)
