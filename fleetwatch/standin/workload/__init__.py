"""The workload clusters' stand-in API servers: a fleet on 127.0.0.1, real TLS.

Test equipment shipped for the demo, and an independent oracle: it imports nothing of
the product's parsers. ``fleetwatch.standin`` re-exports its names.
"""
