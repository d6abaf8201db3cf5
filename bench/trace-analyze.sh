#!/usr/bin/env bash
# `rtlab trace analyze` against `trace-cmd report` on the same trace.dat, alternated, same run:
# wall time and peak memory of each, best of N. Run under the shared lock:
#   flock /work/measure.lock bench/trace-analyze.sh FILE.dat [N]
# FILE.dat: e.g. BUFFER_KB=196608 crates/rtlab-trace/test_data/capture.sh FILE.dat \
#   hackbench -g 2 -l 12500 -T   (about 1.2 million events)
set -euo pipefail
file=$1
runs=${2:-5}
rtlab=${RTLAB:-target/release/rtlab}
events=$(trace-cmd report -i "$file" 2>/dev/null | wc -l)
measure() { # prints "wall_seconds cpu_seconds max_rss_kb"
  /usr/bin/time -f "%e %U+%S %M" "$@" >/dev/null 2>/tmp/trace-analyze-bench.$$ || true
  tail -n 1 /tmp/trace-analyze-bench.$$
}
echo "file: $file ($(stat -c %s "$file") bytes, $events lines of trace-cmd report)"
echo "run  trace-cmd-report-wall-s cpu-s rss-kb  rtlab-analyze-wall-s cpu-s rss-kb"
for run in $(seq 1 "$runs"); do
  read -r report_s report_cpu report_kb < <(measure trace-cmd report -i "$file")
  read -r rtlab_s rtlab_cpu rtlab_kb < <(measure "$rtlab" trace analyze "$file")
  echo "$run  $report_s $report_cpu $report_kb  $rtlab_s $rtlab_cpu $rtlab_kb"
done
rm -f /tmp/trace-analyze-bench.$$
