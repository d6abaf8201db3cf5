#!/usr/bin/env bash
# The same periodic task set run by rt-app and by `rtlab workload` (which reads rt-app's JSON):
# deadline misses, response-time percentiles and the runner's own CPU cost, alternating runs.
# Run under the shared lock:  flock /work/measure.lock bench/vs-rt-app.sh [SECONDS] [RUNS] [RTLAB]
# Needs root (SCHED_FIFO) and `apt-get install -y rt-app`. Raw output in bench/out/vs-rt-app/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
runs=${2:-2}
rtlab=${3:-target/debug/rtlab}
cpu=$(( $(nproc) - 1 ))
# rt-app's "run" is a loop count from its ns-per-loop calibration; CALIBRATION=N (ns per loop)
# fixes it instead of calibrating at start.
calibration=${CALIBRATION:-"\"CPU$cpu\""}
out=bench/out/vs-rt-app
rm -rf "$out" && mkdir -p "$out"
# 3 threads on one CPU, 1/4/10 ms periods, 25/30/30 % load, rate-monotonic SCHED_FIFO priorities.
cat >"$out/taskset.json" <<JSON
{
  "global": {"duration": $seconds, "default_policy": "SCHED_FIFO", "calibration": $calibration,
             "logdir": "$out", "log_basename": "rt-app", "lock_pages": true},
  "tasks": {
    "t1ms":  {"priority": 50, "cpus": [$cpu], "run": 250,  "timer": {"ref": "t1",  "period": 1000}},
    "t4ms":  {"priority": 40, "cpus": [$cpu], "run": 1200, "timer": {"ref": "t4",  "period": 4000}},
    "t10ms": {"priority": 30, "cpus": [$cpu], "run": 3000, "timer": {"ref": "t10", "period": 10000}}
  }
}
JSON
# The cost task set: the same periods with 10 µs of work, rt-app's calibration given as a number
# (no calibration phase), so the process's CPU time is almost all the runner's own.
sed -e 's/"run": 250/"run": 10/' -e 's/"run": 1200/"run": 10/' -e 's/"run": 3000/"run": 10/' \
    -e "s/\"calibration\": [^,]*,/\"calibration\": 15,/" "$out/taskset.json" >"$out/cost.json"
for run in $(seq 1 "$runs"); do
  mkdir -p "$out/rt-app-$run"
  sed "s|\"logdir\": \"$out\"|\"logdir\": \"$out/rt-app-$run\"|" "$out/taskset.json" >"$out/rt-app-$run/taskset.json"
  /usr/bin/time -f "%e %U %S" -o "$out/rt-app-$run/time" rt-app "$out/rt-app-$run/taskset.json" >"$out/rt-app-$run/stdout" 2>&1
  mkdir -p "$out/rtlab-$run"
  /usr/bin/time -f "%e %U %S" -o "$out/rtlab-$run/time" "$rtlab" workload "$out/taskset.json" \
    --json "$out/rtlab-$run/record.json" --no-store >"$out/rtlab-$run/stdout" 2>&1
  mkdir -p "$out/cost-rt-app-$run" "$out/cost-rtlab-$run"
  sed "s|\"logdir\": \"$out\"|\"logdir\": \"$out/cost-rt-app-$run\"|" "$out/cost.json" >"$out/cost-rt-app-$run/taskset.json"
  /usr/bin/time -f "%e %U %S" -o "$out/cost-rt-app-$run/time" rt-app "$out/cost-rt-app-$run/taskset.json" >"$out/cost-rt-app-$run/stdout" 2>&1
  /usr/bin/time -f "%e %U %S" -o "$out/cost-rtlab-$run/time" "$rtlab" workload "$out/cost.json" \
    --json "$out/cost-rtlab-$run/record.json" --no-store >"$out/cost-rtlab-$run/stdout" 2>&1
done
python3 bench/vs-rt-app-summarise.py "$out" "$runs"
