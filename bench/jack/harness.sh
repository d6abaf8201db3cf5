# Sourced by the JACK benchmarks (bench/forecast-vs-jack.sh, bench/forecast-trace-vs-jack.sh),
# with $HERE (bench/), $OUT and $BIN set: compiles the harness client and competitor into $BIN
# once, and kills what the script started ($LOADPID, $CLIENTPID, $JACKPID, each cleared once it
# has been waited for) however the script ends. A cell: start_cell, the measurement, end_cell.
mkdir -p "$OUT" "$BIN"
[ "$BIN/xrun_client" -nt "$HERE/jack/xrun_client.c" ] || cc -O2 -o "$BIN/xrun_client" "$HERE/jack/xrun_client.c" -ljack -lpthread
[ "$BIN/fifo_hog" -nt "$HERE/jack/fifo_hog.c" ] || cc -O2 -o "$BIN/fifo_hog" "$HERE/jack/fifo_hog.c" -lpthread
cleanup() {
  [ -n "${LOADPID:-}" ] && kill "$LOADPID" 2>/dev/null || true
  [ -n "${CLIENTPID:-}" ] && kill "$CLIENTPID" 2>/dev/null || true
  [ -n "${JACKPID:-}" ] && kill "$JACKPID" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# pinned CONDITION: whether CONDITION is a pin-BURST_US-PERIOD_US one (jackd on CPU 0, the client
# and the competitor on CPU 1).
pinned() {
  case $1 in pin-*) return 0 ;; *) return 1 ;; esac
}

# start_jack FRAMES NAME: jackd as $SERVER (dummy driver, 48 kHz, FRAMES a period) in the
# background ($JACKPID), its log in $OUT/NAME.jackd.log; on CPU 0 (every thread of it, the dummy
# driver's clock among them) when the cell's condition is pinned.
start_jack() {
  if pinned "${condition:-}"; then set -- "$1" "$2" taskset -c 0; else set -- "$1" "$2"; fi
  frames_=$1 name_=$2; shift 2
  JACK_NO_AUDIO_RESERVATION=1 "$@" jackd -n "$SERVER" -R -P 70 -d dummy -r 48000 -p "$frames_" \
    >"$OUT/$name_.jackd.log" 2>&1 &
  JACKPID=$!
}

# start_load CONDITION SECONDS [-A]: the competitor of CONDITION (idle: none; stress:
# stress-ng --cpu 2; fifo-long, fifo-short, fifo-6ms: fifo_hog FIFO 95 2.2 ms/50 ms, 1.5 ms/30 ms,
# 6 ms/20 ms, the last with its bursts aligned on every CPU when -A is given; pin-B-P: fifo_hog
# FIFO 95 B µs every P µs on CPU 1 only) for SECONDS in the background ($LOADPID, empty when idle).
start_load() {
  case $1 in
    idle) LOADPID= ;;
    stress) stress-ng --cpu 2 --timeout "$2"s >/dev/null 2>&1 & LOADPID=$! ;;
    fifo-long) "$BIN/fifo_hog" -p 95 -b 2200 -P 50000 -d "$2" >/dev/null 2>&1 & LOADPID=$! ;;
    fifo-short) "$BIN/fifo_hog" -p 95 -b 1500 -P 30000 -d "$2" >/dev/null 2>&1 & LOADPID=$! ;;
    fifo-6ms) "$BIN/fifo_hog" -p 95 -b 6000 -P 20000 ${3:-} -d "$2" >/dev/null 2>&1 & LOADPID=$! ;;
    pin-*-*)
      burst_=${1#pin-}; period_=${burst_#*-}; burst_=${burst_%%-*}
      "$BIN/fifo_hog" -c 1 -p 95 -b "$burst_" -P "$period_" -d "$2" >/dev/null 2>&1 & LOADPID=$! ;;
    *) echo "unknown condition $1" >&2; exit 2 ;;
  esac
}

# begin_cell FRAMES:LOAD%:CONDITION: sets $frames, $load, $condition and $name
# (fFRAMES-lLOAD-CONDITION, with -rRUN when $RUN is set: one of several runs of a cell), and
# removes what an earlier run left in $OUT/$name.*.
begin_cell() {
  frames=${1%%:*}; rest=${1#*:}; load=${rest%%:*}; condition=${rest#*:}
  name="f${frames}-l${load}-${condition}${RUN:+-r$RUN}"
  rm -f "$OUT/$name".*
}

# start_client SECONDS: xrun_client on $SERVER burning $load % of each period for SECONDS in the
# background ($CLIENTPID), its JSON, xrun log and errors in $OUT/$name.client.json, .xruns and
# .client.err; on CPU 1, burning CPU time (-c), when the cell's condition is pinned.
start_client() {
  cpu_time_=
  if pinned "$condition"; then set -- "$1" taskset -c 1; cpu_time_=-c; fi
  seconds_=$1; shift
  "$@" "$BIN/xrun_client" -s "$SERVER" -w -l "$load" -d "$seconds_" $cpu_time_ -x "$OUT/$name.xruns" \
    >"$OUT/$name.client.json" 2>"$OUT/$name.client.err" &
  CLIENTPID=$!
}

# start_cell FRAMES:LOAD%:CONDITION CLIENT_SECONDS LOAD_SECONDS [-A]: begin_cell, jackd, the
# client for CLIENT_SECONDS a second later, and the competitor of CONDITION for LOAD_SECONDS
# (start_load, -A passed on) a second after that.
start_cell() {
  begin_cell "$1"
  start_jack "$frames" "$name"
  sleep 1
  start_client "$2"
  sleep 1
  start_load "$condition" "$3" ${4:-}
}

# end_cell: waits for the client and the competitor, then stops jackd.
end_cell() {
  wait "$CLIENTPID" || true
  CLIENTPID=
  [ -n "$LOADPID" ] && { wait "$LOADPID" || true; }
  LOADPID=
  kill "$JACKPID" 2>/dev/null || true
  wait "$JACKPID" 2>/dev/null || true
  JACKPID=
}
