// What a tick's reads of kernel files cost: each list of files read once a second, descriptors
// kept open, each read with pread from offset 0 to the end as the agent's collectors read them,
// the thread's CPU time around the list; the lists alternate, and each list's median, minimum
// and maximum are printed. Put the tick's first read (a PSI file) at the head of each list: the
// first read after a sleep pays for the cold kernel paths whatever the file.
// Build: gcc -O2 -o /tmp/tick_reads bench/tick_reads.c
// Run:   used=$(awk '$4+$8>0 {printf "/sys/class/block/%s/stat ", $3}' /proc/diskstats)
//        /tmp/tick_reads 25 "/proc/pressure/io /proc/diskstats" "/proc/pressure/io $used"
//        (issue 47: the list against the used devices' own files)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kMaxLists = 16, kMaxFiles = 64 };

static double cpuMicroseconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int byValue(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc - 2 > kMaxLists) {
    fprintf(stderr, "usage: %s ROUNDS \"FILE...\" [\"FILE...\" ...] (at most %d lists)\n", argv[0],
            kMaxLists);
    return 2;
  }
  const int rounds = atoi(argv[1]), lists = argc - 2;
  static int fds[kMaxLists][kMaxFiles];
  int counts[kMaxLists];
  static char buffer[65536];
  for (int l = 0; l < lists; ++l) {
    counts[l] = 0;
    char* names = strdup(argv[l + 2]);
    for (char* name = strtok(names, " "); name && counts[l] < kMaxFiles; name = strtok(NULL, " ")) {
      const int fd = open(name, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        perror(name);
        return 1;
      }
      fds[l][counts[l]++] = fd;
    }
  }
  double* costs = calloc((size_t)rounds * (size_t)lists, sizeof(double));
  for (int r = 0; r < rounds; ++r) {
    for (int l = 0; l < lists; ++l) {
      usleep(1000000);
      const double start = cpuMicroseconds();
      for (int i = 0; i < counts[l]; ++i) {
        off_t at = 0;
        ssize_t n;
        while ((n = pread(fds[l][i], buffer, sizeof buffer, at)) > 0) at += n;
      }
      costs[l * rounds + r] = cpuMicroseconds() - start;
    }
  }
  for (int l = 0; l < lists; ++l) {
    double* c = costs + l * rounds;
    qsort(c, (size_t)rounds, sizeof(double), byValue);
    printf("%s\n  median %.1f us (min %.1f, max %.1f) over %d rounds\n", argv[l + 2], c[rounds / 2],
           c[0], c[rounds - 1], rounds);
  }
  free(costs);
  return 0;
}
