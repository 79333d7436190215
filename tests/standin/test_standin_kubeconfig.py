"""Every credential kind the writer produces is loaded and accepted by the real client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException
from kubernetes.config.kube_config import KubeConfigLoader

from fleetwatch.standin import ThreadedFleet
from fleetwatch.standin.workload.kubeconfig import CREDENTIALS

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def threaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedFleet]:
    with ThreadedFleet(tmp_path_factory.mktemp("kubeconfig") / "fleet") as fleet:
        fleet.add_cluster("alpha")
        fleet.add_cluster("beta")
        yield fleet


def _version(path: Path, context: str) -> str:
    api = kubernetes.config.new_client_from_config(config_file=str(path), context=context)
    try:
        return str(kubernetes.client.VersionApi(api).get_code().git_version)
    finally:
        api.close()


@pytest.mark.parametrize("ca", ["data", "file"])
@pytest.mark.parametrize(
    "credential", [c for c in CREDENTIALS if c not in ("token_file", "insecure")]
)
def test_credential_kind_is_accepted_by_the_kubernetes_client(
    threaded: ThreadedFleet, tmp_path: Path, credential: str, ca: str
) -> None:
    path = threaded.write_kubeconfig(
        tmp_path / "config",
        ["alpha", "beta"],
        credential=credential,
        ca=ca,  # type: ignore[arg-type]
    )
    before = threaded.requests("beta")
    assert _version(path, "beta").startswith("v1.")
    assert threaded.requests("beta") == before + 1


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_insecure_kind_skips_verification_and_uses_a_token(
    threaded: ThreadedFleet, tmp_path: Path
) -> None:
    path = threaded.write_kubeconfig(tmp_path / "config", ["alpha"], credential="insecure")
    cluster = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]
    assert cluster["insecure-skip-tls-verify"] is True
    assert not any(key.startswith("certificate-authority") for key in cluster)
    assert _version(path, "alpha").startswith("v1.")


def test_token_file_ends_with_a_newline_and_works_once_stripped(
    threaded: ThreadedFleet, tmp_path: Path
) -> None:
    """People's token files end in a newline; kubectl strips it, client 37 does not."""
    path = threaded.write_kubeconfig(tmp_path / "config", ["alpha"], credential="token_file")
    user = yaml.safe_load(path.read_text())["users"][0]["user"]
    content = Path(user["tokenFile"]).read_text()
    assert content == threaded.cluster("alpha").token + "\n"
    with pytest.raises(ValueError, match="Invalid header value"):
        _version(path, "alpha")
    configuration = kubernetes.client.Configuration()
    KubeConfigLoader(
        config_dict=yaml.safe_load(path.read_text()), active_context="alpha"
    ).load_and_set(configuration)
    # The loader re-reads the file before every request; strip once and stop that.
    configuration.refresh_api_key_hook = None
    configuration.api_key["BearerToken"] = configuration.api_key["BearerToken"].strip()
    with kubernetes.client.ApiClient(configuration) as api:
        assert kubernetes.client.VersionApi(api).get_code().git_version.startswith("v1.")


def test_wrong_token_is_rejected(threaded: ThreadedFleet, tmp_path: Path) -> None:
    path = threaded.write_kubeconfig(tmp_path / "config", ["alpha"], credential="token")
    document = yaml.safe_load(path.read_text())
    document["users"][0]["user"]["token"] = "not-the-token"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ApiException) as caught:
        _version(path, "alpha")
    assert caught.value.status == 401


def test_one_context_per_cluster_named_after_it(threaded: ThreadedFleet, tmp_path: Path) -> None:
    path = threaded.write_kubeconfig(tmp_path / "config")
    document = yaml.safe_load(path.read_text())
    assert [c["name"] for c in document["contexts"]] == ["alpha", "beta"]
    assert {c["cluster"]["server"] for c in document["clusters"]} == {
        threaded.cluster("alpha").url,
        threaded.cluster("beta").url,
    }
    assert path.stat().st_mode & 0o077 == 0  # credentials inside: owner only


def test_kubeconfig_dir_writes_one_file_per_cluster(
    threaded: ThreadedFleet, tmp_path: Path
) -> None:
    paths = threaded.write_kubeconfig_dir(tmp_path / "kubeconfigs", credential="token")
    assert sorted(p.name for p in paths) == ["alpha.yaml", "beta.yaml"]
    assert sorted(p.name for p in (tmp_path / "kubeconfigs").iterdir()) == [
        "alpha.yaml",
        "beta.yaml",
    ]
    assert _version(paths[0], "alpha").startswith("v1.")


def test_unknown_credential_kind_is_refused(threaded: ThreadedFleet, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown credential kind 'password'"):
        threaded.write_kubeconfig(tmp_path / "config", credential="password")  # type: ignore[arg-type]
    assert not (tmp_path / "config").exists()


def test_each_cluster_gets_its_own_client_certificate(
    threaded: ThreadedFleet, tmp_path: Path
) -> None:
    """``client_cert_data_each``: a key per cluster, so a watcher builds a context per cluster."""
    path = threaded.write_kubeconfig(
        tmp_path / "config", ["alpha", "beta"], credential="client_cert_data_each"
    )
    users = [u["user"] for u in yaml.safe_load(path.read_text())["users"]]
    assert len({u["client-key-data"] for u in users}) == 2
    assert len({u["client-certificate-data"] for u in users}) == 2
