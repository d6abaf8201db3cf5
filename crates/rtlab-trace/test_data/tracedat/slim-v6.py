#!/usr/bin/env python3
"""Rewrites a trace-cmd v6 trace.dat into a small fixture with the same events: only the event
formats `rtlab trace analyze` decodes (sched, irq, irq_vectors, the futex syscalls), no ftrace
formats, kallsyms or printk formats, and the data of the buffer with the most data (the instance
`capture.sh` records into) as the top buffer. The ring-buffer pages are copied unchanged.
With MAX_PAGES, only each CPU's first MAX_PAGES pages are kept.
Usage: slim-v6.py IN.dat OUT.dat [MAX_PAGES]"""
import struct, sys

KEEP = {"sched", "irq", "irq_vectors", "syscalls"}
KEEP_SYSCALLS = {"sys_enter_futex", "sys_exit_futex"}

data = open(sys.argv[1], "rb").read()
pos = 0
def take(n):
    global pos
    chunk = data[pos:pos + n]
    pos += n
    return chunk
def u16(): return struct.unpack("<H", take(2))[0]
def u32(): return struct.unpack("<I", take(4))[0]
def u64(): return struct.unpack("<Q", take(8))[0]
def cstring():
    global pos
    end = data.index(b"\0", pos)
    text = data[pos:end]
    pos = end + 1
    return text

assert take(10) == b"\x17\x08\x44tracing" and cstring() == b"6"
endian_long_page = take(6)
page_size = struct.unpack("<I", endian_long_page[2:])[0]
out = bytearray(b"\x17\x08\x44tracing6\0" + endian_long_page)
for label in (b"header_page\0", b"header_event\0"):
    assert take(len(label)) == label
    size = u64()
    out += label + struct.pack("<Q", size) + take(size)
for _ in range(u32()):  # ftrace formats: dropped
    take(u64())
out += struct.pack("<I", 0)
systems = []
for _ in range(u32()):
    name = cstring()
    formats = [take(u64()) for _ in range(u32())]
    if name.decode() in KEEP:
        if name == b"syscalls":
            formats = [f for f in formats if f.split(b"\n")[0].split(b":")[1].strip().decode() in KEEP_SYSCALLS]
        systems.append((name, formats))
out += struct.pack("<I", len(systems))
for name, formats in systems:
    out += name + b"\0" + struct.pack("<I", len(formats))
    for text in formats:
        out += struct.pack("<Q", len(text)) + text
take(u32()); take(u32())  # kallsyms, printk: dropped
out += struct.pack("<I", 0) + struct.pack("<I", 0)
size = u64()
out += struct.pack("<Q", size) + take(size)  # cmdlines
n_cpus = u32()
buffers = []
label = take(10)
if label == b"options  \0":
    while True:
        option = u16()
        if option == 0:
            break
        payload = take(u32())
        if option == 3:
            buffers.append(struct.unpack("<Q", payload[:8])[0])
    label = take(10)
assert label == b"flyrecord\0"
def cpus_at(offset):
    global pos
    pos = offset
    return [(u64(), u64()) for _ in range(n_cpus)]
best = cpus_at(pos)
for offset in buffers:
    pos = offset
    assert take(10) == b"flyrecord\0"
    candidate = cpus_at(pos)
    if sum(s for _, s in candidate) > sum(s for _, s in best):
        best = candidate
out += struct.pack("<I", n_cpus) + b"flyrecord\0"
table_at = len(out)
out += bytes(16 * n_cpus)
max_pages = int(sys.argv[3]) if len(sys.argv) > 3 else None
for cpu, (offset, size) in enumerate(best):
    if max_pages is not None:
        size = min(size, max_pages * page_size)
    out += bytes(-len(out) % page_size)
    struct.pack_into("<QQ", out, table_at + 16 * cpu, len(out), size)
    out += data[offset:offset + size]
open(sys.argv[2], "wb").write(out)
