// Probe: how much of NVML's anonymous memory after nvmlInit is pages that hold only zeros
// (written by the init, e.g. a memset of its tables, but carrying nothing), and whether NVML
// still works once those pages are given back with MADV_DONTNEED (a private anonymous page
// given back reads as zero again, so its content does not change).
// Built and run on the GPU host:
//   gcc -O1 -o /tmp/nvml_zero_pages bench/nvml_zero_pages.c -ldl && /tmp/nvml_zero_pages 10
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long page;

static void status(const char* when) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  printf("%-34s", when);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "RssAnon", 7) || !strncmp(line, "RssFile", 7) || !strncmp(line, "Threads", 7)) {
      line[strlen(line) - 1] = 0;
      printf(" %s", line);
    }
  fclose(f);
  printf("\n");
}

static int zero(const unsigned char* p) {
  const uint64_t* w = (const uint64_t*)p;
  for (long i = 0; i < page / 8; ++i)
    if (w[i]) return 0;
  return 1;
}

// Every anonymous (no path) private writable mapping: resident pages, and those all zero.
// TRIM: give the zero ones back. AFTER: only mappings that start where a libnvidia-ml or
// libcuda mapping ends (their bss), else all anonymous mappings.
static void scan(int trim, int only_nvidia) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512], prev[512] = "";
  unsigned long prev_end = 0;
  long total_res = 0, total_zero = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8], path[400] = "";
    unsigned long off;
    unsigned dev_major, dev_minor;
    unsigned long inode;
    int n = sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %399s", &lo, &hi, perms, &off, &dev_major,
                   &dev_minor, &inode, path);
    int anon = n < 8 && inode == 0;
    int after_nvidia = lo == prev_end && (strstr(prev, "libnvidia-ml") || strstr(prev, "libcuda"));
    if (anon && perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p' &&
        (!only_nvidia || after_nvidia)) {
      size_t pages = (hi - lo) / page;
      unsigned char* vec = malloc(pages);
      long res = 0, zeros = 0, dropped = 0;
      if (mincore((void*)lo, hi - lo, vec) == 0) {
        for (size_t i = 0; i < pages; ++i) {
          if (!(vec[i] & 1)) continue;
          ++res;
          unsigned char* p = (unsigned char*)lo + i * page;
          if (!zero(p)) continue;
          ++zeros;
          if (trim && madvise(p, page, MADV_DONTNEED) == 0) ++dropped;
        }
      }
      free(vec);
      total_res += res;
      total_zero += zeros;
      if (res * page >= 256 * 1024)
        printf("  %lx-%lx %6lu kB resident %6ld kB, zero %6ld kB%s%s\n", lo, hi, (hi - lo) / 1024,
               res * page / 1024, zeros * page / 1024, after_nvidia ? "  (after " : "",
               after_nvidia ? (strstr(prev, "libcuda") ? "libcuda)" : "libnvidia-ml)") : "");
    }
    strncpy(prev, line, sizeof prev - 1);
    prev_end = hi;
  }
  fclose(f);
  printf("  anonymous rw: resident %ld kB, of which zero %ld kB%s\n", total_res * page / 1024,
         total_zero * page / 1024, trim ? " (given back)" : "");
}

typedef struct { unsigned gpu, memory; } Util;
typedef struct { unsigned long long total, free, used; } Mem;

int main(int argc, char** argv) {
  page = sysconf(_SC_PAGESIZE);
  int seconds = argc > 1 ? atoi(argv[1]) : 10;
  status("before dlopen");
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
  int (*init)(void) = dlsym(h, "nvmlInit_v2");
  int (*count)(unsigned*) = dlsym(h, "nvmlDeviceGetCount_v2");
  int (*handle)(unsigned, void**) = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  int (*util)(void*, Util*) = dlsym(h, "nvmlDeviceGetUtilizationRates");
  int (*mem)(void*, Mem*) = dlsym(h, "nvmlDeviceGetMemoryInfo");
  int (*shutdown)(void) = dlsym(h, "nvmlShutdown");
  status("after dlopen");
  printf("init rc=%d\n", init());
  status("after init");
  printf("scan (all anonymous rw mappings, nothing given back):\n");
  scan(0, 0);
  printf("give back the zero pages of the mappings after libnvidia-ml / libcuda:\n");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  scan(1, 1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("  took %.2f ms\n", (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
  status("after giving back");
  unsigned n = 0;
  printf("count rc=%d n=%u\n", count(&n), n);
  for (int s = 0; s < seconds; ++s) {
    for (unsigned i = 0; i < n; ++i) {
      void* d = 0;
      Util u = {0, 0};
      Mem m = {0, 0, 0};
      int rh = handle(i, &d), ru = util(d, &u), rm = mem(d, &m);
      if (s == 0 || s == seconds - 1)
        printf("  s=%d gpu %u: handle rc=%d util rc=%d %u %% mem rc=%d used %llu MiB of %llu\n", s, i,
               rh, ru, u.gpu, rm, m.used >> 20, m.total >> 20);
    }
    sleep(1);
  }
  status("after the calls");
  printf("scan again:\n");
  scan(0, 1);
  printf("shutdown rc=%d\n", shutdown());
  printf("init again rc=%d\n", init());
  status("after a second init");
  printf("shutdown rc=%d\n", shutdown());
  return 0;
}
