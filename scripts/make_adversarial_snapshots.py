#!/usr/bin/env python3
"""Writes the crafted snapshots of tests/data/torch_snapshots/adversarial/ (or the folder given).

    scripts/make_adversarial_snapshots.py [OUT_DIR]

Pickles that try to make the snapshot conversion done while parsing (pickle::ListSink) differ
from the conversion after the parse: device lists fetched from the memo or DUP'd before they
fill, read as an entry's frames, put in two places; entries used again after their batch was
dropped, changed after they were read; memo gaps and overwrites; protocol 0/1 APPEND per item;
two devices; the root replaced. SnapshotStreaming.CraftedPicklesConvertAsInTwoPasses replays each
both ways. Cases 02 to 06b differed before the claim refused lists referenced twice.
"""
import gzip
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data', 'torch_snapshots', 'adversarial')


# A pickle written opcode by opcode (protocol 2 unless asked), for what Python's pickler never writes.
class P:
    def __init__(s, proto=2):
        s.b = bytearray(b'\x80' + bytes([proto])) if proto >= 2 else bytearray()
        s.memo = 0
    def op(s, c):
        s.b += c.encode('latin1') if isinstance(c, str) else c; return s
    def str(s, t):
        t = t.encode(); s.b += b'X' + struct.pack('<I', len(t)) + t; return s
    def int(s, v):
        if 0 <= v < 256: s.b += b'K' + bytes([v])
        elif -2**31 <= v < 2**31: s.b += b'J' + struct.pack('<i', v)
        else: s.b += b'\x8a\x08' + struct.pack('<q', v)
        return s
    def put(s):
        s.b += b'r' + struct.pack('<I', s.memo); s.memo += 1; return s.memo - 1
    def putat(s, i):
        s.b += b'r' + struct.pack('<I', i); return s
    def get(s, i):
        s.b += b'j' + struct.pack('<I', i); return s
    def entry(s, action, addr, size, stream=0, frames=None, memo=True):
        s.op('}'); m = s.put() if memo else None
        s.op('(').str('action').str(action).str('addr').int(addr).str('size').int(size).str('stream').int(stream)
        if frames is not None:
            s.str('frames'); frames(s)
        s.op('u'); return m
    def frame(s, fn, line, name):
        s.op('}').op('(').str('filename').str(fn).str('line').int(line).str('name').str(name).op('u'); return s
    def bytes(s): return bytes(s.b)
os.makedirs(OUT, exist_ok=True)


def save(name, b):
    # gzip without a name or time in the header: the same bytes every run
    with open(os.path.join(OUT, name + '.pickle.gz'), 'wb') as f:
        f.write(gzip.compress(b, compresslevel=9, mtime=0))



def head(p, segs=None):
    p.op('}'); p.put(); p.op('(')
    p.str('segments')
    if segs: segs(p)
    else: p.op(']'); p.put()
    p.str('device_traces')
def tail(p, settings=True):
    if settings: p.str('allocator_settings').op('}').put()
    p.op('u').op('.')

def entries(p, n, base=0x7f0000000000, batch=1000, **kw):
    for i in range(n):
        if i % batch == 0: p.op('(')
        p.entry('free_completed' if i % 2 else 'alloc', base + (i // 2) * (1 << 20), 1 << 20, **kw)
        if i % batch == batch - 1 or i == n - 1: p.op('e')

# 1 baseline
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put(); entries(p, 2500); p.op('a'); tail(p); save('01_baseline', p.bytes())

# 2 entry frames = the device list itself (memo ref taken before the list is claimed)
p = P(); head(p); p.op(']'); p.put(); p.op(']'); L = p.put()
p.op('(')
p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: q.get(L))
p.op('}'); p.put(); p.op('(').str('action').str('alloc').str('addr').int(0x7f0000100000).str('size').int(4096).str('stream').int(0)
p.str('filename').str('user.py').str('line').int(7).str('name').str('fn').op('u')
p.op('e').op('a'); tail(p); save('02_self_frames', p.bytes())

# 3 a segment block's frames = the device list (created empty in segments, filled later as the trace)
def segs3(q):
    q.op(']'); q.put(); q.op('(')
    q.op('}'); q.put(); q.op('(').str('device').int(0).str('address').int(0x7e0000000000).str('total_size').int(1 << 21).str('stream').int(0)
    q.str('blocks').op(']'); q.put(); q.op('(')
    q.op('}'); q.put(); q.op('(').str('size').int(1 << 20).str('state').str('active_allocated').str('address').int(0x7e0000000000)
    q.str('frames').op(']'); q.L = q.put()
    q.op('u').op('e').op('u').op('e')
p = P(); head(p, segs3); p.op(']'); p.put(); p.get(p.L)
p.op('(')
p.op('}'); p.put(); p.op('(').str('action').str('alloc').str('addr').int(0x7f0000000000).str('size').int(4096).str('stream').int(0)
p.str('filename').str('user.py').str('line').int(7).str('name').str('fn').op('u')
p.op('e').op('a'); tail(p); save('03_block_frames', p.bytes())

# 4 device_traces = [L, L]: the second copy (DUP before any append) claimed as device 1
p = P(); head(p); p.op(']'); p.put(); p.op('(').op(']').op('2')
p.op('('); p.entry('alloc', 0x7f0000000000, 1 << 20); p.entry('alloc', 0x7f0000100000, 1 << 20); p.op('e')
p.op('e'); tail(p); save('04_dup_device', p.bytes())

# 5 a second 'device_traces' key whose list holds L, built before L was claimed
p = P(); head(p); p.op(']'); p.put(); p.op(']'); L = p.put()
p.op('(').get(L).op('l'); X = p.put(); p.op('0')   # X = [L], popped
entries(p, 10); p.op('a')
p.str('device_traces').get(X)
tail(p); save('05_second_key', p.bytes())

# 6 device 0's entry has frames = L1 (empty, memoized); L1 later filled as device 1's trace with frame dicts
p = P(); head(p); p.op(']'); p.put(); p.op('(')
p.op(']'); p.put(); p.op('(')
p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: (q.op(']'), setattr(q, 'L1', q.put())))
p.entry('alloc', 0x7f0000100000, 1 << 20); p.entry('alloc', 0x7f0000200000, 1 << 20)
p.op('e')
p.get(p.L1).op('('); p.frame('user.py', 9, 'train'); p.op('e')
p.op('e'); tail(p); save('06_frames_is_other_device', p.bytes())

# 6b the same, device 0's entries appended one at a time (APPEND: nothing dropped)
p = P(); head(p); p.op(']'); p.put(); p.op('(')
p.op(']'); p.put()
p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: (q.op(']'), setattr(q, 'L1', q.put()))); p.op('a')
p.entry('alloc', 0x7f0000100000, 1 << 20); p.op('a'); p.entry('alloc', 0x7f0000200000, 1 << 20); p.op('a')
p.get(p.L1).op('('); p.frame('user.py', 9, 'train'); p.op('e')
p.op('e'); tail(p); save('06b_frames_is_other_device_append', p.bytes())

# --- cases expected to hold ---
# 7 entry reused after its batch (restart)
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
ms = []
for i in range(1500):
    if i % 1000 == 0: p.op('(')
    ms.append(p.entry('alloc', 0x7f0000000000 + i * 4096, 4096))
    if i % 1000 == 999 or i == 1499: p.op('e')
p.op('a'); p.str('extra').get(ms[3]); tail(p); save('07_entry_reuse', p.bytes())

# 8 setitem on an entry after APPEND-only
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
e = p.entry('alloc', 0x7f0000000000, 1 << 20); p.op('a')
p.get(e).str('size').int(3 << 20).op('s').op('0'); p.op('a'); tail(p); save('08_setitem_after', p.bytes())

# 9 frames list shared, mutated later (append a py frame)
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
p.op(']'); F = p.put(); p.op('0')
p.op('(')
p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: q.get(F))
p.op('e')
p.get(F); p.frame('user.py', 3, 'g'); p.op('a').op('0')
p.op('a'); tail(p); save('09_frames_mutated', p.bytes())

# 10 frame dict shared, mutated later
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
p.frame('lib.py', 3, 'g'); D = p.put(); p.op('0')
p.op('(')
p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: (q.op('('), q.get(D), q.op('l')))
p.op('e')
p.get(D).str('filename').str('other.py').op('s').op('0')
p.op('a'); tail(p); save('10_frame_dict_mutated', p.bytes())

# 11 claimed list popped, never placed
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put(); entries(p, 20); p.op('0'); p.op(']').op('a'); tail(p); save('11_popped', p.bytes())

# 12 memo gaps + LONG_BINPUT overwrite of key strings
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
p.op('(')
p.op('}'); p.putat(500); p.op('(').str('action'); p.putat(600); p.str('alloc').str('addr').int(0x7f0000000000).str('size').int(4096).str('stream').int(0).op('u')
p.op('e')
p.op('(')
p.op('}').op('(').get(600).str('alloc').str('addr').int(0x7f0000100000).str('size'); p.putat(600); p.int(4096).str('stream').int(0).op('u')
p.op('}').op('(').get(600).int(8192).str('action').str('alloc').str('addr').int(0x7f0000200000).str('stream').int(0).op('u')
p.op('e').op('a'); tail(p); save('12_gaps_overwrite', p.bytes())

# 13 key strings memoized in batch 1, BINGET in batch 2 (memo regular): kept scalars
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
p.op('('); p.op('}'); p.put(); p.op('(')
keys = {}
for k in ['action', 'alloc', 'addr', 'size', 'stream', 'filename']:
    p.str(k); keys[k] = p.put()
p.op('0').op('0').op('0').op('0').op('0').op('0')
p.get(keys['action']).get(keys['alloc']).get(keys['addr']).int(0x7f0000000000).get(keys['size']).int(2**40).get(keys['stream']).int(2**40 + 5).op('u').op('e')
for j in range(3):
    p.op('(')
    p.op('}').op('(').get(keys['action']).get(keys['alloc']).get(keys['addr']).int(0x7f0000100000 + j * 4096).get(keys['size']).int(4096 + j).get(keys['stream']).int(2**40 + 5).op('u')
    p.op('e')
p.op('a'); tail(p); save('13_keys_after_drop', p.bytes())

# 14 two devices, MARK between outer and inner lists, batches in each
p = P(); head(p); p.op(']'); p.put(); p.op('(')
for d, n in ((0, 1500), (1, 2600)):
    p.op(']'); p.put(); entries(p, n, base=0x7f0000000000 + d * (1 << 36))
p.op('e'); tail(p); save('14_two_devices', p.bytes())

# 15 entry shared between two devices (APPEND, no drop)
p = P(); head(p); p.op(']'); p.put(); p.op('(')
p.op(']'); p.put(); e = p.entry('alloc', 0x7f0000000000, 1 << 20); p.op('a')
p.op(']'); p.put(); p.get(e).op('a'); p.entry('alloc', 0x7f0000100000, 1 << 20); p.op('a')
p.op('e'); tail(p); save('15_shared_entry', p.bytes())

# 16 entry of device trace also put into segments? (segments come first) -> entry as block via memo of later... use settings
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
e = p.entry('alloc', 0x7f0000000000, 1 << 20); p.op('a')
p.op('a'); p.str('allocator_settings').get(e).op('u').op('.'); save('16_entry_as_settings', p.bytes())

# 17 root not a dict at the end: a list root built after
p = P(); p.op('}'); p.put(); p.op('(').str('device_traces').op(']'); p.put(); p.op(']'); p.put(); entries(p, 5); p.op('a').op('u')
p.op('0').op(']').op('.'); save('17_root_replaced', p.bytes())

# 18 duplicate 'device_traces' keys, second one a new list
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put(); entries(p, 5); p.op('a')
p.str('device_traces').op(']'); p.put(); p.op(']'); p.put(); entries(p, 3, base=0x7e0000000000); p.op('a')
tail(p); save('18_dup_key', p.bytes())

# 19 duplicate 'device_traces' keys, the second is the first outer via memo
p = P(); head(p); p.op(']'); O = p.put(); p.op(']'); p.put(); entries(p, 5); p.op('a')
p.str('device_traces').get(O); tail(p); save('19_dup_key_same', p.bytes())

# 20 POP_MARK / DUP tricks: DUP of claimed list
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put(); entries(p, 3); p.op('2').op('0'); p.op('a'); tail(p); save('20_dup_claimed', p.bytes())

# 21 entry frames = outer (appended later)
p = P(); head(p); p.op(']'); O = p.put(); p.op(']'); p.put()
p.op('('); p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: q.get(O)); p.op('e'); p.op('a'); tail(p); save('21_frames_outer', p.bytes())

# 22 frames = root dict list... entry frames = [root]
p = P(); head(p); p.op(']'); O = p.put(); p.op(']'); p.put()
p.op('('); p.entry('alloc', 0x7f0000000000, 1 << 20, frames=lambda q: (q.op('('), q.get(0), q.op('l'))); p.op('e'); p.op('a'); tail(p); save('22_frames_root', p.bytes())

# 23 protocol 1 style APPEND per item
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
for i in range(6): p.entry('alloc', 0x7f0000000000 + i * 4096, 4096); p.op('a')
p.op('a'); tail(p); save('23_append_each', p.bytes())

# 24 older container takes a value created inside a batch (not clean)
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put()
p.op('}'); H = p.put(); p.op('0')
p.op('('); p.entry('alloc', 0x7f0000000000, 1 << 20); p.get(H).str('k').op(']').op('s').op('0'); p.op('e')
p.op('('); p.entry('alloc', 0x7f0000100000, 1 << 20); p.op('e')
p.op('a'); p.str('allocator_settings').get(H).op('u').op('.'); save('24_unclean', p.bytes())

# 25 entry in batch appended to older container via memo after drop -> restart
# 26 empty APPENDS on the list first (asked again)
p = P(); head(p); p.op(']'); p.put(); p.op(']'); p.put(); p.op('(').op('e'); entries(p, 5); p.op('a'); tail(p); save('26_empty_appends', p.bytes())
