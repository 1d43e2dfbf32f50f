#pragma once
// The wait for input of a loop with pin_memory, from where its main thread was sampled asleep and
// its GPU's idle time: the bounds it lies between (the limiter's figures per interval, and its
// verdict over a span, both use them).

#include <optional>

namespace stallwatch::correlator {

// The input wait of a loop whose DataLoader pins its batches: it sleeps in a futex both while
// its batch is pinned (the pinning thread's queue) and while it waits on its GPU (CUDA's sync,
// the autograd engine), so the futex share alone cannot tell them apart. The GPU's idle time
// bounds it from both sides: the loop waiting for input has an idle GPU, so the wait is at most
// the GPU's idle share (and the loop's sleeping share); the futex time that the GPU's busy time
// cannot cover, and the GPU's idle time that the main thread's running (launching kernels) and
// other sleeps cannot cover, are input waits, so it is at least either. On issue 41's runs (a
// GPT-style LM with its workers tokenising, ResNet-50 on one GPU and on 4 DDP ranks, pin_memory
// on, no hook) the step logs' own waits fell inside these bounds in every run and the middle came
// within 5 points where the bounds lay on one side of the 15 % that decides (docs/MEASUREMENTS.md,
// "The verdict without the hook"); the midpoint of the queue's share and that plus the futex's,
// used before, read 32 % against a step log's 63 %. Without a GPU reading, the queue's share and
// that plus the futex's are the bounds.
struct WaitBounds {
  double low = 0, high = 0;
  double middle() const { return (low + high) / 2; }
};
WaitBounds pinnedWait(double loader, double futex, std::optional<double> gpu_idle,
                      std::optional<double> thread_cpu);

}  // namespace stallwatch::correlator
