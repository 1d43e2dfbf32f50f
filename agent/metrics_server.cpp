#include "agent/metrics_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <vector>

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
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return std::nullopt;
  }
  a.port = port;
  return a;
}

namespace {

// Whether HEAD's headers hold NAME: VALUE (both compared without case, VALUE among a list's).
bool headerSays(std::string_view head, std::string_view name, std::string_view value) {
  auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
  };
  for (size_t at = head.find('\n'); at != std::string_view::npos; at = head.find('\n', at + 1)) {
    const std::string_view line = head.substr(at + 1, head.find('\n', at + 1) - at - 1);
    if (line.size() <= name.size() || line[name.size()] != ':' ||
        !same(line.substr(0, name.size()), name))
      continue;
    for (size_t i = name.size() + 1; i + value.size() <= line.size(); ++i)
      if (same(line.substr(i, value.size()), value)) return true;
  }
  return false;
}

}  // namespace

HttpAnswer httpResponse(std::string_view head,
                        const std::function<HttpBody(std::string_view)>& body_for) {
  const std::string_view line = head.substr(0, head.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  auto reply = [](int code, const char* reason, std::string_view type, HttpBody body,
                  bool with_body, bool keep, const char* extra = "") {
    return HttpAnswer{"HTTP/1.1 " + std::to_string(code) + " " + reason +
                          "\r\nContent-Type: " + std::string(type) +
                          "\r\nContent-Length: " + std::to_string(body->size()) + "\r\n" + extra +
                          (keep ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n"),
                      with_body ? std::move(body) : nullptr, keep};
  };
  auto text = [](const char* t) { return std::make_shared<const std::string>(t); };
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0) {
    return reply(400, "Bad Request", "text/plain", text("bad request\n"), true, false);
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET" && method != "HEAD") {
    return reply(405, "Method Not Allowed", "text/plain", text("GET or HEAD\n"), true, false,
                 "Allow: GET, HEAD\r\n");
  }
  // HTTP/1.1 keeps the connection unless the client asks to close it; 1.0 closes it.
  const bool keep =
      line.substr(sp2 + 1).rfind("HTTP/1.1", 0) == 0 && !headerSays(head, "Connection", "close");
  HttpBody body = body_for(path);
  if (!body)
    return reply(404, "Not Found", "text/plain", text("not found\n"), method == "GET", keep);
  const std::string_view type =
      path == "/metrics" ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain";
  return reply(200, "OK", type, std::move(body), method == "GET", keep);
}

namespace {

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Where the request head in IN ends (past its blank line), or npos while it is not whole.
size_t headEnd(const std::string& in) {
  const size_t crlf = in.find("\r\n\r\n"), lf = in.find("\n\n");
  if (crlf != std::string::npos && (lf == std::string::npos || crlf < lf)) return crlf + 4;
  return lf == std::string::npos ? std::string::npos : lf + 2;
}

}  // namespace

namespace {

// A listening socket on HOST:PORT, or on every interface where HOST is empty: IPv6's any address
// taking IPv4 too (IPV6_V6ONLY off), else IPv4's alone (a host without IPv6). -1 if none binds.
int bindListener(const ListenAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  std::vector<std::string> hosts = {address.host};
  if (address.host.empty()) hosts = {"::", "0.0.0.0"};
  for (const auto& host : hosts) {
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(address.port).c_str(), &hints, &found) != 0)
      continue;
    for (addrinfo* a = found; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      // SO_REUSEADDR alone: a quick restart (a socket in TIME_WAIT) binds, a port another
      // process listens on does not (SO_REUSEPORT would let two agents share it).
      int yes = 1, no = 0;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      if (a->ai_family == AF_INET6 && address.host.empty())
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
      if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) {
        freeaddrinfo(found);
        return fd;
      }
      close(fd);
    }
    freeaddrinfo(found);
  }
  return -1;
}

}  // namespace

MetricsServer::MetricsServer(const ListenAddress& address, const MetricsBoard& board)
    : board_(board) {
  const std::string failure =
      "cannot listen on " + (address.host.empty() ? "every interface" : address.host) + ", port " +
      std::to_string(address.port) + " (in use, or not an address of this host)";
  listen_fd_ = bindListener(address);
  if (listen_fd_ < 0) throw std::runtime_error(failure);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  setNonBlocking(listen_fd_);
  spdlog::info("metrics at http://{}:{}/metrics (every interface where no host is given)",
               address.host.empty()                          ? std::string("*")
               : address.host.find(':') != std::string::npos ? "[" + address.host + "]"
                                                             : address.host,
               port_);
}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    const char stop = 1;
    [[maybe_unused]] const ssize_t n = write(wake_[1], &stop, 1);
    thread_.join();
    close(wake_[0]);
    close(wake_[1]);
  }
  for (size_t i = connections_.size(); i-- > 0;) drop(i);
  close(listen_fd_);
}

void MetricsServer::serveOnOwnThread() {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error("cannot create the metrics server's wake-up pipe");
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sw-metrics");  // per-thread CPU in top -H, the benches
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wake_[0], POLLIN, 0}});
      const auto until = pollFds(fds);
      // Asleep until a connection's deadline, or (none open) until one comes.
      const auto now = Clock::now();
      const int timeout = until == Clock::time_point::max()
                              ? -1
                              : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(
                                                     std::max(until - now, Clock::duration::zero()))
                                                     .count());
      if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) break;
      serve(std::span(fds).subspan(1), Clock::now());
    }
  });
}

HttpBody MetricsServer::bodyFor(std::string_view path) const {
  if (path == "/metrics") {
    // One rendering per interval's snapshot, however many scrape it (two Prometheus servers in
    // HA, a person's curl): the page is a function of the snapshot alone.
    const auto snapshot = board_.latest();
    if (!snapshot) return std::make_shared<const std::string>();
    if (snapshot != page_of_) {
      page_ = std::make_shared<const std::string>(renderer_.render(*snapshot, self_.read()));
      page_of_ = snapshot;
    }
    return page_;
  }
  if (path == "/")
    return std::make_shared<const std::string>("stallwatch agent: metrics at /metrics\n");
  return nullptr;
}

bool MetricsServer::serveConnection(Connection& c, Clock::time_point now) {
  for (;;) {
    if (c.out.empty()) {
      if (headEnd(c.in) == std::string::npos) {
        char buffer[4096];
        const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
        if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EINTR);
        // A kept connection's next request has the request's deadline from its first byte.
        if (c.in.empty()) c.deadline = std::min(c.deadline, now + kRequestTimeout);
        c.in.append(buffer, static_cast<size_t>(n));
      }
      // The bound first: a head past it is refused even when it arrived whole in one read (a
      // GET has no body, so whatever came is head).
      const size_t end = headEnd(c.in);
      if ((end == std::string::npos ? c.in.size() : end) > kMaxRequestHead) {
        c.out =
            "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n";
        c.keep_alive = false;
      } else if (end != std::string::npos) {
        const std::optional<Clock::duration> since =
            c.last_request ? std::optional(now - *c.last_request) : std::nullopt;
        c.last_request = now;
        HttpAnswer answer =
            httpResponse(std::string_view(c.in).substr(0, end), [&](std::string_view path) {
              if (path == "/metrics" && on_page_) on_page_(now, since);
              return bodyFor(path);
            });
        c.out = std::move(answer.head);
        c.out_body = std::move(answer.body);
        c.keep_alive = answer.keep_alive;
        c.in.erase(0, end);
        c.deadline = now + kRequestTimeout;
      } else {
        return false;
      }
    }
    // Sent at once where the socket takes it (a page fits a loopback or LAN socket's buffer):
    // the head and the shared page in one call, neither copied into the other.
    const size_t total = c.out.size() + (c.out_body ? c.out_body->size() : 0);
    iovec parts[2];
    int n_parts = 0;
    if (c.sent < c.out.size()) {
      parts[n_parts++] = {c.out.data() + c.sent, c.out.size() - c.sent};
    }
    if (c.out_body) {
      const size_t body_sent = c.sent > c.out.size() ? c.sent - c.out.size() : 0;
      parts[n_parts++] = {const_cast<char*>(c.out_body->data()) + body_sent,
                          c.out_body->size() - body_sent};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(n_parts);
    const ssize_t n = sendmsg(c.fd, &message, MSG_NOSIGNAL);
    if (n > 0) c.sent += static_cast<size_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return true;
    if (c.sent < total) return false;
    if (!c.keep_alive) return true;
    // Answered, and kept for the next request: idle until it comes.
    c.out.clear();
    c.out_body.reset();
    c.sent = 0;
    c.deadline = now + kIdleTimeout;
    if (headEnd(c.in) == std::string::npos) return false;  // none pipelined behind it
  }
}

void MetricsServer::drop(size_t i) {
  close(connections_[i].fd);
  connections_.erase(connections_.begin() + static_cast<long>(i));
}

MetricsServer::Clock::time_point MetricsServer::pollFds(std::vector<pollfd>& fds) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  // No wake-up while idle but for a connection's deadline (a context switch costs this
  // process's time, issue 47).
  Clock::time_point until = Clock::time_point::max();
  for (const Connection& c : connections_) {
    fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    until = std::min(until, c.deadline);
  }
  return until;
}

void MetricsServer::serve(std::span<const pollfd> ready, Clock::time_point now) {
  // Served, failed or past its deadline: closed. Newest last, so indices shift only behind.
  for (size_t i = connections_.size(); i-- > 0;) {
    const short revents = i + 1 < ready.size() ? ready[i + 1].revents : 0;
    const bool done =
        now >= connections_[i].deadline || (revents & (POLLERR | POLLNVAL)) ||
        ((revents & (POLLIN | POLLHUP | POLLOUT)) && serveConnection(connections_[i], now));
    if (done) drop(i);
  }
  if (ready.empty() || !(ready[0].revents & POLLIN)) return;
  // At most a full house a round: a flood of connections does not hold the loop (and the
  // tick it runs) in accept.
  for (size_t n = 0; n < kMaxConnections; ++n) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (connections_.size() >= kMaxConnections) drop(0);  // the oldest makes room
    connections_.push_back({fd, now + kRequestTimeout, {}, {}, nullptr, 0, false, std::nullopt});
    // A scraper sends its request with the connection: read and answer it now, not a round of
    // poll later for each step (two wake-ups a scrape fewer).
    if (serveConnection(connections_.back(), now)) drop(connections_.size() - 1);
  }
}

}  // namespace stallwatch::agent
