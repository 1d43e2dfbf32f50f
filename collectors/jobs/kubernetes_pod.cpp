#include "collectors/jobs/kubernetes_pod.h"

#include <algorithm>
#include <cctype>
#include <system_error>

namespace stallwatch::collectors {
namespace {

// A pod UID: 32 hex digits in groups of 8-4-4-4-12, here with '-' or '_' between them.
bool isUid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool separator = i == 8 || i == 13 || i == 18 || i == 23;
    if (separator ? (s[i] != '-' && s[i] != '_') : !std::isxdigit(static_cast<unsigned char>(s[i])))
      return false;
  }
  return true;
}

bool isHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

std::optional<std::string> podUidFromCgroup(std::string_view path) {
  if (path.find("kubepods") == std::string_view::npos) return std::nullopt;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    start = end + 1;
    if (part.size() > 6 && part.substr(part.size() - 6) == ".slice") part.remove_suffix(6);
    const size_t pod = part.rfind("pod");
    if (pod == std::string_view::npos) continue;
    const std::string_view uid = part.substr(pod + 3);
    if (!isUid(uid)) continue;
    std::string out(uid);
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
  }
  return std::nullopt;
}

std::optional<PodName> podByUid(const std::filesystem::path& pod_logs, const std::string& uid) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(pod_logs, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t first = name.find('_'), last = name.rfind('_');
    if (first == std::string::npos || last == first || name.substr(last + 1) != uid) continue;
    return PodName{name.substr(0, first), name.substr(first + 1, last - first - 1), ""};
  }
  return std::nullopt;
}

std::optional<std::string> containerIdFromCgroup(std::string_view path) {
  if (path.find("kubepods") == std::string_view::npos) return std::nullopt;
  std::string_view last = path.substr(path.rfind('/') + 1);
  if (last.size() > 6 && last.substr(last.size() - 6) == ".scope") {
    last.remove_suffix(6);
    last = last.substr(last.rfind('-') + 1);  // cri-containerd-ID, crio-ID, docker-ID
  }
  // Container runtimes name containers by 64 hex digits (a SHA-256).
  if (last.size() != 64 || !isHex(last)) return std::nullopt;
  return std::string(last);
}

std::string containerName(const std::filesystem::path& container_logs, const PodName& pod,
                          const std::string& id) {
  const std::string prefix = pod.name + "_" + pod.ns + "_", suffix = "-" + id + ".log";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(container_logs, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() + suffix.size() &&
        name.compare(0, prefix.size(), prefix) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  }
  return "";
}

}  // namespace stallwatch::collectors
