"""What every part of fleetwatch shares, defined once.

The exporter, the reactor, the rules, the dashboards and the ``fleetwatch`` command all
import from here, and this package imports none of them (it sits below every other layer,
as ``prometheus/common`` does for Prometheus' components):

- ``fleetwatch.common.contract``: the statuses, their codes, the two status alerts, the storm
guard's
  defaults: the contract between the rules, Alertmanager and the reactor;
- ``fleetwatch.common.web``: ``--web.listen-address`` parsing, one meaning for both servers;
- ``fleetwatch.common.logs``: logging set-up (``--log.level``, ``--log.format``);
- ``fleetwatch.common.flags``: the old spellings of flags, hidden aliases named once by a warning;
- ``fleetwatch.common.version``: the version, build information and the process collectors;
- ``fleetwatch.common.webconfig``: ``--web.config.file`` (its strict parse, TLS followed as
renewed),
  one module for both servers;
- ``fleetwatch.common.basicauth``: the file's ``basic_auth_users`` checked, with a cache of answers.
"""
