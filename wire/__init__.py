"""The wire schema v1 (pydantic only): what the bridge, the service and the replay send."""
