#pragma once
// When the per-I/O collector traces each request's start (a second program on the I/O path) and
// when its completion alone serves (issue 47): pure, so the tests drive it tick by tick.

#include <cstdint>
#include <vector>

#include "collectors/samples.h"

namespace stallwatch::collectors {

// How a request's completion alone tells whose I/O it is, for the followed jobs (issue 47):
//  kBio    its bio's cgroup: every followed job's cgroups have the io controller, so the bio
//          names the cgroup that submitted it;
//  kPages  the memory cgroup charged for its first page: some job's cgroups lack io but every
//          job's have memory (a login session's scope or a launcher's unit, where systemd turns on
//          memory accounting by default and io not; on a hybrid host, a v1 memory cgroup that
//          mirrors the job's: JobSample::memory_cgroup_ids), so the pages its processes bring in
//          or read into are charged to the job's own memory cgroup;
//  kStarts neither serves: each request's start is traced in the submitter's context (a second
//          program on the I/O path).
// Named with it: the first job whose cgroups lack io (none for kBio) and, for kStarts, the
// first whose lack memory. Jobs without a cgroup of their own (the root's: nobody's job) are
// left out.
struct OwnerSource {
  enum Kind { kBio, kPages, kStarts } kind = kBio;
  const JobSample* without_io = nullptr;
  const JobSample* without_memory = nullptr;
};

inline OwnerSource ownerSourceFor(const std::vector<JobSample>& jobs) {
  OwnerSource source;
  for (const JobSample& j : jobs) {
    if (j.cgroup_ids.empty()) continue;
    if (!j.cgroups_have_io && !source.without_io) source.without_io = &j;
    if (!j.cgroups_have_memory && !source.without_memory) source.without_memory = &j;
  }
  if (source.without_io)
    source.kind = source.without_memory ? OwnerSource::kStarts : OwnerSource::kPages;
  return source;
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
