"""Stores away from local disk: locations (any fsspec URL), the node-local range cache,
replication to local disk, the writer lock, and fork safety of remote connections."""
