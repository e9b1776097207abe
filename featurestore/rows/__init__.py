"""Row readers: one contract (:class:`RowReader`), one module per backend.

* :class:`LocalRows` (:mod:`featurestore.rows.local`): a local uncompressed shard file.
* :class:`RangeRows` (:mod:`featurestore.rows.ranges`): a remote uncompressed v1 array, by
  row byte ranges.
* :class:`ZarrRows` (:mod:`featurestore.rows.zarr`): anything else, through zarr.

:mod:`featurestore.testing` has the conformance suite a new backend runs.
"""

from .base import ForkSafePool, RowReader
from .local import LocalRows
from .ranges import RangeRows
from .zarr import ZarrRows

__all__ = ["RowReader", "ForkSafePool", "LocalRows", "RangeRows", "ZarrRows"]
