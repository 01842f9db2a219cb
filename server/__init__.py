"""The HTTP server and the CPython-only helpers around the core (docs/server.md)."""
