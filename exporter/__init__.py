"""fleetwatch exporter."""
