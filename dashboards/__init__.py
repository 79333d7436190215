"""fleetwatch's Grafana dashboards (fleet overview, cluster detail, reactor), generated.

The JSON files in this folder are what users import, and they are committed. They are
generated rather than edited by hand because three dashboards with ~60 panels must agree on
many small things that drift when copied: every panel and query points at the
``$datasource`` variable (never a datasource UID), the status colours and names, the
annotations, the links between the dashboards. ``tests/dashboards`` checks that the
committed files equal the generated ones, and runs every query against a real Prometheus.

- ``panels``: panel kinds, queries and the grid, as plain dicts;
- ``status``: how the status contract of ``fleetwatch.common.contract`` looks (colours, words,
alerts);
- ``frame``: variables, annotations and links around the panels of each dashboard;
- ``fleet_overview``, ``cluster_detail``, ``reactor``: one module per dashboard, one
  function per row of panels (the cluster detail's etcd row in ``cluster_etcd``, its
  control-plane row in ``cluster_controlplane``);
- the metric names every query reads come from ``fleetwatch.common.metricnames``;
- ``cli``: ``python -m dashboards`` (``--check``) writes or checks the JSON files.
"""
