"""``featurestore synth mag240m|papers100m|wikikg90mv2 ROOT --scale S``,
``featurestore synth sbm``."""

from __future__ import annotations

import argparse
import time

from featurestore.argtypes import positive_float


def register(subparsers) -> None:
    """Add ``featurestore synth`` and its datasets to the CLI's ``subparsers``."""
    p = subparsers.add_parser(
        "synth", help="write a synthetic dataset: OGB-LSC twins, skewed R-MAT graphs",
        description="Write a synthetic twin of MAG240M or ogbn-papers100M, in the exact layout "
                    "of the official download, or an R-MAT graph with a spec file; streamed "
                    "(a scale larger than RAM works).")
    sub = p.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    for name, helptext in (
            ("mag240m", "ROOT/mag240m_kddcup2021 (meta.pt, split_dict.pt, processed/)"),
            ("papers100m",
             "ROOT/ogbn_papers100M (raw/data.npz, raw/node-label.npz, split/time/)")):
        q = sub.add_parser(name, help=helptext, description=f"Write {helptext}.")
        q.add_argument("root", metavar="ROOT", help="directory to write the dataset folder into")
        q.add_argument("--scale", type=float, default=0.001,
                       help="fraction of the true sizes; 1 = full size (default 0.001)")
        q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        q.add_argument("--labeled-share", type=float, default=None,
                       help="share of nodes with a label (default: as in the true data)")
        q.add_argument("--no-progress", action="store_true", help="no progress bars")
        if name == "papers100m":
            q.add_argument("--compress", action="store_true",
                           help="deflate the .npz members like the official files")
        q.set_defaults(func=_run)
    _register_wikikg(sub)
    q = sub.add_parser(
        "rmat",
        help="ROOT/{edges,feat,label,train,valid,test}.npy + spec.yaml: a skewed R-MAT graph",
        description="Write an R-MAT graph (Graph500: a,b,c,d = 0.57, 0.19, 0.19, 0.05; ids "
                    "scrambled) with features, labels and a clustered train/valid/test split "
                    "into the directory ROOT, with a spec file for "
                    "'featurestore preprocess spec ROOT/spec.yaml STORE'.")
    q.add_argument("root", metavar="ROOT", help="the dataset directory (created)")
    q.add_argument("--scale", type=int, required=True, help="2**SCALE nodes")
    q.add_argument("--edge-factor", type=int, default=16,
                   help="EDGE_FACTOR * 2**SCALE edges drawn (default 16)")
    q.add_argument("--dim", type=int, default=768, help="feature dim (default 768)")
    q.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                   help="feature dtype (default float16)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--classes", type=int, default=16, help="number of label classes (default 16)")
    q.add_argument("--train-share", type=float, default=0.01,
                   help="train split size as a share of the connected nodes (default 0.01; "
                        "valid and test get a quarter of that each)")
    q.add_argument("--no-progress", action="store_true", help="no progress bars")
    q.set_defaults(func=_run_rmat)
    _register_sbm(sub)


def _register_wikikg(sub) -> None:
    q = sub.add_parser(
        "wikikg90mv2", help="ROOT/wikikg90m-v2 (meta.pt, processed/*.npy): a knowledge graph",
        description="Write a synthetic WikiKG90Mv2 in the layout of the official download: "
                    "typed entities with fp16 x 768 features that follow their type, Zipf "
                    "relation frequencies, power-law entity degrees, relation domains and "
                    "ranges; 15,000 / 15,000 / 10,000 evaluation queries at every scale.")
    q.add_argument("root", metavar="ROOT", help="directory to write wikikg90m-v2/ into")
    q.add_argument("--scale", type=positive_float, default=0.001,
                   help="fraction of the true entities and triples (default 0.001)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--no-progress", action="store_true", help="no progress bars")
    q.set_defaults(func=_run_wikikg)


def _run_wikikg(args: argparse.Namespace) -> int:
    from preprocess.synth.wikikg import WikiSynthSpec, synth_wikikg90mv2

    spec = WikiSynthSpec.at_scale(args.scale)
    t = time.perf_counter()
    paths = synth_wikikg90mv2(args.root, args.scale, seed=args.seed, spec=spec,
                              progress=not args.no_progress)
    print(f"wrote {paths.root} in {time.perf_counter() - t:.1f} s: {spec.num_entities:,} "
          f"entities, {spec.num_relations:,} relations, {spec.train:,} triples, "
          f"{spec.feature_bytes / 1e9:.2f} GB of features")
    return 0


def _register_sbm(sub) -> None:
    q = sub.add_parser(
        "sbm", help="ROOT/{edges,block,feat,label,train,valid,test}.npy + spec.yaml: a stochastic "
                    "block model (community structure)",
        description="Write a sparse stochastic block model (BLOCKS communities; link probability "
                    "P_IN inside a block, P_OUT across, or the average degrees) with "
                    "block-correlated labels and features and a uniform train/valid/test split "
                    "into ROOT, with a spec file for 'featurestore preprocess spec "
                    "ROOT/spec.yaml STORE'.")
    q.add_argument("root", metavar="ROOT", help="the dataset directory (created)")
    q.add_argument("--nodes", type=int, default=10_000, help="node count (default 10000)")
    q.add_argument("--blocks", type=int, default=10, help="number of blocks (default 10)")
    q.add_argument("--p-in", type=float, default=None,
                   help="link probability inside a block (instead of --deg-in)")
    q.add_argument("--p-out", type=float, default=None,
                   help="link probability across blocks (instead of --deg-out)")
    q.add_argument("--deg-in", type=float, default=12.0,
                   help="expected degree inside a node's block (default 12)")
    q.add_argument("--deg-out", type=float, default=3.0,
                   help="expected degree outside a node's block (default 3)")
    q.add_argument("--dim", type=int, default=64, help="feature dim (default 64)")
    q.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                   help="feature dtype (default float16)")
    q.add_argument("--classes", type=int, default=None,
                   help="label classes (default: one per block; label = block %% classes)")
    q.add_argument("--label-noise", type=float, default=0.1,
                   help="share of nodes with a random label (default 0.1)")
    q.add_argument("--train-share", type=float, default=0.1,
                   help="train share of the nodes (default 0.1; valid and test a quarter each)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--no-progress", action="store_true", help="no progress bars")
    q.set_defaults(func=_run_sbm)


def _run_sbm(args: argparse.Namespace) -> int:
    from preprocess.errors import BadInputError
    from preprocess.synth.sbm import SbmSpec, synth_sbm

    kw = dict(dim=args.dim, dtype=args.dtype, seed=args.seed, classes=args.classes,
              label_noise=args.label_noise, train_share=args.train_share)
    if (args.p_in is None) != (args.p_out is None):
        raise BadInputError(f"Expected both --p-in and --p-out, or neither. Got --p-in "
                            f"{args.p_in}, --p-out {args.p_out}.")
    if args.p_in is not None:
        spec = SbmSpec.from_probabilities(args.nodes, args.blocks, args.p_in, args.p_out, **kw)
    else:
        spec = SbmSpec(args.nodes, args.blocks, args.deg_in, args.deg_out, **kw)
    t = time.perf_counter()
    res = synth_sbm(args.root, spec, progress=not args.no_progress)
    m = res.meta
    print(f"wrote {res.root} in {time.perf_counter() - t:.1f} s: {m['num_nodes']:,} nodes in "
          f"{spec.blocks} blocks, {m['num_edges_drawn']:,} edges drawn, "
          f"{100 * m['drawn_intra_share']:.1f}% inside blocks, splits {m['splits']}")
    print(f"next: featurestore preprocess spec {res.spec_path} STORE")
    return 0


def _run_rmat(args: argparse.Namespace) -> int:
    from preprocess.synth.rmat import synth_rmat

    t = time.perf_counter()
    res = synth_rmat(args.root, args.scale, args.edge_factor, dim=args.dim, dtype=args.dtype,
                     seed=args.seed, num_classes=args.classes, train_share=args.train_share,
                     progress=not args.no_progress)
    m = res.meta
    print(f"wrote {res.root} in {time.perf_counter() - t:.1f} s: {m['num_nodes']:,} nodes "
          f"({m['connected_nodes']:,} connected), {m['num_edges_drawn']:,} edges drawn, "
          f"top 1% of nodes hold {100 * m['top1pct_degree_share']:.0f}% of the edge ends, "
          f"splits {m['splits']}")
    print(f"next: featurestore preprocess spec {res.spec_path} STORE")
    return 0


def _run(args: argparse.Namespace) -> int:
    from preprocess.synth import synth_mag240m, synth_papers100m

    kw = dict(seed=args.seed, progress=not args.no_progress)
    if args.labeled_share is not None:
        kw["labeled_share"] = args.labeled_share
    t = time.perf_counter()
    if args.dataset == "mag240m":
        paths = synth_mag240m(args.root, args.scale, **kw)
    else:
        paths = synth_papers100m(args.root, args.scale, compress=args.compress, **kw)
    print(f"wrote {paths.root} in {time.perf_counter() - t:.1f} s")
    return 0
