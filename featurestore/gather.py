"""Row gathers: the names earlier releases exported from here, kept importable.

The tuning constants are copies: set them on :mod:`featurestore.rows.local`.
The readers live in :mod:`featurestore.rows` (one module per backend, one contract in
:mod:`featurestore.rows.base`); validation in :mod:`featurestore.rows.validate`.
"""

from __future__ import annotations

from featurestore.rows.local import (DENSE_SCRATCH_BYTES, READ_PATHS, SCRATCH_BYTES, SPAN_GAP_BYTES,
                         UNCACHED_PATHS, LocalRows, copy_within, plan_spans, read_spans,
                         sort_unique)
from featurestore.rows.zarr import ZarrRows
from featurestore.rows.validate import check_ids, check_out, first_out_of_range

__all__ = ["LocalRows", "ZarrRows", "READ_PATHS", "UNCACHED_PATHS", "check_ids", "check_out",
           "first_out_of_range", "plan_spans", "read_spans", "copy_within", "sort_unique",
           "DENSE_SCRATCH_BYTES", "SCRATCH_BYTES", "SPAN_GAP_BYTES"]
