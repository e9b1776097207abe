"""``featurestore preprocess mag240m|papers100m|wikikg90mv2 ROOT STORE`` (added to
``preprocess``)."""

from __future__ import annotations

from preprocess.cli import add_dask_argument


def register_preprocess(add_command) -> None:
    """Add ``preprocess mag240m``, ``preprocess papers100m`` and ``preprocess wikikg90mv2``."""
    p = add_command("mag240m", "MAG240M (OGB-LSC) in its official layout to a store",
                    "Turn ROOT/mag240m_kddcup2021 (meta.pt, split_dict.pt, processed/) into a "
                    "store: ToUndirected edge types, coalesced; fp16 paper features; labels "
                    "(-1 = none or hidden); splits train, valid, test-dev, test-challenge.")
    p.add_argument("root", metavar="ROOT", help="directory holding mag240m_kddcup2021/")
    p.add_argument("store", metavar="STORE", help="where the store goes")
    p.add_argument("--derive-features", choices=["mean"], default=None,
                   help="author features = mean of their papers', institution = mean of their "
                        "authors' (the OGB baseline's full_feat.npy), out of core")
    add_dask_argument(p)
    p.set_defaults(func=_run_mag)

    q = add_command("papers100m", "ogbn-papers100M in its binary layout to a store",
                    "Turn ROOT/ogbn_papers100M (raw/data.npz, raw/node-label.npz, "
                    "split/time/*.csv.gz) into a store; .npz members are read out of core.")
    q.add_argument("root", metavar="ROOT", help="directory holding ogbn_papers100M/")
    q.add_argument("store", metavar="STORE", help="where the store goes")
    q.add_argument("--directed", action="store_true",
                   help="keep citations directed (default: symmetrised, like ToUndirected)")
    q.set_defaults(func=_run_papers)

    w = add_command("wikikg90mv2", "WikiKG90Mv2 (OGB-LSC) in its official layout to a store",
                    "Turn ROOT/wikikg90m-v2 (meta.pt, processed/*.npy) into a store: node "
                    "types entity and relation with their fp16 features, the training "
                    "triples as edges h->t and t->h with a per-edge relation id, edge splits "
                    "train, valid, test-dev, test-challenge.")
    w.add_argument("root", metavar="ROOT", help="directory holding wikikg90m-v2/")
    w.add_argument("store", metavar="STORE", help="where the store goes")
    w.add_argument("--scratch", default=None, metavar="DIR",
                   help="scratch and work files go under DIR (default: inside the store)")
    w.set_defaults(func=_run_wiki)


def _run_mag(args) -> int:
    from preprocess.cli import job_kwargs

    from preprocess.ogb.mag240m import preprocess_mag240m

    from preprocess.dask.run import dask_client

    kw = job_kwargs(args)
    with dask_client(args.dask) as client:
        job = preprocess_mag240m(args.root, args.store, derive_features=args.derive_features,
                                 dask=client, scratch_dir=args.scratch, **kw)
    print(job.plan_text() if args.dry_run else job.summary())
    return 0


def _run_papers(args) -> int:
    from preprocess.cli import job_kwargs

    from preprocess.ogb.papers100m import preprocess_papers100m

    job = preprocess_papers100m(args.root, args.store, directed=args.directed, **job_kwargs(args))
    print(job.plan_text() if args.dry_run else job.summary())
    return 0


def _run_wiki(args) -> int:
    from preprocess.cli import job_kwargs

    from preprocess.ogb.wikikg90mv2 import preprocess_wikikg90mv2

    job = preprocess_wikikg90mv2(args.root, args.store, scratch_dir=args.scratch,
                                 **job_kwargs(args))
    print(job.plan_text() if args.dry_run else job.summary())
    return 0
