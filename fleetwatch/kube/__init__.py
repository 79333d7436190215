"""The Kubernetes API client: its credentials, its requests, a list+watch informer.

Discovery (the management cluster's Secrets) and the reactor's CD integration build on
it; the modules are imported by name.
"""
