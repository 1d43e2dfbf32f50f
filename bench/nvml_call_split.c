// Probe: the CPU each NVML call of one GPU sample costs, the GPM reading split into its two
// calls (the sample, then the metrics computed from two samples) and by how many metrics are
// asked for, beside the calls the agent makes less often. Every call is timed in the calling
// thread's CPU time, once per ITERATION, ITERATIONS times, 100 ms apart (as a sampler would,
// so that GPM has an interval to compute over); the median and p90 are printed per GPU.
// Built and run on the GPU host, with the toolkit's nvml.h:
//   gcc -O2 -I/usr/local/cuda/include -o /tmp/split bench/nvml_call_split.c -ldl && /tmp/split 100
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOAD(name) \
  if (!(p_##name = dlsym(lib, #name))) { fprintf(stderr, "no %s\n", #name); return 1; }
static nvmlReturn_t (*p_nvmlInit_v2)(void);
static nvmlReturn_t (*p_nvmlDeviceGetCount_v2)(unsigned*);
static nvmlReturn_t (*p_nvmlDeviceGetHandleByIndex_v2)(unsigned, nvmlDevice_t*);
static nvmlReturn_t (*p_nvmlDeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
static nvmlReturn_t (*p_nvmlDeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
static nvmlReturn_t (*p_nvmlDeviceGetClockInfo)(nvmlDevice_t, nvmlClockType_t, unsigned*);
static nvmlReturn_t (*p_nvmlDeviceGetPowerUsage)(nvmlDevice_t, unsigned*);
static nvmlReturn_t (*p_nvmlDeviceGetComputeRunningProcesses_v3)(nvmlDevice_t, unsigned*,
                                                                 nvmlProcessInfo_t*);
static nvmlReturn_t (*p_nvmlGpmSampleAlloc)(nvmlGpmSample_t*);
static nvmlReturn_t (*p_nvmlGpmSampleGet)(nvmlDevice_t, nvmlGpmSample_t);
static nvmlReturn_t (*p_nvmlGpmMetricsGet)(nvmlGpmMetricsGet_t*);

enum { kCalls = 8 };
static const char* names[kCalls] = {
    "nvmlDeviceGetUtilizationRates",  "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetClockInfo (SM)",    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlGpmSampleGet",               "nvmlGpmMetricsGet, 4 metrics",
    "nvmlGpmMetricsGet, 1 metric (SM_UTIL)"};

static double cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}
static void metrics(nvmlGpmSample_t a, nvmlGpmSample_t b, unsigned n) {
  static const unsigned ids[] = {NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY,
                                 NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL};
  nvmlGpmMetricsGet_t get;
  memset(&get, 0, sizeof get);
  get.version = NVML_GPM_METRICS_GET_VERSION;
  get.numMetrics = n;
  get.sample1 = a;
  get.sample2 = b;
  for (unsigned i = 0; i < n; ++i) get.metrics[i].metricId = ids[i];
  p_nvmlGpmMetricsGet(&get);
}

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? atoi(argv[1]) : 100;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  LOAD(nvmlInit_v2) LOAD(nvmlDeviceGetCount_v2) LOAD(nvmlDeviceGetHandleByIndex_v2)
  LOAD(nvmlDeviceGetUtilizationRates) LOAD(nvmlDeviceGetMemoryInfo) LOAD(nvmlDeviceGetClockInfo)
  LOAD(nvmlDeviceGetPowerUsage) LOAD(nvmlDeviceGetComputeRunningProcesses_v3)
  LOAD(nvmlGpmSampleAlloc) LOAD(nvmlGpmSampleGet) LOAD(nvmlGpmMetricsGet)
  if (p_nvmlInit_v2() != NVML_SUCCESS) { fprintf(stderr, "nvmlInit failed\n"); return 1; }
  unsigned count = 0;
  p_nvmlDeviceGetCount_v2(&count);
  for (unsigned g = 0; g < count; ++g) {
    nvmlDevice_t d;
    p_nvmlDeviceGetHandleByIndex_v2(g, &d);
    nvmlGpmSample_t s[2];
    p_nvmlGpmSampleAlloc(&s[0]);
    p_nvmlGpmSampleAlloc(&s[1]);
    p_nvmlGpmSampleGet(d, s[0]);
    double* t[kCalls];
    for (int c = 0; c < kCalls; ++c) t[c] = calloc(iterations, sizeof(double));
    for (int i = 0; i < iterations; ++i) {
      struct timespec pause = {0, 100 * 1000 * 1000};
      nanosleep(&pause, NULL);
      nvmlUtilization_t u;
      nvmlMemory_t m;
      unsigned v, n = 64;
      nvmlProcessInfo_t procs[64];
      double t0 = cpu_us();
      p_nvmlDeviceGetUtilizationRates(d, &u);
      double t1 = cpu_us();
      p_nvmlDeviceGetMemoryInfo(d, &m);
      double t2 = cpu_us();
      p_nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &v);
      double t3 = cpu_us();
      p_nvmlDeviceGetPowerUsage(d, &v);
      double t4 = cpu_us();
      p_nvmlDeviceGetComputeRunningProcesses_v3(d, &n, procs);
      double t5 = cpu_us();
      nvmlGpmSample_t now = s[(i + 1) % 2], before = s[i % 2];
      p_nvmlGpmSampleGet(d, now);
      double t6 = cpu_us();
      metrics(before, now, 4);
      double t7 = cpu_us();
      metrics(before, now, 1);
      double t8 = cpu_us();
      double at[kCalls + 1] = {t0, t1, t2, t3, t4, t5, t6, t7, t8};
      for (int c = 0; c < kCalls; ++c) t[c][i] = at[c + 1] - at[c];
    }
    printf("GPU %u, %d iterations 100 ms apart, CPU of the calling thread:\n", g, iterations);
    for (int c = 0; c < kCalls; ++c) {
      qsort(t[c], iterations, sizeof(double), cmp);
      printf("  %-42s median %8.1f us  p90 %8.1f us\n", names[c], t[c][iterations / 2],
             t[c][iterations * 9 / 10]);
      free(t[c]);
    }
  }
  return 0;
}
