"""``featurestore info`` and ``featurestore verify``."""

from __future__ import annotations

import json
import sys

from . import format as fmt
from .reader import open_store
from .units import format_size
from .verify import verify_store


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
                "splits": s.schema.get("splits", {}), "bytes": du(""),
                "provenance": s.provenance}
    finally:
        s.close()


def _print_info(info: dict, out=None) -> None:
    w = (out or sys.stdout).write
    w(f"store   {info['url']}\n")
    w(f"format  {info['format']} v{info['format_version']}  "
      f"{'complete' if info['complete'] else 'INCOMPLETE'}  {format_size(info['bytes'], 1)} on disk\n")
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
    if info["splits"]:
        w("splits:\n")
        for name, per in info["splits"].items():
            w(f"  {name:<16} " + ", ".join(f"{nt}: {c:,}" for nt, c in per.items()) + "\n")
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
    problems = verify_store(args.store)
    if problems:
        print(f"{args.store}: {len(problems)} problem(s) found:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"{args.store}: OK")
    return 0


def register(sub) -> None:
    p = sub.add_parser("info", help="schema, counts, dtypes, sizes on disk and provenance")
    p.add_argument("store", help="store path or fsspec URL")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("verify", help="check a store's consistency (non-zero exit on problems)")
    p.add_argument("store", help="store path or fsspec URL")
    p.set_defaults(func=_cmd_verify)
