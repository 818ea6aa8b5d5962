"""The service's HTTP API. ``schemas`` is the wire format and imports only pydantic, so
the bridge and the replay driver can use it without the service's heavy dependencies."""
