#pragma once
// When the per-I/O collector traces each request's start (a second program on the I/O path) and
// when its completion alone serves (issue 47): pure, so the tests drive it tick by tick.

#include <cstdint>
#include <vector>

#include "collectors/samples.h"

namespace stallwatch::collectors {

// The first followed job whose cgroup lacks the io controller (its requests' bios name another
// cgroup, so their starts must be traced to be told as its); none where every one has it, or
// the job has no cgroup of its own (the root's: nobody's job).
inline const JobSample* jobWithoutIoController(const std::vector<JobSample>& jobs) {
  for (const JobSample& j : jobs) {
    if (!j.cgroup_ids.empty() && !j.cgroups_have_io) return &j;
  }
  return nullptr;
}

class StartTracing {
 public:
  // Detached only after this many ticks without need: a flood of short jobs without the io
  // controller would otherwise attach and detach it every few ticks, each a patch of the
  // kernel's text that interrupts every CPU.
  static constexpr uint32_t kUnneededTicksBeforeDetach = 10;
  enum class Act { kKeep, kAttach, kDetach };

  // This tick's act: attach at once when NEEDED and not ATTACHED; detach once unneeded long
  // enough.
  Act tick(bool needed, bool attached) {
    unneeded_ = needed ? 0 : unneeded_ + 1;
    if (needed) return attached ? Act::kKeep : Act::kAttach;
    return attached && unneeded_ >= kUnneededTicksBeforeDetach ? Act::kDetach : Act::kKeep;
  }

 private:
  uint32_t unneeded_ = 0;
};

}  // namespace stallwatch::collectors
