# Sourced (from the repository's root, with $rtlab set) by bench/cpu-slope.sh and
# bench/cpu-threads.sh: builds the release rtlab when $rtlab is missing, checks that the peer
# tools are installed, and stops the stress-ng load ($stress_pid) however the script ends.
[ -x "$rtlab" ] || cargo build --release -p rtlab
for tool in cyclictest perf stress-ng; do
  command -v "$tool" >/dev/null || { echo "$tool missing (apt-get install rt-tests linux-perf stress-ng)" >&2; exit 2; }
done

stress_pid=
cleanup() { [ -n "$stress_pid" ] && kill "$stress_pid" 2>/dev/null || true; }
trap cleanup EXIT
