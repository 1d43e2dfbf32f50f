#include "agent/metrics_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <charconv>
#include <stdexcept>

namespace stallwatch::agent {

std::optional<ListenAddress> parseListenAddress(const std::string& text) {
  ListenAddress a;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {  // [v6]:port
    const size_t close = text.find("]:");
    if (close == std::string::npos) return std::nullopt;
    a.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    a.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (a.host.find(':') != std::string::npos) return std::nullopt;  // bare v6 without []
  } else {
    port_text = text;
  }
  if (a.host.empty()) a.host = "127.0.0.1";
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return std::nullopt;
  }
  a.port = port;
  return a;
}

MetricsServer::MetricsServer(const ListenAddress& address, const MetricsBoard& board)
    : server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // The library's default sets SO_REUSEPORT: a second agent on the same port then bound
  // fine and scrapes alternated between the two. SO_REUSEADDR alone allows a quick restart
  // (a socket in TIME_WAIT) and refuses a port another process listens on.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->set_keep_alive_max_count(100);
  server_->set_payload_max_length(4096);
  server_->Get("/metrics", [&board](const httplib::Request&, httplib::Response& res) {
    const auto snapshot = board.latest();
    res.set_content(snapshot ? renderMetrics(*snapshot) : std::string(),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("stallwatch agent: metrics at /metrics\n", "text/plain");
  });
  if (address.port == 0) {
    port_ = server_->bind_to_any_port(address.host);
  } else if (server_->bind_to_port(address.host, address.port)) {
    port_ = address.port;
  }
  if (port_ <= 0) {
    throw std::runtime_error("cannot listen on " + address.host + ":" +
                             std::to_string(address.port) +
                             " (in use, or not an address of this host)");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  spdlog::info(
      "metrics at http://{}:{}/metrics",
      address.host.find(':') != std::string::npos ? "[" + address.host + "]" : address.host, port_);
}

MetricsServer::~MetricsServer() {
  server_->stop();
  thread_.join();
}

}  // namespace stallwatch::agent
