// The Kubernetes pod a process runs in, for naming its job: the pod's UID from the process's
// cgroup path (the kubelet puts each pod in a cgroup named after it), its namespace and name
// from the kubelet's log directory on the node, /var/log/pods/NAMESPACE_NAME_UID, and its
// container's name from the kubelet's links in /var/log/containers, so that the agent needs no
// access to the API server. Neither a namespace nor a pod name may hold '_'.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/samples.h"

namespace stallwatch::collectors {

// The pod UID in a cgroup v2 path, with dashes: the systemd driver's
// ".../kubepods-burstable-pod1a2b_3c4d_....slice/cri-containerd-ID.scope" or the cgroupfs
// driver's "/kubepods/besteffort/pod1a2b-3c4d-.../ID"; none outside kubepods.
std::optional<std::string> podUidFromCgroup(std::string_view cgroup_path);
// The pod with UID among POD_LOGS' entries (NAMESPACE_NAME_UID); none if it is not there.
std::optional<PodName> podByUid(const std::filesystem::path& pod_logs, const std::string& uid);
// The container ID in a cgroup v2 path's last part: "cri-containerd-ID.scope",
// "crio-ID.scope", "docker-ID.scope" (systemd driver) or a bare 64-hex ID (cgroupfs).
std::optional<std::string> containerIdFromCgroup(std::string_view cgroup_path);
// The name of POD's container ID among the kubelet's links in CONTAINER_LOGS
// (/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log); "" when none matches.
std::string containerName(const std::filesystem::path& container_logs, const PodName& pod,
                          const std::string& id);

}  // namespace stallwatch::collectors
