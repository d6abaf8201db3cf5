/*
 * fifo_hog: the competitor of the JACK tests and benchmarks. One SCHED_FIFO thread per CPU in a
 * list, each pinned to its CPU, spinning BURST every PERIOD for at most SECONDS, then exiting.
 *
 *   fifo_hog [-c CPU_LIST] [-p PRIORITY] [-b BURST_US] [-P PERIOD_US] [-d SECONDS] [-n COMM] [-A]
 *            [-L BURST_LOG]
 *
 * Defaults: every online CPU, priority 95, 6000 us every 20000 us, 20 s, comm "qhog".
 * -A aligns the bursts to multiples of PERIOD on CLOCK_MONOTONIC, so every CPU's spinner bursts at
 * once and the program it competes with has no free CPU to move to (the tests use it).
 * -L writes, once every spinner has stopped, one line per burst to BURST_LOG:
 *   "CPU START_NS END_NS LONGEST_GAP_NS" — CLOCK_MONOTONIC when the spinner began spinning and when
 *   it stopped, and the longest time between two of its clock reads inside the burst (the time
 *   it did not have its CPU: a higher class, an interrupt, or the hypervisor holding the vCPU).
 *   A test judges the xruns of the program it competes with by these times.
 * Every spinner stops on its own: each burst checks the run's end, and the process sets
 * RLIMIT_RTTIME so the kernel kills a spinner that never sleeps (it sleeps every period).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int priority = 95;
static uint64_t burst_ns = 6000000, period_ns = 20000000;
static uint64_t end_ns;
static const char *comm = "qhog";
static volatile sig_atomic_t stop_requested;

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void on_signal(int signal_number)
{
    (void)signal_number;
    stop_requested = 1;
}

/* -A: bursts aligned to multiples of the period on CLOCK_MONOTONIC (all CPUs at once). */
static int align;

/* -L: each spinner's bursts, kept in memory while it runs and written by main at the end. */
struct burst {
    uint64_t start_ns, end_ns, longest_gap_ns;
};
struct spinner {
    int cpu;
    struct burst *bursts;
    size_t n_bursts, capacity;
};

static void *spin(void *arg)
{
    struct spinner *spinner = arg;
    int cpu = spinner->cpu;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set))
        fprintf(stderr, "fifo_hog: cpu %d: affinity failed\n", cpu);
    char thread_name[16];
    snprintf(thread_name, sizeof thread_name, "%s%d", comm, cpu);
    prctl(PR_SET_NAME, thread_name);
    struct sched_param param = {.sched_priority = priority};
    int error = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
    if (error) {
        fprintf(stderr, "fifo_hog: SCHED_FIFO %d: %s\n", priority, strerror(error));
        return NULL;
    }
    uint64_t next = monotonic_ns();
    if (align) {
        /* Bursts at multiples of the period: every CPU's spinner bursts at the same time. */
        next = (next / period_ns + 1) * period_ns;
        struct timespec first = {.tv_sec = (time_t)(next / 1000000000u),
                                 .tv_nsec = (long)(next % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &first, NULL);
    }
    while (!stop_requested && next < end_ns) {
        uint64_t stop = next + burst_ns;
        volatile uint64_t sink = 0;
        uint64_t started = monotonic_ns(), last = started, longest_gap = 0;
        while (last < stop && !stop_requested) {
            sink++;
            uint64_t now = monotonic_ns();
            if (now - last > longest_gap)
                longest_gap = now - last;
            last = now;
        }
        if (spinner->n_bursts < spinner->capacity)
            spinner->bursts[spinner->n_bursts++] =
                (struct burst){.start_ns = started, .end_ns = last, .longest_gap_ns = longest_gap};
        next += period_ns;
        struct timespec wake = {.tv_sec = (time_t)(next / 1000000000u),
                                .tv_nsec = (long)(next % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL);
    }
    /* Leave no RT thread behind, even for the instant before exit. */
    struct sched_param normal = {.sched_priority = 0};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *cpu_list = NULL;
    const char *burst_log_path = NULL;
    double seconds = 20.0;
    int option;
    while ((option = getopt(argc, argv, "c:p:b:P:d:n:AL:")) != -1) {
        switch (option) {
        case 'c': cpu_list = optarg; break;
        case 'p': priority = atoi(optarg); break;
        case 'b': burst_ns = (uint64_t)(atof(optarg) * 1000.0); break;
        case 'P': period_ns = (uint64_t)(atof(optarg) * 1000.0); break;
        case 'd': seconds = atof(optarg); break;
        case 'n': comm = optarg; break;
        case 'A': align = 1; break;
        case 'L': burst_log_path = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-c CPUS] [-p PRIO] [-b BURST_US] [-P PERIOD_US] [-d SECONDS] [-n COMM] [-A] [-L BURST_LOG]\n", argv[0]);
            return 2;
        }
    }
    if (priority < 1 || priority > 99 || burst_ns == 0 || period_ns <= burst_ns || seconds <= 0 || seconds > 3600) {
        fprintf(stderr, "fifo_hog: need 1 <= priority <= 99, 0 < burst < period, 0 < seconds <= 3600\n");
        return 2;
    }
    /* The kernel's own stop: a thread that runs RT for 1 s without sleeping gets SIGKILL. */
    struct rlimit rttime = {.rlim_cur = 1000000, .rlim_max = 1000000};
    setrlimit(RLIMIT_RTTIME, &rttime);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    end_ns = monotonic_ns() + (uint64_t)(seconds * 1e9);
    int cpus[1024];
    int n_cpus = 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (!cpu_list) {
        for (int cpu = 0; cpu < online && n_cpus < 1024; cpu++)
            cpus[n_cpus++] = cpu;
    } else {
        char *copy = strdup(cpu_list), *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item && n_cpus < 1024; item = strtok_r(NULL, ",", &save)) {
            int first, last;
            if (sscanf(item, "%d-%d", &first, &last) != 2)
                first = last = atoi(item);
            for (int cpu = first; cpu <= last && n_cpus < 1024; cpu++)
                cpus[n_cpus++] = cpu;
        }
        free(copy);
    }
    FILE *burst_log = NULL;
    if (burst_log_path && !(burst_log = fopen(burst_log_path, "w"))) {
        fprintf(stderr, "fifo_hog: %s: %s\n", burst_log_path, strerror(errno));
        return 2;
    }
    static pthread_t threads[1024];
    static struct spinner spinners[1024];
    size_t capacity = (size_t)(seconds * 1e9 / (double)period_ns) + 2;
    for (int i = 0; i < n_cpus; i++) {
        spinners[i] = (struct spinner){.cpu = cpus[i], .capacity = burst_log ? capacity : 0};
        if (burst_log && !(spinners[i].bursts = calloc(capacity, sizeof(struct burst)))) {
            fprintf(stderr, "fifo_hog: out of memory\n");
            return 3;
        }
        pthread_create(&threads[i], NULL, spin, &spinners[i]);
    }
    for (int i = 0; i < n_cpus; i++)
        pthread_join(threads[i], NULL);
    if (burst_log) {
        for (int i = 0; i < n_cpus; i++)
            for (size_t b = 0; b < spinners[i].n_bursts; b++)
                fprintf(burst_log, "%d %llu %llu %llu\n", spinners[i].cpu,
                        (unsigned long long)spinners[i].bursts[b].start_ns,
                        (unsigned long long)spinners[i].bursts[b].end_ns,
                        (unsigned long long)spinners[i].bursts[b].longest_gap_ns);
        if (fclose(burst_log)) {
            fprintf(stderr, "fifo_hog: %s: %s\n", burst_log_path, strerror(errno));
            return 3;
        }
    }
    return 0;
}
