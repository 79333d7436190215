"""The cascade where deployments happen: Flux and Argo CD objects paused and resumed.

The reactor's apps are rows of its API; most platform teams deploy with Flux or Argo CD
instead. This package mirrors their objects in the management cluster as apps of the
clusters they deploy to, so the state machine's cascade degrades and restores them with
the others, and then makes each object match its app: paused while an outage that
degraded it lasts, resumed when the store restored it (docs/cd.md). The store stays the
one source of truth; nothing here decides what an outage does.

Pure (data in, data out; tested as tables):

- ``objects``: a Flux ``Kustomization``/``HelmRelease`` or Argo CD ``Application`` ->
  identity, destination, pause and fleetwatch's mark;
- ``targets``: a destination -> the store's cluster (by Secret reference, Argo CD name or
  server);
- ``mirror``: the objects vs the store's mirrored rows -> the writes to make (or, in a
  dry run, the rows as they would be);
- ``scope``: which rows a replica may write: those of the kinds it watches, none in a
  dry run (a table);
- ``rules``: the store's view of an app and its object as seen -> pause, resume, drop
  the mark, or nothing (the module docstring is the specification);
- ``patches``: a decision -> the JSON merge patch, with its resourceVersion precondition;
- ``lease``: leader election's rules (who may take the Lease, what is written, how long
  the holder acts), so that of several replicas one acts at a time;
- ``orphans``: which objects fleetwatch paused no cluster of the store holds any more
  (resumed).

I/O (the edges):

- ``storeops``: the mirror's and the rules' store transactions;
- ``mirrorpass``: the mirror's part of a pass (read, plan, write or preview);
  ``unwatched``: the rows of kinds the replica does not watch, counted and named;
- ``kubewrite``: writes to the management cluster's API (aiohttp, beside
  ``fleetwatch.kube.kubeapi``): the patches, the Lease's requests;
- ``election``: the Lease taken, renewed and released, and its metrics;
- ``watch``: the list+watch of the three kinds (``fleetwatch.kube.informer``);
  ``objectchild``, ``objectlink``: that list+watch in a process of the reactor's own,
  and the objects the actuator reads from it (``reactor.childproc``);
- ``actuator``: the loop that runs the mirror and the rules on every change and every
  resync interval, and counts what it did; ``settings``, ``metrics``, ``setup`` (flags,
  metrics, the app's lifecycle).
"""
