"""The reactor's database schema, as numbered forward migrations for each store.

Migration ``n`` (1-based) takes a database at version ``n - 1`` to version ``n``; a store
applies the ones its database lacks when it opens, each in its own transaction with the
new version number, so a migration that fails leaves the previous version intact. A
database newer than this code is refused (an older reactor must not write a schema it
does not know). Never edit a migration that has shipped: add the next one.

SQLite keeps the version in ``PRAGMA user_version`` (the first release wrote 1 there);
PostgreSQL in the one-row table ``fleetwatch_schema``, and the migrations run under a
session advisory lock, so replicas that start together migrate once, one after the other.

The two schemas hold the same columns with the same meaning: times are microseconds since
the epoch (written to the millisecond; older rows may hold microseconds, and are read to the
millisecond: ``reactor.store.sql``), alert flags 0/1, statuses their names.

Migration 4 makes room for the apps mirrored from the management cluster's Flux and Argo
CD objects (``reactor.cd``) in the one ``apps`` table, so the cascade's statements move
them with the others unchanged: ``source`` (``api`` for the rows of the API, ``flux`` or
``argocd``), and for a mirrored app the object's ``object_uid`` and what was last seen of
its pause (``paused`` 0/1, ``pause_mark``: fleetwatch's annotation, the outage id it names).
A mirrored app's name is ``SOURCE:KIND/NAMESPACE/NAME`` (``reactor.cd.objects``); the API
refuses to create names with those prefixes, so the two never meet in ``name``'s
uniqueness. None of the new columns is written by a cascade or a deployment, and only
``source`` (never updated) is indexed, so an app's update stays a heap-only tuple on
PostgreSQL.
"""

from __future__ import annotations

#: Key of the PostgreSQL advisory lock held while migrating (any fixed 64-bit number).
MIGRATION_LOCK_KEY = 0x666C656574  # "fleet"

#: Migration 3 of both stores: the same statements read the same on SQLite and PostgreSQL.
INFERRED_RESOLUTIONS = (
    "ALTER TABLE clusters ADD COLUMN online_inferred INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE clusters ADD COLUMN offline_inferred INTEGER NOT NULL DEFAULT 0",
)

#: Migration 5 of both stores: why a cluster has its status (``reactor.reasons``): the
#: last failure reason and class the status alerts told, and what holds its
#: FleetClusterOffline back ("storm_guard", "silence"). Nullable, no default: no rewrite.
CLUSTER_NOTES = (
    "ALTER TABLE clusters ADD COLUMN last_reason TEXT",
    "ALTER TABLE clusters ADD COLUMN last_reason_class TEXT",
    "ALTER TABLE clusters ADD COLUMN offline_held TEXT",
)

SQLITE: tuple[tuple[str, ...], ...] = (
    # 1: the first release
    (
        """CREATE TABLE IF NOT EXISTS clusters (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            endpoint TEXT,
            kubeconfig_secret_ref TEXT,
            source TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'UNKNOWN',
            status_since INTEGER,
            online_firing INTEGER,
            online_starts_at INTEGER,
            online_ends_at INTEGER,
            offline_firing INTEGER,
            offline_starts_at INTEGER,
            offline_ends_at INTEGER,
            was_online INTEGER NOT NULL DEFAULT 0,
            outage_id INTEGER
        )""",
        """CREATE TABLE IF NOT EXISTS outages (
            id INTEGER PRIMARY KEY,
            cluster_id INTEGER NOT NULL REFERENCES clusters(id),
            started_at INTEGER NOT NULL,
            opened_at INTEGER NOT NULL,
            closed_at INTEGER,
            apps_degraded INTEGER NOT NULL DEFAULT 0,
            apps_restored INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE IF NOT EXISTS apps (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            cluster_id INTEGER NOT NULL REFERENCES clusters(id),
            status TEXT NOT NULL,
            reason TEXT,
            outage_id INTEGER REFERENCES outages(id)
        )""",
        "CREATE INDEX IF NOT EXISTS apps_by_cluster_status ON apps (cluster_id, status)",
        "CREATE INDEX IF NOT EXISTS apps_by_outage ON apps (outage_id) WHERE outage_id IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS outages_by_cluster ON outages (cluster_id)",
    ),
    # 2: closed outages found by age, for the retention sweep
    (
        "CREATE INDEX IF NOT EXISTS outages_closed ON outages (closed_at) "
        "WHERE closed_at IS NOT NULL",
    ),
    # 3: a resolution inferred by reconciliation is provisional (reactor.statemachine);
    # every resolution stored before was taken as final, as it was then
    INFERRED_RESOLUTIONS,
    # 4: apps mirrored from Flux and Argo CD objects
    (
        "ALTER TABLE apps ADD COLUMN source TEXT NOT NULL DEFAULT 'api'",
        "ALTER TABLE apps ADD COLUMN object_uid TEXT",
        "ALTER TABLE apps ADD COLUMN paused INTEGER",
        "ALTER TABLE apps ADD COLUMN pause_mark TEXT",
        "CREATE INDEX IF NOT EXISTS apps_mirrored ON apps (source) WHERE source <> 'api'",
    ),
    # 5: the last failure reason and the hold of each cluster
    CLUSTER_NOTES,
)

POSTGRES: tuple[tuple[str, ...], ...] = (
    # 1: the same tables as SQLite's first release, shaped for the cascade. No column a
    # cascade or a deployment writes (status, reason, outage_id) is indexed, and pages are
    # left half empty: the update of an app is then a heap-only tuple, with no new entry
    # in any index (measured in docs/reactor.md, "Running several replicas on PostgreSQL").
    # The apps of a cluster are found by cluster_id, and filtered on the rest. No foreign
    # key on apps.outage_id either: checked row by row it cost a third of a cascade, and
    # the store only ever sets it to the outage it opened in the same transaction.
    (
        """CREATE TABLE clusters (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            endpoint TEXT,
            kubeconfig_secret_ref TEXT,
            source TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'UNKNOWN',
            status_since BIGINT,
            online_firing INTEGER,
            online_starts_at BIGINT,
            online_ends_at BIGINT,
            offline_firing INTEGER,
            offline_starts_at BIGINT,
            offline_ends_at BIGINT,
            was_online INTEGER NOT NULL DEFAULT 0,
            outage_id BIGINT
        )""",
        """CREATE TABLE outages (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            cluster_id BIGINT NOT NULL REFERENCES clusters(id),
            started_at BIGINT NOT NULL,
            opened_at BIGINT NOT NULL,
            closed_at BIGINT,
            apps_degraded INTEGER NOT NULL DEFAULT 0,
            apps_restored INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE apps (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            cluster_id BIGINT NOT NULL REFERENCES clusters(id),
            status TEXT NOT NULL,
            reason TEXT,
            outage_id BIGINT
        ) WITH (fillfactor = 50)""",
        "CREATE INDEX apps_by_cluster ON apps (cluster_id)",
        "CREATE INDEX outages_by_cluster ON outages (cluster_id)",
    ),
    # 2: closed outages found by age, for the retention sweep
    ("CREATE INDEX outages_closed ON outages (closed_at) WHERE closed_at IS NOT NULL",),
    # 3: as SQLite's (a constant default: no table rewrite on PostgreSQL 11 and later)
    INFERRED_RESOLUTIONS,
    # 4: apps mirrored from Flux and Argo CD objects (constant defaults: no table rewrite)
    (
        "ALTER TABLE apps ADD COLUMN source TEXT NOT NULL DEFAULT 'api'",
        "ALTER TABLE apps ADD COLUMN object_uid TEXT",
        "ALTER TABLE apps ADD COLUMN paused INTEGER",
        "ALTER TABLE apps ADD COLUMN pause_mark TEXT",
        "CREATE INDEX apps_mirrored ON apps (source) WHERE source <> 'api'",
    ),
    # 5: as SQLite's
    CLUSTER_NOTES,
)

#: The version this code writes: every store's migrations end there.
VERSION = len(SQLITE)
assert len(POSTGRES) == VERSION, "each store has every migration"
