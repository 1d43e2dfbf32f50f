// The Prometheus endpoint: GET /metrics renders the board's latest snapshot.
//
// Served by a small poll loop rather than cpp-httplib: Debian 12's httplib (0.11.4) gives each
// connection a worker thread and a per-read timeout only, so four clients that send a header
// line every few seconds held both workers and every scrape waited (issue 19). Here one
// thread serves at most kMaxConnections at once, never waiting on one, each with a whole-request
// deadline (the request head within kRequestTimeout, the response out within as long again); when
// all are taken, the oldest connection is closed for the new one, so a flood of slow clients delays
// a scrape by at most one deadline. A client that keeps its connection (HTTP/1.1 without
// "Connection: close", as Prometheus does) keeps it idle up to kIdleTimeout between requests:
// no connection set up and torn down each scrape (issue 47, the agent's CPU beside
// node_exporter's).
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/metrics.h"
#include "collectors/self_process.h"

namespace stallwatch::agent {

struct ListenAddress {
  std::string host;
  int port = 0;
};

// ":9877" (and "9877") mean every interface, IPv6 and IPv4, as node_exporter's ":9100" does
// (issue 43: a central Prometheus got "connection refused" from the loopback this meant before);
// "127.0.0.1:9877", "[::1]:9877", "10.0.0.5:9877" as written. Nullopt if it is not one of those.
// HOST is empty for every interface.
std::optional<ListenAddress> parseListenAddress(const std::string& text);

// A body served: shared, not copied, from the page rendered once an interval.
using HttpBody = std::shared_ptr<const std::string>;

// The response to one request head (up to the blank line), as sent: status line and headers,
// then, except for HEAD, the body; and whether the connection stays open for the next request
// (an HTTP/1.1 request that does not ask to close, answered without an error). BODY_FOR gives
// the body of a path served ("/metrics", "/"), null for one that is not.
struct HttpAnswer {
  std::string head;
  HttpBody body;  // null: none sent (HEAD)
  bool keep_alive = false;
  std::string bytes() const { return body ? head + *body : head; }
};
HttpAnswer httpResponse(std::string_view head,
                        const std::function<HttpBody(std::string_view)>& body_for);

// Served by whoever owns it: the recorder's own loop polls its descriptors beside the tick's
// timer, so that a scrape and the tick it takes share one wake-up (TickSchedule); replay, whose
// loop sleeps between batches, has it serve on a thread of its own.
class MetricsServer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxConnections = 64;
  static constexpr std::chrono::seconds kRequestTimeout{5};
  static constexpr std::chrono::seconds kIdleTimeout{120};  // a kept connection between requests
  static constexpr size_t kMaxRequestHead = 4096;

  // Binds at once: throws std::runtime_error if the address cannot be bound.
  MetricsServer(const ListenAddress& address, const MetricsBoard& board);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }

  // Called before the page is taken from the board for a request of /metrics, with the time and
  // how long since that connection's previous request (none: its first): the recorder takes a
  // tick due about now here, so that the page is of this moment. Set before serving.
  using PageRequested = std::function<void(Clock::time_point, std::optional<Clock::duration>)>;
  void onPageRequest(PageRequested fn) { on_page_ = std::move(fn); }

  // The owner's loop: appends the descriptors to wait on to FDS and returns the time by which
  // serve() must run even if none is ready (a connection's deadline; max() when none is open).
  Clock::time_point pollFds(std::vector<pollfd>& fds) const;
  // After a poll of what pollFds() appended (READY: those entries, in order): takes the new
  // connections, reads, answers, and closes what is done or past its deadline.
  void serve(std::span<const pollfd> ready, Clock::time_point now);
  // Or a thread of its own serves it until destruction.
  void serveOnOwnThread();

 private:
  struct Connection {
    int fd;
    Clock::time_point deadline;
    std::string in;
    std::string out;                                // the answer's head, then
    HttpBody out_body;                              // its body, sent from the shared page
    size_t sent = 0;                                // of both
    bool keep_alive = false;                        // the answer leaves the connection open
    std::optional<Clock::time_point> last_request;  // when its previous request came
  };
  // Reads what CONNECTION's client sent and, once its request is whole, answers it; true when
  // it is done with (answered, failed or closed by the client).
  bool serveConnection(Connection& connection, Clock::time_point now);
  HttpBody bodyFor(std::string_view path) const;
  void drop(size_t i);

  const MetricsBoard& board_;
  PageRequested on_page_;
  // The page last rendered and the snapshot it is of (the serving thread's alone).
  mutable std::shared_ptr<const MetricsSnapshot> page_of_;
  mutable HttpBody page_;
  mutable collectors::SelfProcessReader self_;  // the serving thread's alone
  mutable MetricsPageRenderer renderer_;        // the same
  std::vector<Connection> connections_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor writes to end the own thread's loop
  int port_ = 0;
  std::thread thread_;
};

}  // namespace stallwatch::agent
