// What one reading of the thread's CPU clock costs (CLOCK_THREAD_CPUTIME_ID: a system call, no
// vDSO), as the recorder's tick reads it between collectors: once a second, after a read of a
// PSI file (the tick's first read), COUNT readings timed with the monotonic clock (vDSO); then
// the same readings back to back, warm. Medians a reading, ns.
// Build: gcc -O2 -o /tmp/clock_cost bench/clock_cost.c
// Run:   /tmp/clock_cost 20 7   (issue 47: 20 ticks, the 7 readings a tick of six collectors)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double nowNs(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int byValue(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s TICKS READINGS\n", argv[0]);
    return 2;
  }
  const int ticks = atoi(argv[1]), readings = atoi(argv[2]);
  const int psi = open("/proc/pressure/io", O_RDONLY | O_CLOEXEC);
  static char buffer[4096];
  double* cold = calloc((size_t)ticks, sizeof(double));
  double* warm = calloc((size_t)ticks, sizeof(double));
  for (int t = 0; t < ticks; ++t) {
    usleep(1000000);
    if (psi >= 0 && pread(psi, buffer, sizeof buffer, 0) < 0) perror("pread");
    double start = nowNs(CLOCK_MONOTONIC);
    for (int r = 0; r < readings; ++r) nowNs(CLOCK_THREAD_CPUTIME_ID);
    cold[t] = (nowNs(CLOCK_MONOTONIC) - start) / readings;
    start = nowNs(CLOCK_MONOTONIC);
    for (int r = 0; r < 1000; ++r) nowNs(CLOCK_THREAD_CPUTIME_ID);
    warm[t] = (nowNs(CLOCK_MONOTONIC) - start) / 1000;
  }
  qsort(cold, (size_t)ticks, sizeof(double), byValue);
  qsort(warm, (size_t)ticks, sizeof(double), byValue);
  printf("thread CPU clock, a reading: %.0f ns at a tick (min %.0f, max %.0f), %.0f ns warm\n",
         cold[ticks / 2], cold[0], cold[ticks - 1], warm[ticks / 2]);
  return 0;
}
