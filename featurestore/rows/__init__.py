"""Row readers: one contract (:class:`RowReader`), one module per backend.

* :class:`LocalRows` (:mod:`featurestore.rows.local`): a local uncompressed shard file.
* :class:`ZarrRows` (:mod:`featurestore.rows.zarr`): anything else, through zarr.

:mod:`featurestore.testing` has the conformance suite a new backend runs.
"""

from .base import ForkSafePool, RowReader
from .local import LocalRows
from .zarr import ZarrRows

__all__ = ["RowReader", "ForkSafePool", "LocalRows", "ZarrRows"]
