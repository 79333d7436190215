"""fleetwatch reactor."""
