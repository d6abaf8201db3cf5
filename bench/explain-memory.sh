#!/usr/bin/env bash
# Memory of a long `rtlab run --explain` (BENCHMARKS.md "Long runs: memory"): one run at 1 kHz on
# every CPU with the three default classes, its resident set (VmRSS) sampled every 10 s, and the
# growth per hour fitted (least squares) to the samples after the first minute, when calibration
# and the first episodes are over. Prints the samples, the fit, and the projection for 8 h.
#
# usage: bench/explain-memory.sh [DURATION=10m] [RECORDER=bpf]   (needs root; run under
#        flock /work/measure.lock)
#        RUN_FLAGS="--explain-above 50us" bench/explain-memory.sh …  (extra run flags, e.g. a low
#        fixed threshold, so the episode cap is reached and exercised)
. "$(dirname "$0")/lib.sh"
duration=${1:-10m}
recorder=${2:-bpf}
bench_start explain-memory
"$rtlab" run --explain --explain-recorder "$recorder" --duration "$duration" --no-store ${RUN_FLAGS:-} \
    --json "$out/run.json" > "$out/run.txt" &
pid=$!
start=$(date +%s)
: > "$out/rss.tsv"
while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && printf '%s\t%s\n' "$(( $(date +%s) - start ))" "$rss" >> "$out/rss.tsv"
    sleep 10
done
wait "$pid"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [tuple(map(int, line.split())) for line in open(f"{out}/rss.tsv") if line.strip()]
for seconds, kib in rows:
    print(f"{seconds:5d} s  {kib / 1024:7.1f} MiB")
def fit_line(fit, what):
    n = len(fit)
    if n < 3:
        return
    mean_s = sum(s for s, _ in fit) / n
    mean_k = sum(k for _, k in fit) / n
    slope = sum((s - mean_s) * (k - mean_k) for s, k in fit) / sum((s - mean_s) ** 2 for s, _ in fit)
    last_s, last_k = fit[-1]
    per_hour = slope * 3600 / 1024
    print(f"growth {what}: {per_hour:+.1f} MiB per hour "
          f"(fit over {n} samples, {fit[0][0]}-{last_s} s); "
          f"straight line to 8 h: {(last_k + slope * (8 * 3600 - last_s)) / 1024:.1f} MiB")

# The first fit includes the kept episodes filling up to their caps; the second, over the last
# half of the run, is the steady state once they are full (if they filled: see "not kept").
fit_line([(s, k) for s, k in rows if s >= 60], "after the first minute")
fit_line(rows[len(rows) // 2:], "over the second half")
record = json.load(open(f"{out}/run.json"))
explain = record["config"].get("explain", {})
trace = record["config"].get("explain_trace") or {}
print(f"series {len(record['series'])}, late samples {trace.get('late_samples')}, "
      f"episodes kept {len(record['episodes'])}, not kept {explain.get('episodes_not_kept')}, "
      f"summarised causes {len(explain.get('summarised_causes', []))}, "
      f"recorder {explain.get('recorder')}, lost {explain.get('lost_events')}")
PY
echo "raw: $out"
