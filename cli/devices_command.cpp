#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/root_options.h"
#include "collectors/devices/block_devices.h"
#include "collectors/gpu/gpu.h"
#include "common/text.h"

namespace stallwatch::cli {
namespace {

struct DevicesArgs {
  RootOptions root;
  bool json = false;
  std::string nvml_library = "libnvidia-ml.so.1";
};

std::string humanBytes(std::optional<uint64_t> bytes) {
  if (!bytes) return "-";
  static const char* kUnits[] = {"B", "K", "M", "G", "T", "P"};
  double v = static_cast<double>(*bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f}{}", v, kUnits[unit]);
  return fmt::format("{:.1f}{}", v, kUnits[unit]);
}

std::string devnum(const collectors::BlockDevice& d) {
  return d.major ? fmt::format("{}:{}", *d.major, *d.minor) : "?";
}

std::string join(const std::vector<std::string>& parts, const char* sep = ",") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// What the device sits on, in words: "on vda", "dm over sda,sdb", "file /x.img on vda1".
std::string underneath(const collectors::DeviceTree& tree, const collectors::BlockDevice& d) {
  std::string text;
  if (!d.served_by.empty()) {
    text = d.served_by;  // a mount target: "nfs4 server 10.0.0.5:/export", "overlay over loop0"
  } else if (!d.slaves.empty()) {
    text = "over " + join(d.slaves);
  }
  if (!d.backing_file.empty()) {
    text = "file " + d.backing_file;
    if (!d.backing_device.empty()) text += " on " + d.backing_device;
  }
  const auto physical = tree.physicalDevices(d.name);
  if (!(physical.size() == 1 && physical[0] == d.name) && !physical.empty() &&
      d.kind != collectors::BlockKind::kPartition) {
    text += (text.empty() ? "" : "; ") + std::string("physical ") + join(physical);
  }
  return text;
}

nlohmann::json toJson(const collectors::DeviceTree& tree, const collectors::BlockDevice& d) {
  nlohmann::json j;
  j["name"] = d.name;
  j["major"] = d.major ? nlohmann::json(*d.major) : nlohmann::json(nullptr);
  j["minor"] = d.minor ? nlohmann::json(*d.minor) : nlohmann::json(nullptr);
  j["kind"] = collectors::toString(d.kind);
  if (!d.parent.empty()) j["parent"] = d.parent;
  if (!d.slaves.empty()) j["slaves"] = d.slaves;
  if (!d.dm_name.empty()) j["dm_name"] = d.dm_name;
  if (!d.backing_file.empty()) j["backing_file"] = d.backing_file;
  if (!d.backing_device.empty()) j["backing_device"] = d.backing_device;
  if (!d.served_by.empty()) j["served_by"] = d.served_by;
  j["physical"] = tree.physicalDevices(d.name);
  j["model"] = d.identity.model;
  j["serial"] = d.identity.serial;
  j["wwn"] = d.identity.wwn;
  j["transport"] = d.identity.transport;
  j["rotational"] =
      d.identity.rotational ? nlohmann::json(*d.identity.rotational) : nlohmann::json(nullptr);
  j["size_bytes"] =
      d.identity.size_bytes ? nlohmann::json(*d.identity.size_bytes) : nlohmann::json(nullptr);
  nlohmann::json mounts = nlohmann::json::array();
  for (const auto& m : d.mounts) {
    mounts.push_back(
        {{"mount_point", m.mount_point}, {"fs_type", m.fs_type}, {"source", m.source}});
  }
  j["mounts"] = mounts;
  return j;
}

int runDevices(const DevicesArgs& args) {
  const collectors::SystemRoot root = toSystemRoot(args.root);
  auto udev = collectors::makeUdevSourceFor(root);
  const collectors::DeviceTree tree = collectors::scanBlockDevices(root, *udev);
  // NVML describes the live host only; a captured tree has no GPUs to ask.
  std::vector<collectors::GpuInfo> gpus;
  std::string gpu_note;
  std::vector<collectors::GpuSample> gpu_samples;
  if (root.isHost()) {
    collectors::GpuCollectorOptions options;
    options.pcie = false;
    options.per_process = false;
    collectors::GpuCollector gpu(collectors::makeNvmlDriver(args.nvml_library), options);
    gpus = gpu.gpus();
    gpu_note = gpu.unavailableReason();
    collectors::SampleBatch batch;
    gpu.collect({}, batch);
    gpu_samples = batch.gpus;
  } else {
    gpu_note = "not read: --root/--sys point at a captured tree";
  }

  if (args.json) {
    nlohmann::json out;
    out["block_devices"] = nlohmann::json::array();
    for (const auto& d : tree.devices) out["block_devices"].push_back(toJson(tree, d));
    out["gpus"] = nlohmann::json::array();
    for (const auto& g : gpus) {
      nlohmann::json j{{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}};
      for (const auto& s : gpu_samples) {
        if (s.gpu_index == g.index && s.memory_total_bytes)
          j["memory_total_bytes"] = *s.memory_total_bytes;
      }
      out["gpus"].push_back(j);
    }
    if (gpus.empty()) out["gpu_unavailable_reason"] = gpu_note;
    printJson("devices", std::move(out));
    return 0;
  }

  std::cout << fmt::format("{:<14} {:<9} {:<9} {:>8} {:<4} {:<9} {:<24} {:<20} {}\n", "DEVICE",
                           "MAJ:MIN", "KIND", "SIZE", "ROT", "TRANSPORT", "MODEL", "SERIAL",
                           "MOUNTS / UNDERNEATH");
  for (const auto& d : tree.devices) {
    std::string where;
    for (const auto& m : d.mounts)
      where += (where.empty() ? "" : " ") + common::printable(m.mount_point) + " (" +
               common::printable(m.fs_type) + ")";
    // Every field can come from outside (a FUSE mount point is the device's name here, a backing
    // file's path, a drive's model string): made visible before the terminal (issue 46).
    const std::string under = common::printable(underneath(tree, d));
    if (!under.empty()) where += (where.empty() ? "" : "; ") + under;
    const std::string shown = common::printable(d.name);
    const std::string name = d.kind == collectors::BlockKind::kPartition ? "└─" + shown : shown;
    std::cout << fmt::format(
        "{:<14} {:<9} {:<9} {:>8} {:<4} {:<9} {:<24} {:<20} {}\n", name, devnum(d),
        collectors::toString(d.kind), humanBytes(d.identity.size_bytes),
        d.identity.rotational ? (*d.identity.rotational ? "yes" : "no") : "-",
        d.identity.transport.empty() ? "-" : common::printable(d.identity.transport),
        d.identity.model.empty() ? "-" : common::printable(d.identity.model.substr(0, 24)),
        d.identity.serial.empty() ? "-" : common::printable(d.identity.serial.substr(0, 20)),
        where);
  }
  if (tree.devices.empty())
    std::cout << "(no block devices in " << root.sys.string() << "/block)\n";
  std::cout << "\n";
  if (gpus.empty()) {
    std::cout << "GPUs: none (" << gpu_note << ")\n";
  } else {
    std::cout << fmt::format("{:<4} {:<32} {:<42} {}\n", "GPU", "NAME", "UUID", "MEMORY");
    for (const auto& g : gpus) {
      std::optional<uint64_t> total;
      for (const auto& s : gpu_samples) {
        if (s.gpu_index == g.index) total = s.memory_total_bytes;
      }
      std::cout << fmt::format("{:<4} {:<32} {:<42} {}\n", g.index, g.name, g.uuid,
                               humanBytes(total));
    }
  }
  return 0;
}

}  // namespace

CommandRunner addDevicesCommand(CLI::App& app) {
  auto args = std::make_shared<DevicesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List block devices (with partitions, dm/md/loop stacks and mounts) and GPUs");
  cmd->add_flag("--json", args->json, "Print JSON instead of a table");
  cmd->add_option("--nvml-library", args->nvml_library, "NVML library to load")
      ->capture_default_str();
  addRootOptions(*cmd, args->root);
  return [args] { return runDevices(*args); };
}

}  // namespace stallwatch::cli
