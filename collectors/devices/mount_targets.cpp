#include "collectors/devices/mount_targets.h"

#include <map>

#include "collectors/counter_rates.h"
#include "collectors/devices/block_devices.h"
#include "collectors/devices/mountstats.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

class MountTargetsCollector final : public Collector {
 public:
  explicit MountTargetsCollector(const SystemRoot& root)
      : mountstats_(root.proc / "self" / "mountstats"),
        fuse_connections_(root.sys / "fs" / "fuse" / "connections") {}

  std::string_view name() const override { return "mounts"; }
  bool wantsDeviceTree() const override { return true; }
  void setDeviceTree(const std::shared_ptr<const DeviceTree>& tree) override { tree_ = tree; }

  CollectResult collect(const Tick& tick, SampleBatch& out) override {
    const double elapsed = static_cast<double>(tick.monotonic_ns - last_tick_ns_) / 1e9;
    last_tick_ns_ = tick.monotonic_ns;
    if (!tree_) return CollectResult::noData("no device tree yet");
    bool any_nfs = false, any_fuse = false;
    for (const auto& d : tree_->devices) {
      any_nfs |= d.kind == BlockKind::kNfs;
      any_fuse |= d.kind == BlockKind::kFuse;
    }
    if (!any_nfs && !any_fuse) {
      previous_.clear();
      return CollectResult::noData("no NFS or FUSE mount");
    }
    CollectResult result = CollectResult::data();
    if (any_nfs) collectNfs(elapsed, out, result);
    if (any_fuse) collectFuse(out, result);
    return result;
  }

 private:
  void collectNfs(double elapsed, SampleBatch& out, CollectResult& result) {
    std::string error;
    if (!mountstats_.read(buffer_, error)) {
      result.message = error;
      previous_.clear();
      return;
    }
    MountstatsParse parsed = parseMountstats(buffer_);
    result.skipped += parsed.skipped.size();
    if (!parsed.skipped.empty()) {
      result.message = mountstats_.path().string() + " line " +
                       std::to_string(parsed.skipped.front().line) + ": " +
                       parsed.skipped.front().message;
    }
    std::map<std::string, NfsMountStats> now;
    for (const auto& d : tree_->devices) {
      if (d.kind != BlockKind::kNfs || !d.major || !d.minor) continue;
      const NfsMountStats* stats = nullptr;
      for (const auto& m : parsed.mounts) {
        for (const auto& point : d.mounts) {
          if (m.mount_point == point.mount_point) stats = &m;
        }
        if (stats) break;
      }
      if (!stats) continue;
      if (auto before = previous_.find(d.name); before != previous_.end()) {
        NfsRatesResult r = computeNfsRates(before->second, *stats, elapsed);
        if (r.rates) {
          DiskSample s{d.name, *d.major, *d.minor, *r.rates, 0, std::nullopt, r.nfs};
          out.disks.push_back(std::move(s));
        }
      }
      now.emplace(d.name, *stats);
    }
    previous_ = std::move(now);
  }

  void collectFuse(SampleBatch& out, CollectResult& result) {
    for (const auto& d : tree_->devices) {
      if (d.kind != BlockKind::kFuse || !d.major || !d.minor) continue;
      const auto text = readAttribute(fuse_connections_ / std::to_string(*d.minor) / "waiting");
      const auto waiting = text ? parseUnsigned(*text) : std::nullopt;
      if (!waiting) {
        if (!said_no_fusectl_) {
          result.notice = "FUSE mount " + d.name + " has no " +
                          (fuse_connections_ / std::to_string(*d.minor) / "waiting").string() +
                          ": its queue is not sampled (is fusectl mounted on " +
                          fuse_connections_.string() + "?)";
          said_no_fusectl_ = true;
        }
        continue;
      }
      DiskSample s;
      s.device = d.name;
      s.major = *d.major;
      s.minor = *d.minor;
      s.rates.aqu_sz = static_cast<double>(*waiting);
      s.in_flight = *waiting;
      out.disks.push_back(std::move(s));
    }
  }

  ProcFile mountstats_;
  std::filesystem::path fuse_connections_;
  std::shared_ptr<const DeviceTree> tree_;
  std::map<std::string, NfsMountStats> previous_;  // by target name
  std::string buffer_;
  int64_t last_tick_ns_ = 0;
  bool said_no_fusectl_ = false;
};

}  // namespace

std::unique_ptr<Collector> makeMountTargetsCollector(const SystemRoot& root) {
  return std::make_unique<MountTargetsCollector>(root);
}

}  // namespace stallwatch::collectors
