#!/usr/bin/env python3
"""Writes the malformed trace.dat fixtures in err/ from the captured ones in ok/ (run from this
directory). Each err/NAME.dat has err/NAME.expected: the error rtlab must give, which names the
byte offset and the section."""
import struct

v6 = open("ok/inversion-v6.dat", "rb").read()
v7 = open("ok/inversion-v7-zstd.dat", "rb").read()
def write(name, data):
    open(f"err/{name}.dat", "wb").write(data)

write("bad-magic", b"\x17\x08\x44tracinX" + v7[10:200])
write("bad-version", v7[:10] + b"9\0" + v7[12:200])
write("v6-cut-in-formats", v6[:3000])
write("v7-options-past-end", v7[:40])
# v6: keep the header and one page of CPU 0, with a commit larger than the page.
header_end = v6.index(b"flyrecord\0") + 10
n_cpus = struct.unpack_from("<I", v6, header_end - 14)[0]
offset, _ = struct.unpack_from("<QQ", v6, header_end)
page = bytearray(v6[offset:offset + 4096])
struct.pack_into("<Q", page, 8, 5000)
table = struct.pack("<QQ", offset, 4096) + struct.pack("<QQ", 0, 0) * (n_cpus - 1)
write("v6-commit-beyond-page", v6[:header_end] + table + v6[header_end + 16 * n_cpus:offset] + bytes(page))
# v7 whose first options section claims zstd data that is not zstd.
head = v7[:v7.index(b"zstd\0")] + b"zstd\x001.5.4\0"
section_at = len(head) + 8
section = struct.pack("<HHIQ", 0, 1, 0, 8 + 8) + struct.pack("<II", 8, 100) + b"notzstd!"
write("v7-compressed-section-garbage", head + struct.pack("<Q", section_at) + section)
