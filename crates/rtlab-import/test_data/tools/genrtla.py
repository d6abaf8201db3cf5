# Lays real cyclictest histograms out the way `rtla timerlat hist` prints (timerlat_hist.c's printf
# formats): thread 0 as IRQ-000, thread 1 as Thr-000, and the same again for CPU 1, plus over/count/
# min/avg/max rows and an ALL: block. Used because the timerlat tracer is not in this kernel.
import sys
rows = []; maxes = []; overs = []
for line in open(sys.argv[1]):
    if line.startswith('# Max Latencies:'):
        maxes = [int(x) for x in line.split(':')[1].split()]
    if line.startswith('# Histogram Overflows:'):
        overs = [int(x) for x in line.split(':')[1].split()]
    if line.startswith('#') or not line.strip():
        continue
    f = line.split(); rows.append((int(f[0]), [int(x) for x in f[1:3]]))
cols = 4
def col(counts, i): return counts[i % 2]
unit = sys.argv[2] if len(sys.argv) > 2 else 'us'
scale = 1000 if unit == 'ns' else 1
print("# RTLA timerlat histogram")
print("# Time unit is %s (%s)" % ("nanoseconds" if unit == 'ns' else "microseconds", unit))
print("# Duration:   0 00:00:02")
print("Index" + "".join("   %s-%03d" % (k, cpu) for cpu in range(2) for k in ("IRQ", "Thr")))
for bucket, counts in rows:
    if sum(counts) == 0: continue
    print("%-6d" % (bucket * scale) + "".join("%9d " % col(counts, i) for i in range(cols)))
over = [overs[i % 2] for i in range(cols)]
count = [sum(c[i % 2] for _, c in rows) + over[i] for i in range(cols)]
print("over: " + "".join("%9d " % v for v in over))
print("count:" + "".join("%9d " % v for v in count))
mins = [min(b for b, c in rows if c[i % 2]) * scale for i in range(cols)]
print("min:  " + "".join("%9d " % v for v in mins))
avgs = [sum(b * c[i % 2] for b, c in rows) * scale // max(1, count[i]) for i in range(cols)]
print("avg:  " + "".join("%9d " % v for v in avgs))
print("max:  " + "".join("%9d " % (maxes[i % 2] * scale) for i in range(cols)))
print("ALL:        IRQ       Thr")
print("count:%9d %9d " % (count[0] + count[2], count[1] + count[3]))
print("min:  %9d %9d " % (mins[0], mins[1]))
print("avg:  %9d %9d " % (avgs[0], avgs[1]))
print("max:  %9d %9d " % (maxes[0] * scale, maxes[1] * scale))
