"""The loader's memory: the budget, the plan of every byte in it, the feature cache, and the
access traces that rank the cache's rows."""
