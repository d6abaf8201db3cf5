/*
 * stall_watch: sees the time a CPU was taken from everything, so that the JACK tests can tell an
 * xrun the competitor caused from one the machine did (a hypervisor holding the vCPU, a kernel
 * section that does not preempt). One SCHED_FIFO 99 thread per online CPU, pinned, waking every
 * millisecond on CLOCK_MONOTONIC for SECONDS, and one ordinary thread reading /proc/stat's steal
 * time every 20 ms.
 *
 *   stall_watch [-d SECONDS] [-t LATE_US] -o LOG
 *
 * LOG, written at the end (SIGINT or SIGTERM end the watch early), CLOCK_MONOTONIC ns:
 *   "late CPU DUE_NS WOKE_NS RUN_DELAY_NS"  a wake-up more than LATE_US (default 1000) after its
 *       time; RUN_DELAY is how long the thread then waited on the run queue (its schedstat): a
 *       late wake-up that hardly waited had its timer fire late — its vCPU did not run (the
 *       hypervisor) or ran with interrupts off; one that waited was held by a higher class
 *       (SCHED_DEADLINE) or a kernel section that does not preempt.
 *   "steal CPU AT_NS STEAL_NS"  the CPU's steal time (/proc/stat, in USER_HZ ticks) every 20 ms.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

#define TICK_NS 1000000u
#define STEAL_EVERY_NS 20000000u
#define MAX_CPUS 256

static uint64_t end_ns, late_ns = 1000000;
static volatile sig_atomic_t stop_requested;

struct late {
    uint64_t due_ns, woke_ns, run_delay_ns;
};
struct watcher {
    int cpu;
    struct late *lates;
    size_t n_lates, capacity;
};
struct steal_sample {
    uint64_t at_ns;
    uint64_t steal_ns[MAX_CPUS];
};

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void sleep_until(uint64_t at_ns)
{
    struct timespec at = {.tv_sec = (time_t)(at_ns / 1000000000u), .tv_nsec = (long)(at_ns % 1000000000u)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
}

static void on_signal(int signal_number)
{
    (void)signal_number;
    stop_requested = 1;
}

/* The calling thread's time waiting on a run queue, ns (schedstat's second field), 0 if unknown. */
static uint64_t run_delay_ns(int schedstat)
{
    char text[128];
    ssize_t n = pread(schedstat, text, sizeof text - 1, 0);
    if (n <= 0)
        return 0;
    text[n] = 0;
    unsigned long long on_cpu = 0, waited = 0;
    if (sscanf(text, "%llu %llu", &on_cpu, &waited) != 2)
        return 0;
    return waited;
}

static void *watch(void *arg)
{
    struct watcher *watcher = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(watcher->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set))
        fprintf(stderr, "stall_watch: cpu %d: affinity failed\n", watcher->cpu);
    char thread_name[16];
    snprintf(thread_name, sizeof thread_name, "stallwatch%d", watcher->cpu);
    prctl(PR_SET_NAME, thread_name);
    struct sched_param param = {.sched_priority = 99};
    int error = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
    if (error) {
        fprintf(stderr, "stall_watch: SCHED_FIFO 99: %s\n", strerror(error));
        return NULL;
    }
    int schedstat = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    uint64_t next = (monotonic_ns() / TICK_NS + 1) * TICK_NS;
    uint64_t waited_before = run_delay_ns(schedstat);
    while (!stop_requested && next < end_ns) {
        sleep_until(next);
        uint64_t woke = monotonic_ns();
        uint64_t waited = run_delay_ns(schedstat);
        if (woke - next > late_ns && watcher->n_lates < watcher->capacity)
            watcher->lates[watcher->n_lates++] =
                (struct late){.due_ns = next, .woke_ns = woke, .run_delay_ns = waited - waited_before};
        waited_before = waited;
        /* After a late wake-up, the next millisecond still ahead (no burst of overdue wake-ups). */
        next = (woke / TICK_NS + 1) * TICK_NS;
    }
    if (schedstat >= 0)
        close(schedstat);
    struct sched_param normal = {.sched_priority = 0};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    return NULL;
}

/* Reads every CPU's steal time from /proc/stat into sample; the number of CPUs read. */
static int read_steal(struct steal_sample *sample, long ns_per_tick)
{
    FILE *stat = fopen("/proc/stat", "r");
    if (!stat)
        return 0;
    char line[512];
    int n = 0;
    sample->at_ns = monotonic_ns();
    while (fgets(line, sizeof line, stat)) {
        int cpu;
        unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system,
                   &idle, &iowait, &irq, &softirq, &steal) == 9 &&
            cpu >= 0 && cpu < MAX_CPUS) {
            sample->steal_ns[cpu] = steal * (uint64_t)ns_per_tick;
            if (cpu + 1 > n)
                n = cpu + 1;
        }
    }
    fclose(stat);
    return n;
}

int main(int argc, char **argv)
{
    double seconds = 20.0;
    const char *log_path = NULL;
    int option;
    while ((option = getopt(argc, argv, "d:t:o:")) != -1) {
        switch (option) {
        case 'd': seconds = atof(optarg); break;
        case 't': late_ns = (uint64_t)(atof(optarg) * 1000.0); break;
        case 'o': log_path = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-d SECONDS] [-t LATE_US] -o LOG\n", argv[0]);
            return 2;
        }
    }
    if (!log_path || seconds <= 0 || seconds > 3600 || late_ns == 0) {
        fprintf(stderr, "stall_watch: need -o LOG, 0 < seconds <= 3600 and LATE_US > 0\n");
        return 2;
    }
    FILE *log = fopen(log_path, "w");
    if (!log) {
        fprintf(stderr, "stall_watch: %s: %s\n", log_path, strerror(errno));
        return 2;
    }
    /* The kernel's own stop: a thread that runs RT for 1 s without sleeping gets SIGKILL. */
    struct rlimit rttime = {.rlim_cur = 1000000, .rlim_max = 1000000};
    setrlimit(RLIMIT_RTTIME, &rttime);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    end_ns = monotonic_ns() + (uint64_t)(seconds * 1e9);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n_cpus = online > MAX_CPUS ? MAX_CPUS : (int)online;
    static struct watcher watchers[MAX_CPUS];
    static pthread_t threads[MAX_CPUS];
    size_t capacity = (size_t)(seconds * 1e9 / TICK_NS) + 2;
    for (int cpu = 0; cpu < n_cpus; cpu++) {
        watchers[cpu] = (struct watcher){.cpu = cpu, .capacity = capacity};
        if (!(watchers[cpu].lates = calloc(capacity, sizeof(struct late)))) {
            fprintf(stderr, "stall_watch: out of memory\n");
            return 3;
        }
        pthread_create(&threads[cpu], NULL, watch, &watchers[cpu]);
    }
    long ns_per_tick = 1000000000L / sysconf(_SC_CLK_TCK);
    size_t n_samples = (size_t)(seconds * 1e9 / STEAL_EVERY_NS) + 2, taken = 0;
    struct steal_sample *samples = calloc(n_samples, sizeof(struct steal_sample));
    int stat_cpus = 0;
    for (uint64_t next = monotonic_ns(); samples && !stop_requested && next < end_ns && taken < n_samples;
         next += STEAL_EVERY_NS) {
        stat_cpus = read_steal(&samples[taken++], ns_per_tick);
        sleep_until(next + STEAL_EVERY_NS);
    }
    for (int cpu = 0; cpu < n_cpus; cpu++)
        pthread_join(threads[cpu], NULL);
    for (int cpu = 0; cpu < n_cpus; cpu++)
        for (size_t i = 0; i < watchers[cpu].n_lates; i++)
            fprintf(log, "late %d %llu %llu %llu\n", cpu, (unsigned long long)watchers[cpu].lates[i].due_ns,
                    (unsigned long long)watchers[cpu].lates[i].woke_ns,
                    (unsigned long long)watchers[cpu].lates[i].run_delay_ns);
    for (size_t i = 0; i < taken; i++)
        for (int cpu = 0; cpu < stat_cpus; cpu++)
            fprintf(log, "steal %d %llu %llu\n", cpu, (unsigned long long)samples[i].at_ns,
                    (unsigned long long)samples[i].steal_ns[cpu]);
    if (fclose(log)) {
        fprintf(stderr, "stall_watch: %s: %s\n", log_path, strerror(errno));
        return 3;
    }
    return 0;
}
