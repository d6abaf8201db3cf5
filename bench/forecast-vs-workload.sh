#!/bin/sh
# Forecast against reality (issue 14, Deliver 6): a buffered workload — a producer of n buffers of
# t, c of CPU per buffer, feeding a device — runs beside a probe thread one priority above it on
# its CPU (so the probe sees what delays the producer but not the producer's own work; measured at
# the same time, in the same record: `probe/wakeup`) while a FIFO
# 40 "staller" takes the CPU for S = 40 ms every 500 ms. For every (n, t, c) it puts the
# underruns the device really had beside what `rtlab forecast` predicts from the probe's series:
# the per-period model (D / MTTF) and the backlog model (backlog_underruns_per_s · D).
# Run as root, under the shared lock:  flock /work/measure.lock bench/forecast-vs-workload.sh
# Output: bench/out/forecast-vs-workload/{*.json,summary.txt}. About 2-3 minutes.
set -eu
RTLAB=${RTLAB:-target/debug/rtlab}
OUT=bench/out/forecast-vs-workload
DURATION=${DURATION:-5s}
CPU=$(( $(nproc) - 1 ))
mkdir -p "$OUT"
for n in 2 3 4; do
  for t_us in 5000 10000; do
    for c_pct in 20 50 80; do
      c_us=$(( t_us * c_pct / 100 ))
      name="n${n}-t${t_us}us-c${c_us}us"
      cat > "$OUT/$name.toml" <<TOML
name = "$name"

[[thread]]
name = "producer"
policy = "fifo"
priority = 20
cpus = "$CPU"
period = "${t_us}us"
work = "${c_us}us"
produces = "card"

[[thread]]
name = "probe"
policy = "fifo"
priority = 21
cpus = "$CPU"
period = "${t_us}us"
offset = "100us"
work = "5us"

[[thread]]
name = "staller"
policy = "fifo"
priority = 40
cpus = "$CPU"
period = "500ms"
offset = "250ms"
work = "40ms"

[[device]]
name = "card"
buffers = $n
period = "${t_us}us"
prefill = $n
TOML
      "$RTLAB" workload "$OUT/$name.toml" -D "$DURATION" --no-store --json "$OUT/$name.json" >/dev/null 2>&1
      "$RTLAB" forecast "$OUT/$name.json" --series probe/wakeup --buffers "$n" \
        --buffer "${t_us}us" --compute "${c_us}us" --json "$OUT/$name.forecast.json" >/dev/null 2>&1 || true
    done
  done
done
python3 "$(dirname "$0")/forecast-vs-workload.py" "$OUT" | tee "$OUT/summary.txt"
