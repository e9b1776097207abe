"""OGB-LSC ingest: MAG240M and ogbn-papers100M from their official layouts into a store."""
