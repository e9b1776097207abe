"""OGB-LSC ingest: MAG240M, ogbn-papers100M and WikiKG90Mv2 from their official layouts into a
store."""
