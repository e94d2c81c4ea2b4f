#!/usr/bin/python3
"""A pyverbs rdma_cm client/server (python3-pyverbs, unmodified), run by
tests/lib/test_lib_apps_pyverbs.c on the simulated fabric:

    pyverbs_cm.py server ADDR PORT
    pyverbs_cm.py client SRC ADDR PORT

Synchronous CMIDs made from an AddrInfo (rdma_getaddrinfo +
rdma_create_ep): the server listens, takes the request with get_request and
accepts; the client connects. Then: the client SENDs "ping"; the server
answers with the address and rkey of a buffer registered for remote write;
the client RDMA WRITEs a pattern into it and SENDs "done"; the server checks
the pattern and SENDs "bye"; both disconnect. Each side prints what it did,
and "<side> ok" last; any failure raises (exit status 1).
"""
import struct
import sys

from pyverbs.cm_enums import RAI_PASSIVE, RDMA_PS_TCP
from pyverbs.cmid import AddrInfo, CMID, ConnParam
from pyverbs.enums import IBV_QPT_RC, IBV_SEND_SIGNALED, IBV_WC_SUCCESS
from pyverbs.qp import QPCap, QPInitAttr

PATTERN = bytes(range(1, 65))


def qp_attr():
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    return QPInitAttr(qp_type=IBV_QPT_RC, cap=cap, sq_sig_all=1)


def comp(get, what):
    wc = None
    while wc is None:
        wc = get()
    if wc.status != IBV_WC_SUCCESS:
        raise RuntimeError('%s: completion status %d' % (what, wc.status))
    return wc


def say(*a):
    print(*a, flush=True)


def server(addr, port):
    ai = AddrInfo(src=addr, src_service=port, port_space=RDMA_PS_TCP, flags=RAI_PASSIVE)
    sid = CMID(creator=ai, qp_init_attr=qp_attr())
    sid.listen()
    say('server listening on %s:%s' % (addr, port))
    cid = sid.get_request()
    say('server got a request on', cid.dev_name, 'port', cid.port_num)
    rmr = cid.reg_msgs(64)
    smr = cid.reg_msgs(64)
    wmr = cid.reg_write(len(PATTERN))
    cid.post_recv(rmr)
    cid.accept(ConnParam())
    say('server accepted')
    wc = comp(cid.get_recv_comp, 'recv ping')
    msg = rmr.read(wc.byte_len, 0)
    if msg != b'ping':
        raise RuntimeError('server received %r' % msg)
    say('server received', msg.decode())
    cid.post_recv(rmr)
    smr.write(struct.pack('<QI', wmr.buf, wmr.rkey), 12)
    cid.post_send(smr, IBV_SEND_SIGNALED, 12)
    comp(cid.get_send_comp, 'send address')
    wc = comp(cid.get_recv_comp, 'recv done')
    msg = rmr.read(wc.byte_len, 0)
    if msg != b'done':
        raise RuntimeError('server received %r' % msg)
    got = wmr.read(len(PATTERN), 0)
    if got != PATTERN:
        raise RuntimeError('RDMA WRITE: buffer holds %r' % got)
    say('server saw the RDMA WRITE of %d bytes' % len(got))
    smr.write(b'bye', 3)
    cid.post_send(smr, IBV_SEND_SIGNALED, 3)
    comp(cid.get_send_comp, 'send bye')
    cid.disconnect()
    say('server ok')


def client(src, addr, port):
    ai = AddrInfo(src=src, dst=addr, dst_service=port, port_space=RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=qp_attr())
    rmr = cid.reg_msgs(64)
    smr = cid.reg_msgs(64)
    wmr = cid.reg_msgs(len(PATTERN))
    cid.post_recv(rmr)
    cid.connect(ConnParam())
    say('client connected to %s:%s on %s' % (addr, port, cid.dev_name))
    smr.write(b'ping', 4)
    cid.post_send(smr, IBV_SEND_SIGNALED, 4)
    comp(cid.get_send_comp, 'send ping')
    wc = comp(cid.get_recv_comp, 'recv address')
    raddr, rkey = struct.unpack('<QI', rmr.read(wc.byte_len, 0))
    cid.post_recv(rmr)
    wmr.write(PATTERN, len(PATTERN))
    cid.post_write(wmr, len(PATTERN), raddr, rkey, IBV_SEND_SIGNALED)
    comp(cid.get_send_comp, 'RDMA WRITE')
    say('client wrote %d bytes at 0x%x' % (len(PATTERN), raddr))
    smr.write(b'done', 4)
    cid.post_send(smr, IBV_SEND_SIGNALED, 4)
    comp(cid.get_send_comp, 'send done')
    wc = comp(cid.get_recv_comp, 'recv bye')
    if rmr.read(wc.byte_len, 0) != b'bye':
        raise RuntimeError('client: no bye')
    cid.disconnect()
    say('client ok')


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'server':
        server(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == 'client':
        client(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit('usage: pyverbs_cm.py server ADDR PORT | client SRC ADDR PORT')
