"""Row readers: one contract (:class:`RowReader`), one module per backend.

* :class:`LocalRows` (:mod:`featurestore.rows.local`): a local uncompressed shard file.
* :class:`RangeRows` (:mod:`featurestore.rows.ranges`): a remote uncompressed v1 array, by
  row byte ranges.
* :class:`ZarrRows` (:mod:`featurestore.rows.zarr`): anything else, through zarr.

:mod:`featurestore.testing.conformance` has the conformance suite a new backend runs.
"""

from featurestore.rows.base import ForkSafePool, RowReader
from featurestore.rows.local import LocalRows
from featurestore.rows.ranges import RangeRows
from featurestore.rows.zarr import ZarrRows

__all__ = ["RowReader", "ForkSafePool", "LocalRows", "RangeRows", "ZarrRows"]
