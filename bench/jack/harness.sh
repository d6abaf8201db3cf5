# Sourced by the JACK benchmarks (bench/forecast-vs-jack.sh, bench/forecast-trace-vs-jack.sh),
# with $HERE (bench/), $OUT and $BIN set: compiles the harness client and competitor into $BIN
# once, and kills what the script started ($LOADPID, $CLIENTPID, $JACKPID, each cleared once it
# has been waited for) however the script ends.
mkdir -p "$OUT" "$BIN"
[ -x "$BIN/xrun_client" ] || cc -O2 -o "$BIN/xrun_client" "$HERE/jack/xrun_client.c" -ljack -lpthread
[ -x "$BIN/fifo_hog" ] || cc -O2 -o "$BIN/fifo_hog" "$HERE/jack/fifo_hog.c" -lpthread
cleanup() {
  [ -n "${LOADPID:-}" ] && kill "$LOADPID" 2>/dev/null || true
  [ -n "${CLIENTPID:-}" ] && kill "$CLIENTPID" 2>/dev/null || true
  [ -n "${JACKPID:-}" ] && kill "$JACKPID" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
