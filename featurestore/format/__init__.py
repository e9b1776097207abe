"""The on-disk format, v1: names and keys, the typed schema, the shard layout, integrity records.

Reader and writer share these modules (``docs/format.md`` is the prose version):

* :mod:`featurestore.format.names`: format name and version, array keys, name rules;
* :mod:`featurestore.format.schema`: :class:`StoreSchema`, the typed root metadata;
* :mod:`featurestore.format.shard`: :class:`ShardLayout`, one shard file per array;
* :mod:`featurestore.format.integrity`: CRC-32 records and the CSC check;
* :mod:`featurestore.format.rowfile`: a v1 row file opened for writing by byte offset.

``featurestore.format.X`` is each name of :mod:`featurestore.format.names`.
"""

from featurestore.format.names import *  # noqa: F401,F403
from featurestore.format.names import __all__  # noqa: F401
