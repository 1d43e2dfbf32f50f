// The Prometheus endpoint: GET /metrics renders the board's latest snapshot. cpp-httplib
// (Debian's libcpp-httplib-dev) serves it on two threads of its own, with read and write
// timeouts so that a slow or hostile client cannot hold the endpoint.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "agent/metrics.h"

namespace httplib {
class Server;
}

namespace stallwatch::agent {

struct ListenAddress {
  std::string host;
  int port = 0;
};

// "9877" and ":9877" mean 127.0.0.1:9877 (loopback unless an address says otherwise);
// "0.0.0.0:9877", "[::]:9877", "10.0.0.5:9877" as written. Nullopt if it is not one of those.
std::optional<ListenAddress> parseListenAddress(const std::string& text);

class MetricsServer {
 public:
  // Binds at once: throws std::runtime_error if the address cannot be bound.
  MetricsServer(const ListenAddress& address, const MetricsBoard& board);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace stallwatch::agent
