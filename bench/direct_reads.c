// 4 KiB random reads with O_DIRECT at queue depth 1 from DEVICE for SECONDS (its first GiB);
// prints how many. bench/direct_reads.py's loop without the interpreter: a read of a loop device
// on tmpfs takes a few microseconds here, so what the per-I/O programs add to each shows in the
// count with the kernel's BPF statistics off (issue 47: bench/io_latency_cost_gpu_host.sh
// READER=..., STATS=0).
//
//   cc -O2 -static -o /tmp/direct_reads bench/direct_reads.c && /tmp/direct_reads /dev/loop0 6
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DEVICE SECONDS\n", argv[0]);
    return 2;
  }
  const int fd = open(argv[1], O_RDONLY | O_DIRECT);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  off_t size = lseek(fd, 0, SEEK_END);
  if (size > (1LL << 30)) size = 1LL << 30;  // the first GiB: reads, never writes
  const uint64_t blocks = size / 4096 > 0 ? (uint64_t)(size / 4096) : 1;
  void* buf = NULL;
  if (posix_memalign(&buf, 4096, 4096) != 0) return 1;
  uint64_t x = 88172645463325252ULL, n = 0;  // xorshift: the same offsets every run
  const double end = now() + atof(argv[2]);
  while ((n & 63) != 0 || now() < end) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (pread(fd, buf, 4096, (off_t)(x % blocks) * 4096) != 4096) {
      perror("pread");
      return 1;
    }
    ++n;
  }
  printf("%llu\n", (unsigned long long)n);
  return 0;
}
