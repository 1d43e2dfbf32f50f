// A reader of the Prometheus HTTP query API (/api/v1/query_range), which Thanos Query and
// Mimir serve too: the one way the fleet report reads a run from the operators' own metrics
// store. Long spans are asked for in chunks (Prometheus answers at most 11 000 points a series
// per request) and joined; answers are parsed as they are read (SAX), never held as a DOM: a
// fleet's answer is tens of MB of JSON.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stallwatch::prometheus {

// What went wrong talking to the server, said for people: the URL, the HTTP status and the
// server's own error text.
class QueryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// An answer past the size the client holds (kMaxAnswerBytes): asked again over fewer steps.
class AnswerTooLarge : public QueryError {
 public:
  using QueryError::QueryError;
};

// The most of one answer the client holds; a larger one is refused as it arrives (issue 46: a
// 3 GiB answer was buffered whole before a refusal at 1 GiB).
constexpr size_t kMaxAnswerBytes = size_t{256} << 20;

struct ClientOptions {
  std::string url;  // base URL: http(s)://host:port, with a path prefix where one serves the API
  std::string bearer_token_file;      // its content (trimmed) goes as "Authorization: Bearer ..."
  std::string ca_file;                // TLS: the CA bundle that signs the server's certificate
  std::string cert_file, key_file;    // TLS client certificate
  bool insecure_skip_verify = false;  // TLS: accept any certificate (said on stderr)
  std::vector<std::string> headers;   // "Name: value" each, e.g. Mimir's X-Scope-OrgID
  std::chrono::milliseconds timeout{120'000};  // per request
  // For the whole command: every request after it is refused, and each is given at most what
  // is left of it (issue 46: 46 requests of up to 120 s each had no bound together).
  std::chrono::milliseconds deadline{600'000};
};

// One series of a range query: its labels, its points in time order (NaN kept as NaN).
struct RangeSeries {
  std::map<std::string, std::string> labels;
  std::vector<int64_t> ts_ms;
  std::vector<double> values;

  // The label NAME's value, "" where the series has none.
  std::string label(const std::string& name) const {
    const auto it = labels.find(name);
    return it == labels.end() ? std::string() : it->second;
  }
};

// The transport: GET PATH_AND_QUERY under the base URL; returns the body of a 2xx answer and
// throws QueryError otherwise (a 4xx/5xx with the API's error text). Tests give a fake.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string get(const std::string& path_and_query) = 0;
};

std::unique_ptr<Transport> httpTransport(const ClientOptions& options);

struct QueryStats {
  size_t requests = 0;
  size_t bytes = 0;     // answers' bodies
  size_t points = 0;    // samples returned
  double waited_s = 0;  // waiting for the answers (the server's evaluation and the transfer)
};

class Client {
 public:
  explicit Client(std::unique_ptr<Transport> transport, size_t max_points_per_request = 10'000);

  // EXPR over [START_MS, END_MS] every STEP_MS, in chunks of at most max_points_per_request
  // steps (halved, down to one, while an answer is too large); the chunks' series joined by
  // their labels. An answer naming one series twice is refused (PromQL never sends one).
  // Throws QueryError.
  std::vector<RangeSeries> queryRange(const std::string& expr, int64_t start_ms, int64_t end_ms,
                                      int64_t step_ms);
  // The same, each series handed to EACH as its answer is parsed, and not kept: a thousand
  // nodes' series of one figure are never held at once. A series cut into chunks (a long span)
  // comes once a chunk, in time order.
  void queryRangeEach(const std::string& expr, int64_t start_ms, int64_t end_ms, int64_t step_ms,
                      const std::function<void(RangeSeries&)>& each);
  const QueryStats& stats() const { return stats_; }
  // Called after each answer with the figures so far: a long report's progress.
  void onAnswer(std::function<void(const QueryStats&)> fn) { on_answer_ = std::move(fn); }

 private:
  std::unique_ptr<Transport> transport_;
  size_t max_points_;
  QueryStats stats_;
  std::function<void(const QueryStats&)> on_answer_;
};

// The "data.result" of a query_range answer (resultType matrix), parsed as it is read. Throws
// QueryError on an answer that is not a successful matrix (with the API's error text).
std::vector<RangeSeries> parseMatrix(std::string_view body);
// The same, each series handed to EACH as it ends.
void parseMatrix(std::string_view body, const std::function<void(RangeSeries&)>& each);

// A label value as PromQL's string literal writes it: quoted, with \ " and newlines escaped.
std::string promqlString(std::string_view value);

}  // namespace stallwatch::prometheus
