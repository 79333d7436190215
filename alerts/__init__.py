"""The Prometheus rules' generator, beside the rules it writes.

``fleetwatch.rules.yml`` here is ``fleetwatch rules`` for the defaults; ``rules`` is the
command line and what the rest imports; one module per group of rules (``status``,
``exporter``, ``discovery``, ``sharding``, ``reactor``, ``cd``, ``controlplane``), on the
``model`` and written by ``render``.
"""
