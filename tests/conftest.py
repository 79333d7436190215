"""Shared fixtures. Servers are real and local; see fleetwatch.procs for how they are run."""

from __future__ import annotations
