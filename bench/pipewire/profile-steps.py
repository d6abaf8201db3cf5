#!/usr/bin/env python3
"""PipeWire's own count of unfinished cycles, per span of time, from `pw-profiler`.

    profile-steps.py record FIFO OUT      # stamps each line of the profiler's log as it arrives
    profile-steps.py count OUT START_NS END_NS [START_NS END_NS ...]

`record` reads pw-profiler's log from FIFO (`pw-profiler -o FIFO`) and writes each cycle's line to
OUT prefixed with the CLOCK_MONOTONIC time it arrived less the quanta of the lines after it in the
same read (the profiler module sends its lines in batches, about every 0.1 s; rtlab's own reader,
crates/rtlab-trace/src/pipewire.rs, stamps them the same way). `count` prints, per span, the
cycles and the unfinished ones: a line where a follower's status (pw-profiler 0.3.65's layout: 4
driver columns, then 8 per follower, the status 7th) is not 3 (finished: 1 is triggered, 2
awake), as pw-top's ERR column and rtlab count.
"""
import os
import sys
import time


def record(fifo, out_path):
    with open(fifo, "rb", buffering=0) as log, open(out_path, "w") as out:
        partial = b""
        while True:
            chunk = log.read(65536)
            if not chunk:
                break
            arrived = time.monotonic_ns()
            partial += chunk
            *lines, partial = partial.split(b"\n")
            stamped = []
            t = arrived
            for line in reversed(lines):
                fields = line.decode(errors="replace").split("\t")
                try:
                    quantum_ns = int(float(fields[3]) * 1000)
                except (IndexError, ValueError):
                    continue
                stamped.append((t, fields))
                t -= quantum_ns
            for t, fields in reversed(stamped):
                out.write("%d\t%s\n" % (t, "\t".join(fields)))
            out.flush()


def unfinished(fields):
    for slot in range(4, len(fields), 8):
        block = fields[slot : slot + 8]
        try:
            int(block[0])
            if int(block[6]) != 3:
                return True
        except (IndexError, ValueError):
            continue
    return False


def count(out_path, spans):
    lines = [line.rstrip("\n").split("\t") for line in open(out_path) if line.strip()]
    for start, end in spans:
        inside = [fields[1:] for fields in lines if start <= int(fields[0]) < end]
        print("%d %d" % (len(inside), sum(1 for fields in inside if unfinished(fields))))


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "count":
        numbers = [int(x) for x in sys.argv[3:]]
        count(sys.argv[2], list(zip(numbers[::2], numbers[1::2])))
    else:
        sys.exit("usage: profile-steps.py record FIFO OUT | count OUT START END ...")
    os._exit(0)
