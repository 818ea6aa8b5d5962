"""The operator's dashboard at ``/ui/``: server-rendered pages over the store and the
clusters' live state, read-only, behind a token or a session cookie standing for one."""
