"""The reactor and Alertmanager: the webhook's signals, and Alertmanager's API as
the reconciliation (``reactor.reconcile``) reads it, with its credentials."""
