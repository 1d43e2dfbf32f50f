// NVML's own memory: RSS (anonymous, file-backed) before dlopen, after it, after nvmlInitWithFlags(FLAGS)
// and after a first call. Built on the GPU host, which has gcc and the driver but no Debian packages:
//   gcc -O1 -o /tmp/nvml_rss bench/nvml_rss.c -ldl && for f in 0 1 2; do /tmp/nvml_rss $f; done
// (1: NVML_INIT_FLAG_NO_GPUS, 2: NVML_INIT_FLAG_NO_ATTACH). docs/MEASUREMENTS.md quotes it.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
static void rss(const char* when) {
  FILE* f = fopen("/proc/self/status", "r"); char line[256];
  printf("%-28s", when);
  while (fgets(line, sizeof line, f)) if (!strncmp(line, "RssAnon", 7) || !strncmp(line, "RssFile", 7)) { line[strlen(line)-1] = 0; printf(" %s", line); }
  fclose(f); printf("\n");
}
int main(int argc, char** argv) {
  unsigned flags = argc > 1 ? atoi(argv[1]) : 0;
  rss("before dlopen");
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
  rss("after dlopen");
  int (*initf)(unsigned) = dlsym(h, "nvmlInitWithFlags");
  int (*count)(unsigned*) = dlsym(h, "nvmlDeviceGetCount_v2");
  int r = initf(flags);
  char what[64]; snprintf(what, sizeof what, "after init(flags=%u) rc=%d", flags, r);
  rss(what);
  unsigned n = 0; int rc = count(&n);
  snprintf(what, sizeof what, "after count rc=%d n=%u", rc, n);
  rss(what);
  return 0;
}
