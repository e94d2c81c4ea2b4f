#!/usr/bin/python3
"""fidelity.py RUNDIR CHECKS_LIST USCM_DECODE: the CTest test
kernel_wire_fidelity (docs/kernel-tier.md, "Wire fidelity").

Guest K's capture of the link (RUNDIR/K/link.pcap) holds every check's
CM exchange. Each check's part of it is the time from that check's start
in guest K (RUNDIR/checks/NAME/k.start, K's clock, the capture's clock) to
the next one's. For every program, the exchange of its kernel<->kernel
check is the reference: every message uscm took part in (either side uscm)
must carry, field by field, what the kernel's message of the same kind and
direction carries, except what is per connection or per host:

  comm IDs, QPNs, PSNs, GUIDs, addresses (GIDs, the CMA header's ports and
  addresses in the private data), the port in the service ID (each check
  listens on a port of its own), SIDR request IDs, rsockets' buffer
  addresses and rkeys in their connection data, and the TID's upper
  half (ib_umad writes its own there on every request MAD it sends);

and what the kernel derives per connection is checked against its rule,
once the reference itself is seen to follow it:

  TID lower half: a message that starts a transaction (REQ, DREQ, LAP,
  SIDR_REQ) carries its sender's comm ID (request ID) with its bytes in
  reverse order (the kernel's __be32 local ID read as a little-endian
  host's number); every other message the lower half of the transaction
  it answers (REP, RTU, MRA, REJ: the REQ's; DREP: the DREQ's; SIDR_REP:
  the SIDR_REQ's);
  REQ primary flow label on RoCEv2 with IPv4: (source port * 31 +
  destination port) & 0xFFFFF, the ports of the connection (the REQ's
  CMA header and service ID).

Prints one line per check and every difference; exit 0 when there are
none, 1 otherwise, 77 when the boot was skipped.
"""
import json
import os
import subprocess
import sys

# fields that name a connection, a host or a transaction, never compared
PER_CONNECTION = {
    'local_comm_id', 'remote_comm_id', 'local_qpn', 'remote_qpn_eecn', 'qpn',
    'starting_psn', 'local_ca_guid', 'primary_local_gid', 'primary_remote_gid',
    'alternate_local_gid', 'alternate_remote_gid', 'request_id',
    'primary_flow_label',  # the rule below
}
FRAME_PER_HOST = {'frame', 'time', 'src', 'dst'}


def swap32(v):
    return int.from_bytes(v.to_bytes(4, 'big'), 'little')


def cma_masked(pd):
    """Private data with the CMA header's ports and addresses blanked
    (bytes 2..35: source port, source and destination address)."""
    if len(pd) < 72:
        return pd
    return pd[:4] + 'x' * 68 + pd[72:]


# rsockets' connection data (docs/rsockets.md): version, flags, credits,
# the iomap size kept; the target SGL's and the data buffer's address and
# rkey (bytes 8-19 and 24-35) are the process's memory, per connection
RS_PROGRAMS = ('rstream', 'riostream')


def rs_masked(pd, start):
    """pd with rs_conn_data's addresses and keys, at byte start, blanked."""
    pd = pd.ljust(start * 2 + 80, '0')
    for a, b in ((8, 20), (24, 36)):
        pd = pd[:(start + a) * 2] + 'x' * ((b - a) * 2) + pd[(start + b) * 2:]
    return pd.rstrip('0')


def load(decode, pcap):
    out = subprocess.run([decode, '--json', '--abs-time', pcap], capture_output=True,
                         text=True, check=False)
    if out.returncode not in (0, 1):
        sys.exit('uscm-decode %s failed (%d): %s' % (pcap, out.returncode, out.stderr))
    mads = []
    for line in out.stdout.splitlines():
        m = json.loads(line)
        if m.get('class') == 'CM' and m.get('valid', True):
            mads.append(m)
    return mads


def checks_of(listfile):
    rows = []
    with open(listfile) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith('#'):
                continue
            rows.append({'name': w[0], 'app': w[1], 'client': w[2], 'server': w[3]})
    return rows


def exchanges(mads):
    """Groups MADs into connections (by comm IDs) and SIDR transactions
    (by request ID), each a dict: kind, active address, messages in order."""
    conns, by_id, out = [], {}, []
    for m in mads:
        a, msg = m['attr'], m['msg']
        if a == 'SIDR_REQ':
            c = {'kind': 'SIDR', 'active': m['src'], 'id': msg['request_id'], 'msgs': [m],
                 'time': m['time']}
            by_id[('sidr', msg['request_id'], m['src'])] = c
            conns.append(c)
            continue
        if a == 'SIDR_REP':
            c = by_id.get(('sidr', msg['request_id'], m['dst']))
            if c:
                c['msgs'].append(m)
            continue
        if a == 'REQ':
            key = (msg['local_comm_id'], m['src'])
            c = by_id.get(key)
            if c is None:
                c = {'kind': 'CM', 'active': m['src'], 'id': msg['local_comm_id'], 'msgs': [],
                     'time': m['time'], 'port': int(msg['service_id'], 16) & 0xFFFF}
                by_id[key] = c
                conns.append(c)
            c['msgs'].append(m)
            continue
        lc, rc = msg.get('local_comm_id'), msg.get('remote_comm_id')
        c = by_id.get((lc, m['src'])) or by_id.get((rc, m['dst']))
        if c is None:
            continue
        c['msgs'].append(m)
        if lc is not None:
            by_id.setdefault((lc, m['src']), c)
    return conns


def role(c, m):
    return 'active' if m['src'] == c['active'] else 'passive'


def firsts(c):
    """The first message of each kind and direction (retransmissions of
    one message are the same message)."""
    seen = {}
    for m in c['msgs']:
        seen.setdefault((m['attr'], role(c, m)), m)
    return seen


STARTERS = {'REQ': 'local_comm_id', 'DREQ': 'local_comm_id', 'SIDR_REQ': 'request_id',
            'LAP': 'local_comm_id'}


def rule_errors(c):
    errs, started = [], {}
    for m in c['msgs']:
        a, tid_lo = m['attr'], int(m['hdr']['tid'], 16) & 0xFFFFFFFF
        if a in STARTERS:
            # a transaction's first message: its sender's ID, bytes reversed
            want = swap32(m['msg'][STARTERS[a]])
            started[(a, role(c, m))] = tid_lo
            if tid_lo != want:
                errs.append('%s from the %s side: TID lower half 0x%08x, not its sender\'s ID '
                            '0x%08x byte-reversed (0x%08x)' % (a, role(c, m), tid_lo,
                                                               m['msg'][STARTERS[a]], want))
        else:
            # an answer, in the transaction of what it answers
            other = 'passive' if role(c, m) == 'active' else 'active'
            if a == 'DREP':
                want = started.get(('DREQ', other))
            elif a == 'SIDR_REP':
                want = started.get(('SIDR_REQ', other))
            else:  # REP, RTU, MRA, REJ: the connection's REQ
                want = started.get(('REQ', 'active'))
            if want is not None and tid_lo != want:
                errs.append('%s from the %s side: TID lower half 0x%08x, not that of the '
                            'transaction it answers (0x%08x)' % (a, role(c, m), tid_lo, want))
        if a == 'REQ' and m.get('link') == 'rocev2':
            pd = m['msg'].get('private_data', '')
            if len(pd) >= 8 and pd[2:4] == '40':
                sport = int(pd[4:8], 16)
                want = (sport * 31 + c['port']) & 0xFFFFF
                if m['msg']['primary_flow_label'] != want:
                    errs.append('REQ: primary flow label %d, not (%d * 31 + %d) & 0xFFFFF = %d' %
                                (m['msg']['primary_flow_label'], sport, c['port'], want))
    return errs


def field_diffs(ref, got, app=''):
    diffs = []
    for k in sorted(set(ref) | set(got)):
        if k in FRAME_PER_HOST or k == 'diags':
            continue
        a, b = ref.get(k), got.get(k)
        if k == 'hdr':
            a = dict(a or {}, tid=None)
            b = dict(b or {}, tid=None)
        if k == 'msg':
            for f in sorted(set(a or {}) | set(b or {})):
                if f in PER_CONNECTION:
                    continue
                x, y = (a or {}).get(f), (b or {}).get(f)
                if f == 'private_data' and ref.get('attr') in ('REQ', 'SIDR_REQ'):
                    x, y = cma_masked(x or ''), cma_masked(y or '')
                if f == 'private_data' and app in RS_PROGRAMS and ref.get('attr') in ('REQ', 'REP'):
                    start = 36 if ref.get('attr') == 'REQ' else 0
                    x, y = rs_masked(x or '', start), rs_masked(y or '', start)
                if f == 'service_id':  # the port space, not the check's own port
                    x, y = (x and int(x, 16) >> 16), (y and int(y, 16) >> 16)
                if x != y:
                    diffs.append('%s: kernel %s, here %s' % (f, x, y))
            continue
        if a != b:
            diffs.append('%s: kernel %s, here %s' % (k, a, b))
    return diffs


def main():
    run, listfile, decode = sys.argv[1:4]
    if os.path.exists(os.path.join(run, 'skipped')):
        print('[SKIP] kernel_wire_fidelity: ' + open(os.path.join(run, 'skipped')).read().strip())
        return 77
    pcap = os.path.join(run, 'K', 'link.pcap')
    if not os.path.exists(pcap):
        print('fail: no capture %s' % pcap)
        return 1
    rows = checks_of(listfile)
    starts = []
    for r in rows:
        p = os.path.join(run, 'checks', r['name'], 'k.start')
        if os.path.exists(p):
            starts.append((float(open(p).read()), r))
    starts.sort(key=lambda s: s[0])
    conns = exchanges(load(decode, pcap))
    for i, (t0, r) in enumerate(starts):
        t1 = starts[i + 1][0] if i + 1 < len(starts) else float('inf')
        r['conns'] = [c for c in conns if t0 <= c['time'] < t1]

    bad = 0
    refs = {r['app']: r for r in rows
            if r['client'] == 'kernel' and r['server'] == 'kernel' and r.get('conns')}
    # the kernel's rules, seen on its own exchanges first
    for app, r in sorted(refs.items()):
        errs = [e for c in r['conns'] for e in rule_errors(c)]
        if errs:
            bad += 1
            print('fail: %s (the reference) breaks the rules this test checks: the test is wrong'
                  % r['name'])
            for e in sorted(set(errs)):
                print('    ' + e)
    for r in rows:
        if r['server'] == '-' or (r['client'] == 'kernel' and r['server'] == 'kernel'):
            continue
        ref = refs.get(r['app'])
        if ref is None:
            if not r.get('conns'):  # RoCE multicast: no CM message on the link
                print('----: %s: no CM message on the link in its time' % r['name'])
            else:
                print('----: %s: no kernel<->kernel check of %s to compare with'
                      % (r['name'], r['app']))
            continue
        if not r.get('conns'):
            bad += 1
            print('fail: %s: no exchange in the capture in its time' % r['name'])
            continue
        want = firsts(ref['conns'][0])
        errs, compared = [], 0
        for c in r['conns']:
            errs += rule_errors(c)
            for key, m in sorted(firsts(c).items()):
                if key not in want:
                    continue
                compared += 1
                for d in field_diffs(want[key], m, r['app']):
                    errs.append('%s from the %s side: %s' % (key[0], key[1], d))
        errs = sorted(set(errs))
        print('%s: %s (%d exchanges, %d messages compared with %s)' %
              ('fail' if errs else 'pass', r['name'], len(r['conns']), compared, ref['name']))
        for e in errs:
            print('    ' + e)
        bad += bool(errs)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
