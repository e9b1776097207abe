"""GraphBolt's names over a store: a DGL 2.x script written for ``dgl.graphbolt`` runs on a
store by importing this package as ``gb``.

::

    import loaders.graphbolt as gb                    # was: import dgl.graphbolt as gb
    dataset = gb.BuiltinDataset("ogbn-products").load()   # the store at datasets/ogbn-products
    datapipe = gb.ItemSampler(dataset.tasks[0].train_set, batch_size=1024, shuffle=True)
    datapipe = datapipe.sample_neighbor(dataset.graph, [10, 10, 10])
    datapipe = datapipe.fetch_feature(dataset.feature, node_feature_keys=["feat"])
    for data in gb.DataLoader(datapipe.copy_to("cpu")):
        logits = model(data.blocks, data.node_features["feat"])
        loss = F.cross_entropy(logits, data.labels)

Datasets, tasks, item sets and the feature store are in :mod:`~loaders.graphbolt.dataset` and
:mod:`~loaders.graphbolt.feature`; the datapipe chain, recorded as options rather than run as
torch datapipes, in :mod:`~loaders.graphbolt.pipe`; the loader and its batches in
:mod:`~loaders.graphbolt.loader`, over :class:`loaders.NeighborLoader`. DGL is imported when a
``DataLoader`` is made (the batches carry DGL blocks).
"""

from loaders.graphbolt.dataset import (BuiltinDataset, ItemSet, ItemSetDict, OnDiskDataset,
                                       SamplingGraph, Task)
from loaders.graphbolt.feature import FeatureStore
from loaders.graphbolt.loader import DataLoader, MiniBatch
from loaders.graphbolt.pipe import (SUPPORTED_STEPS, Datapipe, ItemSampler,
                                    UnsupportedDatapipeError)

__all__ = ["OnDiskDataset", "BuiltinDataset", "Task", "ItemSet", "ItemSetDict",
           "SamplingGraph", "FeatureStore", "ItemSampler", "Datapipe", "DataLoader",
           "MiniBatch", "UnsupportedDatapipeError", "SUPPORTED_STEPS"]
