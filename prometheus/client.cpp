#include "prometheus/client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/text.h"

namespace stallwatch::prometheus {
namespace {

// A token file larger than this is no token: /dev/zero or a log file named by mistake.
constexpr size_t kMaxTokenBytes = 64 * 1024;

// The bearer token in PATH: a regular file of at most kMaxTokenBytes, opened without blocking,
// its content trimmed and one token (no line break or other control character, which would add
// a header of the file's choosing to every request).
std::string readToken(const std::string& path) {
  if (const std::string why = common::whyNotARegularFile(path); !why.empty())
    throw QueryError(path + ": cannot read the bearer token: " + why);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw QueryError(path + ": cannot read the bearer token: " + std::strerror(errno));
  std::string text(kMaxTokenBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > kMaxTokenBytes)
    throw QueryError(
        fmt::format("{}: the token file is over {} KiB: not a token", path, kMaxTokenBytes / 1024));
  text.resize(got);
  return text;
}

std::string trimmed(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string percentEncoded(std::string_view s) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string secondsText(int64_t ms) {
  return fmt::format("{}{}.{:03}", ms < 0 ? "-" : "", std::llabs(ms) / 1000, std::llabs(ms) % 1000);
}

class CurlTransport : public Transport {
 public:
  explicit CurlTransport(ClientOptions options) : options_(std::move(options)) {
    static const bool ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    if (!ready) throw QueryError("libcurl could not be initialised");
    while (!options_.url.empty() && options_.url.back() == '/') options_.url.pop_back();
    shown_url_ = common::printable(common::withoutUserinfo(options_.url));
    if (options_.url.rfind("http://", 0) != 0 && options_.url.rfind("https://", 0) != 0)
      throw QueryError(shown_url_ + ": not an http:// or https:// URL");
    if (!options_.bearer_token_file.empty()) {
      token_ = trimmed(readToken(options_.bearer_token_file));
      if (token_.empty())
        throw QueryError(options_.bearer_token_file + ": the token file is empty");
      if (std::any_of(token_.begin(), token_.end(),
                      [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
        throw QueryError(options_.bearer_token_file +
                         ": the token holds a line break or another control character: not "
                         "one token");
    }
    for (const auto* file : {&options_.ca_file, &options_.cert_file, &options_.key_file}) {
      if (file->empty()) continue;
      if (const std::string why = common::whyNotARegularFile(*file); !why.empty())
        throw QueryError(*file + ": " + why);
    }
    for (const auto& h : options_.headers) {
      if (h.find(':') == std::string::npos || h.find_first_of("\r\n") != std::string::npos)
        throw QueryError("header \"" + h + "\": not \"Name: value\" on one line");
    }
  }

  std::string get(const std::string& path_and_query) override {
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) throw QueryError("curl_easy_init failed");
    CURL* c = curl.get();
    const std::string url = options_.url + path_and_query;
    curl_slist* list = nullptr;
    std::string auth;
    if (!token_.empty()) {
      auth = "Authorization: Bearer " + token_;
      list = curl_slist_append(list, auth.c_str());
    }
    for (const auto& h : options_.headers) list = curl_slist_append(list, h.c_str());
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, curl_slist_free_all);
    std::string body;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    if (list) curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        started_ + options_.deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0)
      throw QueryError(
          fmt::format("{}: the command's deadline of {} s passed (--prometheus-deadline)",
                      shown_url_, options_.deadline.count() / 1000));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::min(options_.timeout, remaining).count()));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip where the server offers it
    curl_easy_setopt(c, CURLOPT_USERAGENT, "stallwatch/" STALLWATCH_VERSION);
    if (!options_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
    if (!options_.cert_file.empty())
      curl_easy_setopt(c, CURLOPT_SSLCERT, options_.cert_file.c_str());
    if (!options_.key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, options_.key_file.c_str());
    if (options_.insecure_skip_verify) {
      curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(
        c, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* out) {
          auto* b = static_cast<std::string*>(out);
          if (b->size() + size * n > kMaxAnswerBytes) return size_t{0};  // aborts: said below
          b->append(p, size * n);
          return size * n;
        });
    const CURLcode rc = curl_easy_perform(c);
    const std::string shown = common::printable(common::withoutUserinfo(url));
    if (rc == CURLE_WRITE_ERROR)
      throw AnswerTooLarge(
          fmt::format("{}: the answer passed {} MiB", shown, kMaxAnswerBytes >> 20));
    if (rc == CURLE_OPERATION_TIMEDOUT && remaining.count() < options_.timeout.count())
      throw QueryError(
          fmt::format("{}: the command's deadline of {} s passed (--prometheus-deadline)", shown,
                      options_.deadline.count() / 1000));
    if (rc != CURLE_OK) throw QueryError(fmt::format("{}: {}", shown, curl_easy_strerror(rc)));
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status / 100 != 2) {
      // The API says why in its JSON ("error"); anything else is shown as it came, cut short.
      std::string why = body.substr(0, 300);
      try {
        const auto j = nlohmann::json::parse(body);
        if (j.contains("error")) why = j["error"].get<std::string>();
      } catch (const std::exception&) {
      }
      // The server's text is the server's: made visible, never sent to a terminal as it came.
      throw QueryError(
          fmt::format("{}: HTTP {}: {}", shown_url_, status, common::printable(trimmed(why))));
    }
    return body;
  }

 private:
  ClientOptions options_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::string token_;
  std::string shown_url_;  // the URL as errors say it: no password, no control characters
};

// SAX over {"status":..., "data":{"resultType":"matrix","result":[{"metric":{...},
// "values":[[ts,"v"],...]},...]}}: the points go straight into the series, no DOM. With EACH,
// each series is handed over as it ends and not kept.
class MatrixReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  MatrixReader() = default;
  explicit MatrixReader(const std::function<void(RangeSeries&)>& each) : each_(&each) {}

  enum class Where { kRoot, kData, kResult, kSeries, kMetric, kValues, kPoint, kOther };

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return number(v); }
  bool binary(binary_t&) override { return value(); }
  bool string(string_t& s) override {
    const Where w = where();
    if (w == Where::kRoot && key_ == "status") status = s;
    if (w == Where::kRoot && key_ == "error") error = s;
    if (w == Where::kData && key_ == "resultType") result_type = s;
    if (w == Where::kMetric) series.back().labels[key_] = s;
    if (w == Where::kPoint && index_ == 1) {
      const char* begin = s.c_str();
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      series.back().values.push_back(end != begin ? v : std::nan(""));
    }
    return value();
  }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool parse_error(std::size_t at, const std::string&,
                   const nlohmann::detail::exception& e) override {
    throw QueryError(fmt::format("the answer is not JSON at byte {}: {}", at, e.what()));
  }

  std::string status, error, result_type;
  std::vector<RangeSeries> series;

 private:
  struct Frame {
    Where where;
    std::string key;  // the key that led to the container open inside this frame
    size_t index;     // the next element's index, in an array
  };

  Where where() const { return stack_.empty() ? Where::kOther : stack_.back().where; }

  bool open(bool object) {
    const Where parent = where();
    Where w = Where::kOther;
    if (stack_.empty() && object) w = Where::kRoot;
    if (parent == Where::kRoot && key_ == "data" && object) w = Where::kData;
    if (parent == Where::kData && key_ == "result" && !object) w = Where::kResult;
    if (parent == Where::kResult && object) {
      w = Where::kSeries;
      series.emplace_back();
    }
    if (parent == Where::kSeries && key_ == "metric" && object) w = Where::kMetric;
    if (parent == Where::kSeries && key_ == "values" && !object) w = Where::kValues;
    if (parent == Where::kValues && !object) w = Where::kPoint;
    stack_.push_back({w, key_, 0});
    index_ = 0;
    return true;
  }
  bool close() {
    const Frame done = stack_.back();
    stack_.pop_back();
    if (done.where == Where::kPoint && series.back().ts_ms.size() != series.back().values.size())
      throw QueryError("a point of the answer is not [time, \"value\"]");
    if (done.where == Where::kSeries && each_) {
      (*each_)(series.back());
      series.pop_back();
    }
    key_ = stack_.empty() ? std::string() : done.key;
    return value();
  }
  bool number(double v) {
    if (where() == Where::kPoint && index_ == 0)
      series.back().ts_ms.push_back(std::llround(v * 1000.0));
    return value();
  }
  // After each value: the next element of an array.
  bool value() {
    if (!stack_.empty()) index_ = ++stack_.back().index;
    return true;
  }

  std::vector<Frame> stack_;
  std::string key_;
  size_t index_ = 0;
  const std::function<void(RangeSeries&)>* each_ = nullptr;
};

void checkMatrix(const MatrixReader& reader) {
  if (reader.status != "success") {
    throw QueryError("the query failed: " + (reader.error.empty()
                                                 ? std::string("no status in the answer")
                                                 : reader.error));
  }
  if (reader.result_type != "matrix")
    throw QueryError("the answer is a " + reader.result_type + ", not a range (matrix)");
}

}  // namespace

std::unique_ptr<Transport> httpTransport(const ClientOptions& options) {
  return std::make_unique<CurlTransport>(options);
}

std::vector<RangeSeries> parseMatrix(std::string_view body) {
  MatrixReader reader;
  nlohmann::json::sax_parse(body, &reader);
  checkMatrix(reader);
  return std::move(reader.series);
}

void parseMatrix(std::string_view body, const std::function<void(RangeSeries&)>& each) {
  MatrixReader reader(each);
  nlohmann::json::sax_parse(body, &reader);
  checkMatrix(reader);
}

std::string promqlString(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

Client::Client(std::unique_ptr<Transport> transport, size_t max_points_per_request)
    : transport_(std::move(transport)), max_points_(std::max<size_t>(1, max_points_per_request)) {}

void Client::queryRangeEach(const std::string& expr, int64_t start_ms, int64_t end_ms,
                            int64_t step_ms, const std::function<void(RangeSeries&)>& each) {
  if (step_ms <= 0) throw QueryError("the step must be positive");
  size_t points = max_points_;
  for (int64_t from = start_ms; from <= end_ms;) {
    const int64_t chunk = static_cast<int64_t>(points - 1) * step_ms;
    const int64_t to = std::min(end_ms, from + chunk);
    std::string body;
    const auto asked = std::chrono::steady_clock::now();
    auto waited = [&] {
      const std::chrono::duration<double> d = std::chrono::steady_clock::now() - asked;
      stats_.waited_s += d.count();
      return d.count();
    };
    try {
      body = transport_->get(fmt::format("/api/v1/query_range?query={}&start={}&end={}&step={}",
                                         percentEncoded(expr), secondsText(from), secondsText(to),
                                         secondsText(step_ms)));
    } catch (const AnswerTooLarge&) {
      waited();
      ++stats_.requests;
      if (points == 1) throw;
      points = std::max<size_t>(1, points / 2);  // the same span again, in smaller pieces
      continue;
    }
    const double took_s = waited();
    spdlog::debug("prometheus: {:.0f} ms, {} bytes: {}", took_s * 1000, body.size(), expr);
    from = to + step_ms;
    ++stats_.requests;
    stats_.bytes += body.size();
    if (on_answer_) on_answer_(stats_);
    std::set<std::map<std::string, std::string>> in_answer;
    parseMatrix(body, [&](RangeSeries& s) {
      stats_.points += s.ts_ms.size();
      if (!in_answer.insert(s.labels).second)
        throw QueryError("the server sent one series twice in one answer: not a PromQL answer");
      each(s);
    });
  }
}

std::vector<RangeSeries> Client::queryRange(const std::string& expr, int64_t start_ms,
                                            int64_t end_ms, int64_t step_ms) {
  std::vector<RangeSeries> out;
  std::map<std::map<std::string, std::string>, size_t> index;
  queryRangeEach(expr, start_ms, end_ms, step_ms, [&](RangeSeries& s) {
    auto [it, fresh] = index.try_emplace(s.labels, out.size());
    if (fresh) {
      out.push_back(std::move(s));
      return;
    }
    RangeSeries& into = out[it->second];
    into.ts_ms.insert(into.ts_ms.end(), s.ts_ms.begin(), s.ts_ms.end());
    into.values.insert(into.values.end(), s.values.begin(), s.values.end());
  });
  return out;
}

}  // namespace stallwatch::prometheus
