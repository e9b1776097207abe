"""``featurestore info``, ``verify`` and ``replicate``: the commands of ``featurestore`` itself
(the other packages add theirs as entry points, see :mod:`featurestore.cli`)."""

from __future__ import annotations

import argparse
import json
import sys

from featurestore.argtypes import positive_float, positive_int
from featurestore.format import names as fmt
from featurestore.store import open_store
from featurestore.units import format_size
from featurestore.verify import verify_report


def store_info(url, storage_options=None) -> dict:
    """Schema, counts, dtypes, bytes on disk and provenance of a store, as a dict."""
    s = open_store(url, storage_options=storage_options, allow_incomplete=True)
    try:
        loc = s.loc

        def du(key):
            try:
                return loc.disk_usage(key)
            except FileNotFoundError:
                return 0

        nodes = {}
        for nt in s.node_types:
            spec = s.schema["node_types"][nt]
            nodes[nt] = {
                "num_nodes": s.num_nodes(nt),
                "features": {k: {**v, "bytes": du(fmt.feature_key(nt, k))}
                             for k, v in spec.get("features", {}).items()},
                "values": spec.get("values", {}),
                "bytes": du(fmt.node_group(nt)),
            }
        edges = []
        for e in s.schema["edge_types"]:
            et = fmt.EdgeType(e["src"], e["rel"], e["dst"])
            edges.append({**e, "bytes": du(f"edges/{et.key()}")})
        return {"url": s.url, "format": s.attrs.get("format"),
                "format_version": s.attrs.get("format_version"), "complete": s.complete,
                "node_types": nodes, "edge_types": edges,
                "splits": s.schema.get("splits", {}),
                "edge_splits": s.schema.get("edge_splits", {}), "bytes": du(""),
                "provenance": s.provenance}
    finally:
        s.close()


def _print_info(info: dict, out=None) -> None:
    w = (out or sys.stdout).write
    w(f"store   {info['url']}\n")
    w(f"format  {info['format']} v{info['format_version']}  "
      f"{'complete' if info['complete'] else 'INCOMPLETE'}  "
      f"{format_size(info['bytes'], 1)} on disk\n")
    w("node types:\n")
    for nt, d in info["node_types"].items():
        w(f"  {nt:<16} {d['num_nodes']:>14,} nodes  {format_size(d['bytes'], 1):>10}\n")
        for name, f in d["features"].items():
            w(f"    feature {name:<10} {f['dtype']:>8} x {f['shape']}  {format_size(f['bytes'], 1)}"
              f"{'  compressed' if f.get('compressed') else ''}\n")
        for name, v in d["values"].items():
            w(f"    values  {name:<10} {v['dtype']:>8}\n")
    w("edge types (CSC):\n")
    for e in info["edge_types"]:
        w(f"  ({e['src']}, {e['rel']}, {e['dst']}){'':<4} {e['num_edges']:>14,} edges  "
          f"indices {e.get('indices_dtype', '?')}  {format_size(e['bytes'], 1)}\n")
        for name, f in e.get("features", {}).items():
            w(f"    edge feature {name:<10} {f['dtype']:>8} x {f['shape']}\n")
        for name, v in e.get("values", {}).items():
            w(f"    edge values  {name:<10} {v['dtype']:>8}\n")
    if info["splits"]:
        w("splits:\n")
        for name, per in info["splits"].items():
            w(f"  {name:<16} " + ", ".join(f"{nt}: {c:,}" for nt, c in per.items()) + "\n")
    if info.get("edge_splits"):
        w("edge splits:\n")
        for name, per in info["edge_splits"].items():
            w(f"  {name:<16} " + ", ".join(
                f"{k}: {sp['count']:,} ({', '.join(sp['columns'])})" for k, sp in per.items())
              + "\n")
    if info["provenance"]:
        w("provenance:\n")
        for p in info["provenance"]:
            rest = {k: v for k, v in p.items() if k not in ("step", "time", "tool")}
            w(f"  {p.get('time', '?')}  {p.get('step')}  ({p.get('tool', '')})  "
              f"{json.dumps(rest, default=str)[:300]}\n")


def _cmd_info(args) -> int:
    info = store_info(args.store)
    if args.json:
        json.dump(info, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        _print_info(info)
    return 0


def _cmd_verify(args) -> int:
    rep = verify_report(args.store, data=args.data)
    for n in rep.notes:
        print(f"  note: {n}")
    if rep.problems:
        print(f"{args.store}: {len(rep.problems)} problem(s) found:")
        for p in rep.problems:
            print(f"  - {p}")
        return 1
    what = (f"every byte of {rep.arrays} arrays checked ({format_size(rep.bytes_checked, 1)} "
            "read)" if args.data else f"{rep.arrays} arrays: metadata, sizes, shard indexes, "
            "topology and compressed chunks checked; --data also checks every byte")
    print(f"{args.store}: OK ({what})")
    return 0


def _cmd_replicate(args) -> int:
    from featurestore.remote.replicate import replicate

    opts = json.loads(args.storage_options) if args.storage_options else None
    rep = replicate(args.url, args.local, storage_options=opts, threads=args.threads,
                    part_bytes=int(args.part_mib * (1 << 20)), force=args.force,
                    recheck=args.recheck,
                    progress=False if args.no_progress else None)
    if args.json:
        json.dump(rep.as_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    if rep.up_to_date:
        print(f"{rep.target}: up to date: a finished replica of {rep.source} (generation "
              f"{rep.generation}, {rep.files_total} files in place)")
        return 0
    rate = rep.bytes_copied / rep.seconds if rep.seconds > 0 else 0.0
    print(f"{rep.target}: replica of {rep.source} (generation {rep.generation}): "
          f"{rep.files_copied} of {rep.files_total} files copied "
          f"({format_size(rep.bytes_copied, 1)} in {rep.seconds:.1f} s, "
          f"{format_size(rate, 1)}/s), {rep.files_skipped} already in place; "
          f"{rep.blocks_checked} CRC-32 blocks checked, structure verified")
    for n in rep.notes:
        print(f"  note: {n}")
    return 0


def register(sub) -> None:
    """Add ``info``, ``verify`` and ``replicate`` to the ``featurestore`` parser."""
    p = sub.add_parser("info", help="schema, counts, dtypes, sizes on disk and provenance")
    p.add_argument("store", help="store path or fsspec URL")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("verify", help="check a store's consistency (non-zero exit on problems)")
    p.add_argument("store", help="store path or fsspec URL")
    p.add_argument("--data", action="store_true",
                   help="also read every byte and compare with the checksums the writer recorded")
    p.set_defaults(func=_cmd_verify)
    p = sub.add_parser(
        "replicate", help="copy a (remote) store to a local directory: parallel, resumable, "
        "verified", description="Copies every file of the store at URL into LOCAL, several "
        "byte ranges at once, each file to a temporary name, checked (size, the CRC-32 of "
        "every row block the writer recorded, shard indexes) and renamed into place. A rerun "
        "after a crash copies only the files not yet in place. Readers refuse the replica "
        "until it is whole.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("url", help="source store: path or fsspec URL (s3://, http://, ...)")
    p.add_argument("local", help="target directory (new, empty, or an unfinished replica)")
    p.add_argument("--threads", type=positive_int, default=8, help="copies in flight")
    p.add_argument("--part-mib", type=positive_float, default=32, help="MiB per copy task")
    p.add_argument("--force", action="store_true",
                   help="replace a store of this package found at LOCAL (never other files)")
    p.add_argument("--storage-options", help="fsspec options of the source, as JSON "
                   "(e.g. '{\"endpoint_url\": \"http://...\"}'); AWS_* variables work too")
    p.add_argument("--recheck", action="store_true", help="on a rerun, check the CRC-32s "
                   "of the files already in place and copy the damaged ones again (default: "
                   "their sizes; each was checked before it got its name)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_replicate)
