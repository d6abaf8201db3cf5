/*
 * xrun_client: a JACK client that does a fixed share of work in every process callback and
 * counts xruns the way JACK reports them (jack_set_xrun_callback). It is the "real application"
 * rtlab's tests and benchmarks hold rtlab against: JACK's own xrun count is the truth.
 *
 *   xrun_client [-n NAME] [-s SERVER] [-l LOAD_PERCENT] [-d SECONDS] [-x XRUN_LOG] [-w] [-c]
 *               [-S LOAD,LOAD,... -t STEP_SECONDS [-W]]
 *
 * -l   percent of each period to burn in the process callback (busy work on CLOCK_MONOTONIC)
 * -c   burn that share as the thread's own CPU time (CLOCK_THREAD_CPUTIME_ID) instead of wall
 *      time: a callback preempted for B finishes B later, as a DSP with that much work does
 *      (a wall-time burn absorbs a preemption that ends before its end; issue 35's validation
 *      uses -c, the forecast's model is CPU time)
 * -d   how long to stay active; then it deactivates, prints one JSON object on stdout and exits
 * -x   append one line per xrun to XRUN_LOG: CLOCK_MONOTONIC nanoseconds of the callback
 * -w   wait for the server to come up (retry jack_client_open for up to 10 s)
 * -S   steps of load: the work per callback is each LOAD percent in turn, STEP_SECONDS (-t) each,
 *      then the run ends (-d is then the steps' total unless given larger). Before the steps
 *      the load is -l; with -W the steps wait for SIGUSR1 (a script reserves, starts a competitor,
 *      then signals), else they start once active. Each step's start goes to stderr and to the
 *      JSON's "step_starts_ns" (CLOCK_MONOTONIC), so xruns can be counted per step.
 *
 * The JSON: {"xruns":N,"callbacks":N,"period_frames":N,"sample_rate":N,"period_ns":N,
 *            "load_percent":N,"duration_ns":N,"process_tid":N,"max_callback_ns":N,
 *            "started_monotonic_ns":N,"step_starts_ns":[N,...]}
 * SIGINT or SIGTERM end the run early, with the same JSON.
 */
#define _GNU_SOURCE
#include <jack/jack.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_uint_fast64_t xruns;
static atomic_uint_fast64_t callbacks;
static atomic_uint_fast64_t max_callback_ns;
static atomic_int process_tid;
static volatile sig_atomic_t steps_go;
static volatile sig_atomic_t stop_requested;
static _Atomic uint64_t burn_ns;
static int burn_cpu_time;
static FILE *xrun_log;

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int process(jack_nframes_t frames, void *arg)
{
    (void)frames;
    (void)arg;
    uint64_t start = monotonic_ns();
    uint64_t burn = atomic_load(&burn_ns);
    if (atomic_load(&process_tid) == 0)
        atomic_store(&process_tid, (int)syscall(SYS_gettid));
    /* Busy work for burn_ns of wall time: what a DSP callback does with its share of the period. */
    volatile uint64_t sink = 0;
    if (burn_cpu_time) {
        uint64_t cpu_start = thread_cpu_ns();
        while (thread_cpu_ns() - cpu_start < burn)
            for (int i = 0; i < 64; i++)
                sink += (uint64_t)i * 2654435761u;
    } else {
        while (monotonic_ns() - start < burn)
            for (int i = 0; i < 64; i++)
                sink += (uint64_t)i * 2654435761u;
    }
    uint64_t took = monotonic_ns() - start;
    uint64_t previous = atomic_load(&max_callback_ns);
    while (took > previous && !atomic_compare_exchange_weak(&max_callback_ns, &previous, took)) {
    }
    atomic_fetch_add(&callbacks, 1);
    return 0;
}

static int on_xrun(void *arg)
{
    (void)arg;
    atomic_fetch_add(&xruns, 1);
    if (xrun_log) {
        fprintf(xrun_log, "%llu\n", (unsigned long long)monotonic_ns());
        fflush(xrun_log);
    }
    return 0;
}

static void on_shutdown(void *arg)
{
    (void)arg;
    stop_requested = 1;
}

static void on_signal(int signal_number)
{
    (void)signal_number;
    stop_requested = 1;
}

static void on_go(int signal_number)
{
    (void)signal_number;
    steps_go = 1;
}

#define MAX_STEPS 16

int main(int argc, char **argv)
{
    const char *name = "xrun_client";
    const char *server = NULL;
    const char *xrun_log_path = NULL;
    double load_percent = 30.0;
    double seconds = 20.0;
    int wait_for_server = 0;
    double steps[MAX_STEPS];
    int n_steps = 0;
    double step_seconds = 0;
    int wait_for_go = 0;
    int seconds_given = 0;
    int option;
    while ((option = getopt(argc, argv, "n:s:l:d:x:wcS:t:W")) != -1) {
        switch (option) {
        case 'n': name = optarg; break;
        case 's': server = optarg; break;
        case 'l': load_percent = atof(optarg); break;
        case 'd': seconds = atof(optarg); seconds_given = 1; break;
        case 'S': {
            char *text = optarg;
            while (*text && n_steps < MAX_STEPS) {
                steps[n_steps++] = strtod(text, &text);
                if (*text == ',')
                    text++;
                else
                    break;
            }
            break;
        }
        case 't': step_seconds = atof(optarg); break;
        case 'W': wait_for_go = 1; break;
        case 'x': xrun_log_path = optarg; break;
        case 'w': wait_for_server = 1; break;
        case 'c': burn_cpu_time = 1; break;
        default:
            fprintf(stderr, "usage: %s [-n NAME] [-s SERVER] [-l LOAD%%] [-d SECONDS] [-x XRUN_LOG] [-w] [-c] [-S LOAD,... -t STEP_SECONDS [-W]]\n", argv[0]);
            return 2;
        }
    }
    if (load_percent < 0 || load_percent > 100 || seconds <= 0) {
        fprintf(stderr, "xrun_client: -l must be 0..100 and -d positive\n");
        return 2;
    }
    for (int i = 0; i < n_steps; i++) {
        if (steps[i] < 0 || steps[i] > 100) {
            fprintf(stderr, "xrun_client: each -S load must be 0..100\n");
            return 2;
        }
    }
    if (n_steps > 0 && step_seconds <= 0) {
        fprintf(stderr, "xrun_client: -S needs -t STEP_SECONDS\n");
        return 2;
    }
    /* The steps end the run; a -W never signalled ends after 120 s of waiting all the same. */
    if (n_steps > 0 && !seconds_given)
        seconds = (wait_for_go ? 120 : 0) + n_steps * step_seconds + 1;
    if (xrun_log_path) {
        xrun_log = fopen(xrun_log_path, "a");
        if (!xrun_log) {
            fprintf(stderr, "xrun_client: %s: %s\n", xrun_log_path, strerror(errno));
            return 2;
        }
    }
    jack_options_t options = JackNoStartServer | (server ? JackServerName : JackNullOption);
    jack_status_t status = 0;
    jack_client_t *client = NULL;
    uint64_t give_up = monotonic_ns() + 10000000000ull;
    for (;;) {
        client = server ? jack_client_open(name, options, &status, server)
                        : jack_client_open(name, options, &status);
        if (client || !wait_for_server || monotonic_ns() > give_up)
            break;
        usleep(100000);
    }
    if (!client) {
        fprintf(stderr, "xrun_client: no JACK server (status 0x%x)\n", (unsigned)status);
        return 3;
    }
    jack_nframes_t period_frames = jack_get_buffer_size(client);
    jack_nframes_t sample_rate = jack_get_sample_rate(client);
    uint64_t period_ns = (uint64_t)period_frames * 1000000000ull / sample_rate;
    atomic_store(&burn_ns, (uint64_t)(period_ns * load_percent / 100.0));
    jack_set_process_callback(client, process, NULL);
    jack_set_xrun_callback(client, on_xrun, NULL);
    jack_on_shutdown(client, on_shutdown, NULL);
    jack_port_register(client, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
    jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGUSR1, on_go);
    uint64_t started = monotonic_ns();
    if (jack_activate(client)) {
        fprintf(stderr, "xrun_client: jack_activate failed\n");
        jack_client_close(client);
        return 3;
    }
    /* Say we are active, for scripts that start a competitor or a recorder only once we run. */
    fprintf(stderr, "xrun_client: active, period %u frames at %u Hz\n", period_frames, sample_rate);
    uint64_t end = started + (uint64_t)(seconds * 1e9);
    uint64_t step_starts[MAX_STEPS];
    int step = -1;
    while (!stop_requested && monotonic_ns() < end) {
        if (n_steps > 0 && (steps_go || !wait_for_go)) {
            uint64_t now = monotonic_ns();
            uint64_t step_ns = (uint64_t)(step_seconds * 1e9);
            int due = step < 0 ? 0 : (int)((now - step_starts[0]) / step_ns);
            if (due >= n_steps)
                break;
            if (due != step) {
                step = due;
                step_starts[step] = step == 0 ? now : step_starts[0] + (uint64_t)step * step_ns;
                atomic_store(&burn_ns, (uint64_t)(period_ns * steps[step] / 100.0));
                fprintf(stderr, "xrun_client: step %d: %g %% at %llu\n", step, steps[step],
                        (unsigned long long)step_starts[step]);
            }
        }
        usleep(n_steps > 0 ? 1000 : 20000);
    }
    uint64_t duration = monotonic_ns() - started;
    jack_deactivate(client);
    jack_client_close(client);
    printf("{\"xruns\":%llu,\"callbacks\":%llu,\"period_frames\":%u,\"sample_rate\":%u,"
           "\"period_ns\":%llu,\"load_percent\":%g,\"duration_ns\":%llu,\"process_tid\":%d,"
           "\"max_callback_ns\":%llu,\"started_monotonic_ns\":%llu,\"step_starts_ns\":[",
           (unsigned long long)atomic_load(&xruns), (unsigned long long)atomic_load(&callbacks),
           period_frames, sample_rate, (unsigned long long)period_ns, load_percent,
           (unsigned long long)duration, atomic_load(&process_tid),
           (unsigned long long)atomic_load(&max_callback_ns), (unsigned long long)started);
    for (int i = 0; i <= step; i++)
        printf("%s%llu", i ? "," : "", (unsigned long long)step_starts[i]);
    printf("]}\n");
    if (xrun_log)
        fclose(xrun_log);
    return 0;
}
