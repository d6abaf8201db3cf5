# Writes an HdrHistogram interval log with the Python reference port (hdrhistogram on PyPI)
# from the real cyclictest histograms in the fixtures (values in ns).
import sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter
rows = []
for line in open(sys.argv[1]):
    if line.startswith('#') or not line.strip():
        continue
    f = line.split()
    rows.append((int(f[0]), [int(x) for x in f[1:]]))
out = open(sys.argv[2], 'w')
w = HistogramLogWriter(out)
out.write("#[StartTime: 1763780000.000 (seconds since epoch), 2025-11-22T03:33:20Z]\n")
w.output_legend()
for interval in range(2):
    h = HdrHistogram(1, 60 * 10**9, 3)
    for bucket, counts in rows:
        c = counts[interval] if interval < len(counts) else 0
        if c:
            h.record_value(bucket * 1000 + 500, c)
    h.set_start_time_stamp(1763780000000 + interval * 1000)
    h.set_end_time_stamp(1763780000000 + (interval + 1) * 1000)
    w.output_interval_histogram(h)
out.close()
print(sum(sum(c) for _, c in rows))
