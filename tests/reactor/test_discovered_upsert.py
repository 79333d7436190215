"""Discovery's upsert of the clusters its Secrets name, on both stores: new ones inserted
several hundred to a statement, known ones moved, nothing else about them touched."""

from __future__ import annotations

from pathlib import Path

from reactor.service import SOURCE_DISCOVERY, DiscoveredCluster, Service
from reactor.store.sql import INSERT_ROWS
from tests.helpers.reactor_helpers import open_store


def found(i: int, port: int = 6443) -> DiscoveredCluster:
    return DiscoveredCluster(
        f"c{i:04d}", f"https://127.0.0.{1 + i % 200}:{port}", f"secret://argocd/cluster-c{i:04d}"
    )


def test_new_clusters_are_inserted_in_batches_and_known_ones_moved(db_path: Path) -> None:
    store = open_store(db_path)
    service = Service(store)
    try:
        service.add_cluster("c0000", "https://127.0.0.9:6443", "secret://argocd/old")
        many = 2 * INSERT_ROWS + 7  # three statements, the last one short
        assert service.upsert_discovered([found(i) for i in reversed(range(many))]) == (
            many - 1,
            1,
        )
        with store.read() as tx:
            clusters = {c.name: c for c in tx.clusters()}
        assert len(clusters) == many
        for i in range(many):
            c, want = clusters[f"c{i:04d}"], found(i)
            assert (c.endpoint, c.kubeconfig_secret_ref) == (
                want.endpoint,
                want.kubeconfig_secret_ref,
            )
        assert clusters["c0000"].source != SOURCE_DISCOVERY  # added by the API, moved only
        assert {c.source for n, c in clusters.items() if n != "c0000"} == {SOURCE_DISCOVERY}
        # The same Secrets again: nothing to do.
        assert service.upsert_discovered([found(i) for i in range(many)]) == (0, 0)
    finally:
        store.close()
