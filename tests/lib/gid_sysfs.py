#!/usr/bin/python3
"""Compares the drop-in's GID table (ibv_query_gid_table, ibv_query_gid_ex,
through pyverbs) with the /sys/class/infiniband/<dev> tree that
`uscm-sim run --dev-infiniband` writes (docs/sim.md, "Device nodes"): for
each GID index the GID, its type and its netdev. Prints one line per valid
entry ("<index> <gid> <type> <netdev>") and "OK", or the first mismatch
and exits 1. Usage: gid_sysfs.py DEVICE"""
import os
import socket
import sys

import pyverbs.device as d

TYPES = {0: "IB/RoCE v1", 1: "IB/RoCE v1", 2: "RoCE v2"}  # enum ibv_gid_type


def read(path):
    try:
        with open(path) as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def main():
    dev = sys.argv[1]
    port = "/sys/class/infiniband/%s/ports/1" % dev
    ctx = d.Context(name=dev)
    tbl_len = ctx.query_port(1).gid_tbl_len
    valid = {}
    for e in ctx.query_gid_table(tbl_len):
        valid[e.gid_index] = e
    bad = []
    for i in range(tbl_len):
        gid, typ, ndev = (read("%s/gids/%d" % (port, i)),
                          read("%s/gid_attrs/types/%d" % (port, i)),
                          read("%s/gid_attrs/ndevs/%d" % (port, i)))
        e = valid.get(i)
        if e is None:
            if gid != "0000:0000:0000:0000:0000:0000:0000:0000" or typ or ndev:
                bad.append("unused GID %d: sysfs %s %s %s" % (i, gid, typ, ndev))
            continue
        ex = ctx.query_gid_ex(1, i)
        want_ndev = socket.if_indextoname(e.ndev_ifindex) if e.ndev_ifindex else None
        if (gid != e.gid_str() or typ != TYPES[e.gid_type] or ndev != want_ndev or
                ex.gid_str() != e.gid_str() or ex.gid_type != e.gid_type or
                ex.ndev_ifindex != e.ndev_ifindex):
            bad.append("GID %d: verbs %s %s %s, sysfs %s %s %s" %
                       (i, e.gid_str(), TYPES[e.gid_type], want_ndev, gid, typ, ndev))
        print(i, gid, typ, ndev)
    if bad:
        print("\n".join(bad))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
