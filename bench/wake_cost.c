// What one wake-up of a thread costs in CPU on this host before it does any work: a thread
// that only sleeps PERIOD and wakes, COUNT times, its CPU time from its schedstat (ns, as the
// agent benches count it). On a small VM this floor is most of a quiet agent's cost (issue
// 47: 125-175 us a wake after 1 s asleep on the 2-CPU VM, 28 us at 10 ms), which is why the
// recorder serves /metrics from its own loop and a scrape takes the tick it comes at.
//
//   cc -O2 -o /tmp/wake_cost bench/wake_cost.c && /tmp/wake_cost 1 8 && /tmp/wake_cost 0.01 300
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long run_ns(void) {
  char text[128];
  const int fd = open("/proc/thread-self/schedstat", O_RDONLY);
  const ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) {
    fprintf(stderr, "cannot read /proc/thread-self/schedstat (a kernel without schedstats?)\n");
    exit(1);
  }
  text[n] = 0;
  return atoll(text);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PERIOD_SECONDS COUNT\n", argv[0]);
    return 2;
  }
  const double period = atof(argv[1]);
  const int count = atoi(argv[2]);
  if (period <= 0 || count <= 0) {
    fprintf(stderr, "PERIOD_SECONDS and COUNT must be positive\n");
    return 2;
  }
  const long long ns = (long long)(period * 1e9);
  const long long before = run_ns();
  for (int i = 0; i < count; ++i) {
    const struct timespec sleep = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    nanosleep(&sleep, NULL);
  }
  printf("asleep %.3f s between wake-ups: %.1f us of CPU a wake-up (%d wake-ups)\n", period,
         (double)(run_ns() - before) / 1e3 / count, count);
  return 0;
}
