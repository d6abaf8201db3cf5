# Sourced (from the repository's root, with $rtlab set) by bench/cpu-slope.sh and
# bench/cpu-threads.sh: builds the release rtlab when $rtlab is missing, checks that the peer
# tools are installed, makes the script's dated output folder ($out), and stops the stress-ng
# load ($stress_pid) however the script ends. start_stress and peer_commands give both scripts
# the same load and the same two measured commands.
[ -x "$rtlab" ] || cargo build --release -p rtlab
for tool in cyclictest perf stress-ng; do
  command -v "$tool" >/dev/null || { echo "$tool missing (apt-get install rt-tests linux-perf stress-ng)" >&2; exit 2; }
done

out=bench/out/$(basename "$0" .sh)-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"

stress_pid=
cleanup() { [ -n "$stress_pid" ] && kill "$stress_pid" 2>/dev/null || true; }
trap cleanup EXIT

# start_stress SECONDS: `stress-ng --cpu 2 --io 1` for SECONDS in the background ($stress_pid),
# given 3 s to get going.
start_stress() {
  stress-ng --cpu 2 --io 1 --timeout "$1"s >/dev/null 2>&1 &
  stress_pid=$!
  sleep 3
}

# peer_commands SECONDS NAME: the two commands measured, with the same flags (SCHED_FIFO 90,
# 1 ms, every CPU, cpu_dma_latency 0, a 20,000-bucket histfile) for SECONDS, in the arrays
# $cyclictest_command and $rtlab_command; their histograms (and rtlab's record) in
# $out/cyclictest-NAME.hist, $out/rtlab-NAME.hist and $out/rtlab-NAME.json.
peer_commands() {
  cyclictest_command=(cyclictest -m -p 90 -i 1000 -d 0 -t -a -D "${1}s" -q -h 20000
    --histfile="$out/cyclictest-$2.hist")
  rtlab_command=("$rtlab" run --classes rt-high --no-handoff --period 1ms --duration "${1}s"
    --warmup 0s --cpu-dma-latency 0 --no-store --histogram 20000 --histfile "$out/rtlab-$2.hist"
    --json "$out/rtlab-$2.json")
}
