// Telling the service manager how the agent is doing: systemd's notification protocol
// (sd_notify(3), NOTIFY_SOCKET), written out rather than linked from libsystemd: one datagram
// of "KEY=value" lines to the socket the manager names, which systemd documents as a stable
// interface for exactly this. Under Type=notify, READY=1 is what `systemctl start` waits for.
#pragma once

#include <string>
#include <string_view>

namespace stallwatch::common {

// Sends STATE ("READY=1", "STATUS=...", "STOPPING=1", newline-separated) to $NOTIFY_SOCKET.
// Returns "" when sent or when no manager listens (NOTIFY_SOCKET unset), else why it failed.
// Never blocks: the datagram is sent without waiting.
std::string notifyServiceManager(std::string_view state);

// RELOADING=1 with the monotonic time systemd's Type=notify-reload asks for.
std::string reloadingState();

}  // namespace stallwatch::common
