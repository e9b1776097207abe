"""The streaming neighbour loader: sampling, feature gathering and host-to-device copies
overlapped on threads, with a bounded number of batches in flight.

Stages (one thread each; numba kernels and row reads release the GIL)::

    sample (batch k+2) -> gather (k+1) -> training loop (k)

With a CUDA device the gather stage reads rows chunk by chunk into a ring of two reused,
pinned staging buffers and copies each chunk to the GPU on a side CUDA stream with
``non_blocking=True`` while it gathers the next one; the training loop's stream waits on the
batch's event. Without CUDA, rows are gathered into reused host buffers that are the batch
(a buffer is reused only once nothing refers to it). An exception in a stage is raised in the
training loop (with its original traceback); leaving the loop early (``break``, an
exception, or dropping the iterator) stops and joins every stage thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numba
import numpy as np
import torch

from ._buffers import BufferPool, StagingRing
from .sampler import MiniBatch, NeighborSampler, SampledSubgraph

__all__ = ["NeighborLoader", "LoaderStats", "resolve_input_nodes"]

log = logging.getLogger(__name__)

OUTPUTS = ("raw", "pyg", "dgl")
_POLL_S = 0.05


def resolve_input_nodes(store, input_nodes) -> tuple[str, np.ndarray]:
    """``(seed node type, seed ids)`` from the forms :class:`NeighborLoader` accepts.

    ``("paper", "train")`` (a split), ``("paper", ids)``, ``"train"`` (a split of the only
    node type) or ``ids`` (homogeneous store).
    """
    if isinstance(input_nodes, tuple) and len(input_nodes) == 2 and isinstance(input_nodes[0], str):
        ntype, what = input_nodes
        ids = store.split(what, ntype) if isinstance(what, str) else what
    elif isinstance(input_nodes, str):
        ntype = store._ntype(None)
        ids = store.split(input_nodes, ntype)
    else:
        ntype = store._ntype(None)
        ids = input_nodes
    if isinstance(ids, torch.Tensor):
        ids = ids.numpy()
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        from featurestore.errors import InvalidIdsError
        raise InvalidIdsError(f"Expected 1-D integer input nodes for node type {ntype!r} of "
                              f"{store.url}. Got {ids.dtype} of shape {ids.shape} instead.")
    n = store.num_nodes(ntype)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        from featurestore.errors import IdsOutOfRangeError
        raise IdsOutOfRangeError(f"Expected input nodes in [0, {n}) for node type {ntype!r} of "
                                 f"{store.url}. Got ids in [{ids.min()}, {ids.max()}] instead.")
    return ntype, ids.astype(np.int64, copy=False)


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


@dataclass
class LoaderStats:
    """Seconds each stage spent working, and the training loop spent waiting, since reset.

    ``gather`` includes, with a CUDA device, issuing the copies and waiting for staging
    buffers to come free.

    ``wait`` is the time the training loop blocked in ``next()``: the share of a training
    step spent waiting on data is ``wait / (time of the loop)``.
    """

    batches: int = 0
    sample: float = 0.0
    gather: float = 0.0
    wait: float = 0.0

    def reset(self) -> None:
        self.batches, self.sample, self.gather, self.wait = 0, 0.0, 0.0, 0.0

    def per_batch_ms(self) -> dict[str, float]:
        n = max(self.batches, 1)
        return {k: round(1e3 * getattr(self, k) / n, 2)
                for k in ("sample", "gather", "wait")}


@dataclass
class _Failure:
    """An exception raised in a stage thread, carried to the training loop."""

    exc: BaseException
    stage: str


_DONE = object()


def _on(stream):
    """``torch.cuda.stream(stream)``, or nothing for ``None`` (the CPU path)."""
    return torch.cuda.stream(stream) if stream is not None else _nullcontext()


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@dataclass
class _Ready:
    """A batch whose device copies were issued on a side stream, with the event ending them."""

    batch: Any
    event: Any

    def deliver(self):
        """In the training loop's thread: order its stream after the copies, and tell the
        caching allocator that the batch's tensors are used there (``record_stream``)."""
        if self.event is None:
            return self.batch
        cur = torch.cuda.current_stream()
        cur.wait_event(self.event)
        for t in _cuda_tensors(self.batch):
            t.record_stream(cur)
        return self.batch


def _cuda_tensors(obj, depth: int = 0):
    if depth > 6:
        return
    if isinstance(obj, torch.Tensor):
        if obj.is_cuda:
            yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _cuda_tensors(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _cuda_tensors(v, depth + 1)
    elif isinstance(obj, MiniBatch):
        yield from _cuda_tensors(obj.x, depth + 1)
        yield from _cuda_tensors(obj.y, depth + 1)
    elif hasattr(obj, "stores"):  # PyG Data / HeteroData
        for store in obj.stores:
            yield from _cuda_tensors(dict(store.items()), depth + 1)
    elif hasattr(obj, "ndata") and hasattr(obj, "srcdata"):  # a DGL graph or block
        for frame in (obj.srcdata, obj.dstdata, obj.edata):
            try:
                yield from _cuda_tensors(dict(frame), depth + 1)
            except Exception:  # noqa: BLE001 - heterogeneous frames: skip
                pass


class NeighborLoader:
    """Mini-batches of sampled subgraphs with their features, streamed from a store.

    Parameters
    ----------
    store
        An open :class:`featurestore.Store`.
    input_nodes
        Seeds: ``("paper", "train")``, ``("paper", ids)``, a split name or an id array.
    num_neighbors
        Fanouts per layer (``[15, 10, 5]``), or a dict per edge type / relation name.
    batch_size, shuffle, drop_last
        As in PyTorch's ``DataLoader``; the order of each epoch comes from ``(seed, epoch)``.
    seed
        Seed of the shuffling and of the sampler's draws (``(seed, epoch, batch)``).
    output
        ``"raw"`` (:class:`~loaders.sampler.MiniBatch`), ``"pyg"`` (``Data``/``HeteroData``)
        or ``"dgl"`` (``(input_nodes, output_nodes, blocks)``, needs DGL).
    device
        Where features, labels and edges go; default ``"cuda"`` when available, else ``"cpu"``.
    prefetch
        Batches each stage may hold ahead of the training loop.
    num_threads
        numba threads for sampling and gathering (default: numba's setting).
    replace
        Sample neighbours with replacement.
    feature
        Name of the feature to gather per node type (types without it get none).
    labels
        Attach the seeds' labels (store value ``label`` of the seed type) when present.
    staging_bytes
        Rows are gathered in chunks of this size. With a CUDA device each chunk goes through
        one of two pinned staging buffers to the GPU, so host memory for features stays
        bounded however large a batch is; on the CPU the chunks bound the reader's scratch
        memory.
    topology
        ``"mmap"`` (default: the store's CSC arrays memory-mapped) or ``"memory"`` (copied
        into the process, for tight memory budgets where feature reads would evict them).
    rank, world_size
        Data-parallel training (DDP): every rank shuffles the inputs alike (same ``seed``)
        and takes its own contiguous share of ``len(inputs) // world_size`` of them, so the
        ranks see disjoint seeds and the same number of batches per epoch.

    Examples
    --------
    >>> loader = NeighborLoader(store, ("paper", "train"), [15, 10, 5], batch_size=1024,
    ...                         shuffle=True, output="pyg", device="cuda")
    >>> for batch in loader:
    ...     out = model(batch.x_dict, batch.edge_index_dict)
    """

    def __init__(self, store, input_nodes, num_neighbors, *, batch_size: int = 1024,
                 shuffle: bool = False, drop_last: bool = False, seed: int = 0,
                 output: str = "raw", device=None, prefetch: int = 2,
                 num_threads: int | None = None, replace: bool = False, feature: str = "feat",
                 labels: bool = True, staging_bytes: int = 64 << 20, topology: str = "mmap",
                 rank: int = 0, world_size: int = 1):
        if output not in OUTPUTS:
            raise ValueError(f"Expected output in {OUTPUTS}. Got {output!r} instead.")
        if not 0 <= rank < world_size:
            raise ValueError(f"Expected 0 <= rank < world_size. Got rank={rank}, "
                             f"world_size={world_size} instead.")
        self.rank, self.world_size = int(rank), int(world_size)
        if batch_size < 1 or prefetch < 1:
            raise ValueError(f"Expected batch_size >= 1 and prefetch >= 1. "
                             f"Got {batch_size} and {prefetch} instead.")
        self.store = store
        self.seed_type, self.input_nodes = resolve_input_nodes(store, input_nodes)
        self.sampler = NeighborSampler(store, num_neighbors, replace=replace,
                                       num_threads=num_threads, topology=topology)
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), shuffle, drop_last
        self.seed, self.output, self.prefetch = int(seed), output, int(prefetch)
        self.num_threads = num_threads
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self.pin = self.device.type == "cuda"
        self.features = {t: store.features(t, feature) for t in store.node_types
                         if feature in store.feature_names(t)}
        self._labels = (store.labels(self.seed_type)
                        if labels and "label" in store.value_names(self.seed_type) else None)
        self._pools = {t: BufferPool(_torch_dtype(f.dtype), f.shape[1:], pin=self.pin)
                       for t, f in self.features.items()}
        self._chunked = False  # tests set it to run the device path's chunking on the CPU
        self._staging = StagingRing(staging_bytes, pin=self.pin)
        self._convert = self._converter(output)
        self.epoch = 0
        self.stats = LoaderStats()

    # -- public --------------------------------------------------------------------------
    def _share(self) -> int:
        """Input nodes this rank sees per epoch (equal on every rank)."""
        return self.input_nodes.shape[0] // self.world_size

    def __len__(self) -> int:
        n, b = self._share(), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its order and draws)."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self.epoch += 1
        return _Pipeline(self, epoch).run()

    def batch_order(self, epoch: int) -> list[np.ndarray]:
        """Positions in ``input_nodes`` of each batch of ``epoch`` (this rank's share)."""
        n = self.input_nodes.shape[0]
        pos = (np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle
               else np.arange(n))
        share = self._share()
        pos = pos[self.rank * share:(self.rank + 1) * share]
        return [pos[i:i + self.batch_size] for i in range(0, len(self) * self.batch_size,
                                                              self.batch_size)]

    # -- stages --------------------------------------------------------------------------
    def _sample(self, epoch: int, k: int, pos: np.ndarray) -> SampledSubgraph:
        return self.sampler.sample(self.input_nodes[pos], self.seed_type, seed=self.seed,
                                   epoch=epoch, batch=k, input_id=pos)

    def _gather(self, sub: SampledSubgraph) -> MiniBatch:
        x = {}
        for t, f in self.features.items():
            ids = sub.node[t]
            buf = self._pools[t].take(ids.shape[0])
            step = max(1, self._staging.chunk_bytes // max(1, f.row_bytes))
            for lo in range(0, ids.shape[0], step):  # chunks bound the reader's scratch memory
                f.gather(ids[lo:lo + step], out=buf[lo:lo + step])
            x[t] = buf
        y = None
        if self._labels is not None:
            y = torch.from_numpy(np.asarray(self._labels[sub.seeds], dtype=np.int64))
            if self.pin:
                y = y.pin_memory()
        return MiniBatch(sub, x, y, torch.device("cpu"))

    def _gather_to_device(self, sub: SampledSubgraph, stream) -> MiniBatch:
        """Gather rows chunk by chunk into a ring of pinned staging buffers and copy each chunk
        to its slice of the device tensor on ``stream`` (non-blocking), so host memory stays at
        ``staging_bytes`` whatever the batch size. ``stream=None`` copies synchronously (the
        CPU path of the same code, used by the tests)."""
        dev = self.device
        ring = self._staging
        x = {}
        for t, f in self.features.items():
            ids = sub.node[t]
            n = ids.shape[0]
            with _on(stream):
                out = torch.empty((n,) + f.shape[1:], dtype=_torch_dtype(f.dtype), device=dev)
            step = max(1, ring.chunk_bytes // max(1, f.row_bytes))
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                buf = ring.next(hi - lo, out.dtype, f.shape[1:])
                f.gather(ids[lo:hi], out=buf)
                with _on(stream):
                    out[lo:hi].copy_(buf, non_blocking=stream is not None)
                    ring.record(stream)
            x[t] = out
        y = None
        if self._labels is not None:
            with _on(stream):
                y = torch.from_numpy(np.asarray(self._labels[sub.seeds], dtype=np.int64)).to(dev)
        mb = MiniBatch(sub, x, y, dev)
        with _on(stream):
            out = self._convert(mb)  # edge tensors go to the device on the side stream too
        ready = None
        if stream is not None:
            ready = torch.cuda.Event()
            ready.record(stream)
        return _Ready(out, ready)

    def _converter(self, output: str) -> Callable[[MiniBatch], Any]:
        if output == "raw":
            return lambda mb: mb
        if output == "pyg":
            from .pyg import to_pyg
            return to_pyg
        try:
            from .dgl import to_dgl
        except ImportError as e:
            raise ImportError("output='dgl' needs DGL (dgl 2.1.0 with torch <= 2.2.1): "
                              "see the README's DGL section for its environment.") from e
        return to_dgl


class _Pipeline:
    """One epoch: the stage threads, their queues, and their shutdown."""

    def __init__(self, loader: NeighborLoader, epoch: int):
        self.loader, self.epoch = loader, epoch
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.cuda = loader.device.type == "cuda"

    # a put that gives up when the pipeline stops
    def _put(self, q: queue.Queue, item) -> bool:
        while not self.stop.is_set():
            try:
                q.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _get(self, q: queue.Queue):
        while not self.stop.is_set():
            try:
                return q.get(timeout=_POLL_S)
            except queue.Empty:
                continue
        return _DONE

    def _stage(self, name: str, inq, outq, fn):
        stats = self.loader.stats

        def timed(*a):
            t = time.perf_counter()
            out = fn(*a)
            setattr(stats, name, getattr(stats, name) + time.perf_counter() - t)
            return out

        def body():
            if self.loader.num_threads:
                numba.set_num_threads(min(self.loader.num_threads, numba.config.NUMBA_NUM_THREADS))
            try:
                if inq is None:
                    it = fn()
                    while True:
                        t = time.perf_counter()
                        item = next(it, _DONE)
                        stats.sample += time.perf_counter() - t
                        if item is _DONE:
                            break
                        if not self._put(outq, item):
                            return
                    self._put(outq, _DONE)
                    return
                while True:
                    item = self._get(inq)
                    if item is _DONE or isinstance(item, _Failure):
                        self._put(outq, item)
                        return
                    if not self._put(outq, timed(item)):
                        return
            except BaseException as e:  # noqa: BLE001 - carried to the training loop
                self._put(outq, _Failure(e, name))

        t = threading.Thread(target=body, name=f"loader-{name}", daemon=True)
        self.threads.append(t)
        return t

    def run(self) -> Iterator[Any]:
        ld = self.loader
        order = ld.batch_order(self.epoch)
        q_sample = queue.Queue(ld.prefetch)
        q_out = queue.Queue(ld.prefetch)

        def sample_all():
            for k, pos in enumerate(order):
                yield ld._sample(self.epoch, k, pos)

        self._stage("sample", None, q_sample, sample_all)
        if self.cuda or ld._chunked:
            stream = torch.cuda.Stream(ld.device) if self.cuda else None
            self._stage("gather", q_sample, q_out, lambda sub: ld._gather_to_device(sub, stream))
        else:
            self._stage("gather", q_sample, q_out, lambda sub: ld._convert(ld._gather(sub)))
        try:
            for t in self.threads:
                t.start()
            stats = ld.stats
            while True:
                t = time.perf_counter()
                item = self._get(q_out)
                stats.wait += time.perf_counter() - t
                if item is _DONE:
                    return
                if isinstance(item, _Failure):
                    log.debug("loader stage %s failed", item.stage)
                    raise item.exc
                stats.batches += 1
                if isinstance(item, _Ready):
                    item = item.deliver()
                yield item
        finally:
            self.close()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            if t.is_alive() and t is not threading.current_thread():
                t.join()
