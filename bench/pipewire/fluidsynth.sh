#!/bin/bash
# issue 40, item 3: a real instrument. Debian's fluidsynth (TimGM6mb soundfont, drawbar organ:
# one voice a held note, 7-point interpolation) through pw-jack on the private PipeWire of
# server.sh (Dummy-Driver, quantum 128 at 48 kHz), driven through its command shell on stdin,
# its polyphony rising by phases: PHASE_SECONDS each of 4, 32 and 256 held notes. One
# CONDITION a run:
#   idle        fluidsynth alone;
#   competitor  the SCHED_FIFO 95 competitor of the other PipeWire benches (6 ms every 20 ms on
#               every CPU, bursts aligned: -A) through every phase;
#   reserve     `rtlab reserve --auto --comm fluidsynth --observe 3s` made at 4 voices (before
#               the competitor), then the competitor through every phase: what the one-shot
#               sizing misses when polyphony rises (issue 37's case).
# Per phase: `rtlab trace watch --comm fluidsynth` (which judges by PipeWire's cycle and reads
# PipeWire's profiler for the same window) for PHASE_SECONDS - 3 s: PipeWire's unfinished cycles,
# rtlab's misses, their ratio, the late activations during the competitor's bursts naming it and
# those blamed on the hypervisor; fluidsynth's voices (its `voice_count`) and the CPU its
# real-time thread took per activation (/proc: run time ÷ voluntary switches over the watch). With `reserve`, what
# each reservation asked (p99 + 20 % at 4 voices) and what the kernel took (`rtlab reservations
# --json`). fluidsynth ends when its stdin closes, the competitor after its -d, the daemon with
# the script: nothing runs or is reserved after. Run as root under the measurement lock, one
# condition a hold (about 50 s with the default phases):
#   flock -o /work/measure.lock bench/pipewire/fluidsynth.sh CONDITION [PHASE_SECONDS]
set -euo pipefail
condition=${1:?usage: fluidsynth.sh idle|competitor|reserve [PHASE_SECONDS]}
phase_seconds=${2:-12}
case $condition in idle | competitor | reserve) ;; *) echo "unknown condition $condition" >&2; exit 2 ;; esac
soundfont=/usr/share/sounds/sf2/TimGM6mb.sf2
if ! command -v fluidsynth > /dev/null || [[ ! -r $soundfont ]]; then
  echo "needs fluidsynth and $soundfont (apt-get install fluidsynth timgm6mb-soundfont)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/pipewire/server.sh
source "$here/server.sh"
pipewire_bench_setup
phases=(4 32 256)
total_seconds=$((${#phases[@]} * phase_seconds + 15))
export RTLAB_SOCKET=$work/rtlabd.sock
if [[ $condition == reserve ]]; then
  printf 'state_dir = "%s/state"\n' "$work" > "$work/rtlabd.toml"
  "$rtlab" daemon --config "$work/rtlabd.toml" --socket "$RTLAB_SOCKET" 2> "$work/daemon.log" &
fi
pipewire_server "$work" & server=$!
sleep 1
for _ in 1 2 3; do pipewire_force_quantum && break; sleep 1; done
# fluidsynth reads its shell commands from a FIFO this script holds open; closing it ends
# fluidsynth (EOF on its stdin), and timeout ends it in any case. Started at nice 0 (this machine
# starts everything at -10), no MIDI input, outputs left unconnected (the Dummy-Driver processes
# a JACK node without links).
mkfifo "$work/shell"
timeout $((total_seconds + 20)) nice -n 0 pw-jack fluidsynth -n -a jack -o synth.polyphony=512 \
  "$soundfont" < "$work/shell" > "$work/fluidsynth.out" 2>&1 &
exec 3> "$work/shell"
trap 'exec 3>&-; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
printf 'prog %d 16\n' 0 1 2 3 >&3
echo "interp 7" >&3
notes() { # ACTION COUNT: noteon/noteoff of COUNT notes, 64 a channel from C1 up
  local k
  for ((k = 0; k < $2; k++)); do
    if [[ $1 == noteon ]]; then echo "noteon $((k / 64)) $((24 + k % 64)) 100"; else echo "noteoff $((k / 64)) $((24 + k % 64))"; fi
  done >&3
}
sleep 3
pid=$(pgrep -n -x fluidsynth)
# The real-time thread (PipeWire's data thread in fluidsynth: its JACK process callback) is the
# one not SCHED_OTHER (field 41 of stat: policy).
rt_thread() {
  local task
  for task in /proc/"$pid"/task/*; do
    [[ $(sed 's/.*) //' "$task/stat" | cut -d' ' -f39) != 0 ]] && { basename "$task"; return; }
  done
}
cpu_ns() { awk '{print $1}' "/proc/$pid/task/$1/schedstat"; }
# Its activations: one voluntary switch each (it sleeps until the next cycle's trigger).
activations() { awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$pid/task/$1/status"; }
reservation=""
if [[ $condition == reserve ]]; then
  notes noteon "${phases[0]}"
  sleep 1
  "$rtlab" reserve --auto --comm fluidsynth --observe 3s --json "$work/auto.json" > "$work/auto.out" 2>&1 || { cat "$work/auto.out"; exit 3; }
  "$rtlab" reservations --json "$work/reservations.json" > /dev/null
  reservation=$(python3 - "$work/auto.json" "$work/reservations.json" <<'PY'
import json, sys
auto = json.load(open(sys.argv[1]))
print("reserve --auto %s: %s" % (auto["outcome"], "; ".join(
    "%s %s (%s): needs %.0f us an activation, asked %.0f us / %.2f ms = %.1f %%, took %.1f %% (%s)" % (
        r["name"], r["tid"], r["why_thread"], r["need_per_activation_ns"] / 1e3, r["amount_ns"] / 1e3,
        r["window_ns"] / 1e6, 100 * r["asked_share"], 100 * (r["granted_share"] or 0), r["backend"])
    for r in auto["reservations"])))
held = json.load(open(sys.argv[2]))
rows = held.get("reservations", held.get("data", {}).get("reservations", []))
print("rtlab reservations: " + "; ".join("%s %s: requested %.0f us / %.2f ms, the kernel holds %s" % (
    r.get("comm"), r.get("tid"), r["requested"]["amount_ns"] / 1e3, r["requested"]["period_ns"] / 1e6,
    "%.0f us / %.2f ms = %.1f %%" % (k["runtime_ns"] / 1e3, k["window_ns"] / 1e6, 100 * k["share"])
    if (k := r.get("kernel_held")) else "-") for r in rows))
PY
)
  echo "$reservation"
  notes noteoff "${phases[0]}"
  sleep 0.5
fi
if [[ $condition != idle ]]; then
  "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d $((${#phases[@]} * phase_seconds + 2)) &
  sleep 1
fi
for voices in "${phases[@]}"; do
  notes noteon "$voices"
  sleep 1
  echo voice_count >&3
  thread=$(rt_thread)
  before=$(cpu_ns "$thread") woken=$(activations "$thread")
  "$rtlab" trace watch --comm fluidsynth -D "$((phase_seconds - 3))s" --summary-json "$work/summary.json" \
    --json "$work/misses.jsonl" > /dev/null 2> "$work/watch.err" || { cat "$work/watch.err"; exit 3; }
  after=$(cpu_ns "$thread") slept=$(activations "$thread")
  sleep 0.5
  echo voice_count >&3
  sleep 0.2
  counted=$(grep -ao 'voice_count: [0-9]*' "$work/fluidsynth.out" | tail -2 | awk '{print $2}' | paste -sd/)
  python3 - "$work/summary.json" "$work/misses.jsonl" "$condition" "$voices" "$counted" \
    "$((after - before))" "$((slept - woken))" <<'PY'
import json, sys
summary, misses_path, condition, voices, counted, cpu_ns, activations = sys.argv[1:]
d = json.load(open(summary)); p = d.get("pipewire", {})
per = int(cpu_ns) / max(int(activations), 1)
cpu = "%.0f us an activation (%.1f %% of 2.667 ms, %s activations)" % (per / 1e3, per / 26670, activations)
if p.get("status") != "counted":
    print("%s, %s voices (%s): %s; PipeWire: %s" % (condition, voices, counted, cpu, p)); sys.exit()
def competitor(c): return c.get("kind") == "thread" and str(c.get("name", "")).startswith("qhog")
misses = [json.loads(l) for l in open(misses_path)]
during = [m for m in misses if (m.get("culprit") or {}).get("kind") != "hypervisor"
          and any(competitor(c) for s in m.get("critical_path", []) for c in s.get("culprits", []))]
naming = sum(1 for m in during if competitor(m.get("culprit") or {}))
hyper = sum(1 for m in misses if (m.get("culprit") or {}).get("kind") == "hypervisor")
pw, rt = p["pipewire_unfinished"], d["misses"]
print("%s, %s voices (%s): %s; PipeWire %d, rtlab %d (ratio %s) in %.1f s; %d of %d late activations during the competitor's bursts name it, %d blamed on the hypervisor"
      % (condition, voices, counted, cpu, pw, rt, "%.2f" % (rt / pw) if pw else "-", d["seconds"], naming, len(during), hyper))
PY
  notes noteoff "$voices"
  sleep 0.5
done
exec 3>&-
wait_for() { local _; for _ in $(seq 50); do pgrep -x "$1" > /dev/null || return 0; sleep 0.2; done; return 1; }
wait_for fluidsynth || echo "fluidsynth still running after its stdin closed" >&2
if [[ $condition == reserve ]]; then
  left() {
    "$rtlab" reservations --json "$work/left.json" > /dev/null
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); r = d.get("reservations", d.get("data", {}).get("reservations", []))
print(len(r), "(%s)" % ", ".join("%s %s" % (x.get("comm"), x.get("tid")) for x in r))' "$work/left.json"
  }
  sleep 1
  after_fluidsynth=$(left)
  kill "$server"; wait "$server" || true
  sleep 1
  echo "reservations left after fluidsynth ended: $after_fluidsynth; after the server ended too: $(left)"
fi
