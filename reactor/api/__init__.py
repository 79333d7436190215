"""The reactor's HTTP API: its handlers, answers and OpenAPI document, the bearer
token it requires and the health endpoints (the bodies' models are ``reactor.models``)."""
