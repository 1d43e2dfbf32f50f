// The Prometheus API reader (prometheus/client.h): answers parsed as they are read, errors said,
// long spans asked for in chunks and joined. The real server is in tests/test_live_e2e.py.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>

#include "common/text.h"
#include "prometheus/client.h"
#include "test_support.h"

namespace stallwatch::prometheus {
namespace {

// Answers each request from a function of its path, and keeps the paths asked.
class FakeTransport : public Transport {
 public:
  explicit FakeTransport(std::function<std::string(const std::string&)> answer)
      : answer_(std::move(answer)) {}
  std::string get(const std::string& path) override {
    asked->push_back(path);
    return answer_(path);
  }
  std::shared_ptr<std::vector<std::string>> asked = std::make_shared<std::vector<std::string>>();

 private:
  std::function<std::string(const std::string&)> answer_;
};

TEST(PrometheusClient, ParsesAMatrixWithLabelsNaNAndWarnings) {
  const auto series = parseMatrix(R"({"status":"success","warnings":["partial"],
    "data":{"resultType":"matrix","result":[
      {"metric":{"node":"gpu-1","run":"slurm:7"},"values":[[1700000000,"0.5"],[1700000015.5,"NaN"]]},
      {"metric":{"node":"gpu-2"},"values":[[1700000000.001,"+Inf"]]}]}})");
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].labels.at("node"), "gpu-1");
  EXPECT_EQ(series[0].labels.at("run"), "slurm:7");
  EXPECT_EQ(series[0].ts_ms, (std::vector<int64_t>{1'700'000'000'000, 1'700'000'015'500}));
  EXPECT_DOUBLE_EQ(series[0].values[0], 0.5);
  EXPECT_TRUE(std::isnan(series[0].values[1]));
  EXPECT_EQ(series[1].ts_ms.front(), 1'700'000'000'001);
  EXPECT_TRUE(std::isinf(series[1].values.front()));
}

TEST(PrometheusClient, AFailedOrForeignAnswerIsSaid) {
  try {
    parseMatrix(R"({"status":"error","errorType":"bad_data","error":"parse error at char 3"})");
    FAIL() << "no error";
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("parse error at char 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseMatrix(R"({"status":"success","data":{"resultType":"vector","result":[]}})"),
               QueryError);
  EXPECT_THROW(parseMatrix("<html>502 Bad Gateway</html>"), QueryError);
  EXPECT_THROW(parseMatrix(R"({"status":"success","data":{"resultType":"matrix","result":[
      {"metric":{},"values":[[1,"1"],[2]]}]}})"),
               QueryError);
}

TEST(PrometheusClient, LongSpansAreAskedInChunksAndJoined) {
  // Seven steps, at most three points a request: three requests, the series joined in order.
  auto transport = std::make_unique<FakeTransport>([](const std::string& path) {
    const auto start = std::stoll(path.substr(path.find("start=") + 6));
    const auto end = std::stoll(path.substr(path.find("end=") + 4));
    std::string values;
    for (auto t = start; t <= end; t += 10) {
      values += (values.empty() ? "" : ",") + std::string("[") + std::to_string(t) + ",\"" +
                std::to_string(t / 10) + "\"]";
    }
    return R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[)" +
           values + "]}]}}";
  });
  auto asked = transport->asked;
  Client client(std::move(transport), 3);
  const auto series = client.queryRange("up{a=\"b\"}", 0, 60'000, 10'000);
  ASSERT_EQ(asked->size(), 3u);
  EXPECT_NE(asked->front().find("query=up%7Ba%3D%22b%22%7D&start=0.000&end=20.000&step=10.000"),
            std::string::npos)
      << asked->front();
  EXPECT_NE((*asked)[1].find("start=30.000&end=50.000"), std::string::npos) << (*asked)[1];
  EXPECT_NE((*asked)[2].find("start=60.000&end=60.000"), std::string::npos) << (*asked)[2];
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].ts_ms,
            (std::vector<int64_t>{0, 10'000, 20'000, 30'000, 40'000, 50'000, 60'000}));
  EXPECT_EQ(series[0].values.back(), 6);
  EXPECT_EQ(client.stats().requests, 3u);
  EXPECT_EQ(client.stats().points, 7u);
}

TEST(PrometheusClient, AnAnswerTooLargeIsAskedAgainInSmallerPiecesAndADuplicateIsRefused) {
  // The server refuses (as the transport does past kMaxAnswerBytes) any span over 2 steps.
  auto answer = [](const std::string& path, bool twice) {
    const auto start = std::stoll(path.substr(path.find("start=") + 6));
    const auto end = std::stoll(path.substr(path.find("end=") + 4));
    if (end - start > 10) throw AnswerTooLarge("too large");
    std::string values;
    for (auto t = start; t <= end; t += 10) {
      values += (values.empty() ? "" : ",") + std::string("[") + std::to_string(t) + ",\"1\"]";
    }
    const std::string one = R"({"metric":{"a":"b"},"values":[)" + values + "]}";
    return R"({"status":"success","data":{"resultType":"matrix","result":[)" + one +
           (twice ? "," + one : "") + "]}}";
  };
  auto transport =
      std::make_unique<FakeTransport>([&](const std::string& p) { return answer(p, false); });
  Client client(std::move(transport), 8);
  const auto series = client.queryRange("up", 0, 70'000, 10'000);
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].ts_ms.size(), 8u);  // every step, once
  EXPECT_EQ(series[0].ts_ms.back(), 70'000);
  Client refusing(
      std::make_unique<FakeTransport>([&](const std::string& p) { return answer(p, true); }), 2);
  EXPECT_THROW(refusing.queryRange("up", 0, 10'000, 10'000), QueryError);
}

// Series handed over as each answer is parsed (a thousand nodes' figure is never held whole):
// each series once per chunk, in time order, with its labels; a duplicate still refused.
TEST(PrometheusClient, SeriesAreHandedOverAsTheyAreParsed) {
  auto transport = std::make_unique<FakeTransport>([](const std::string& path) {
    const auto start = std::stoll(path.substr(path.find("start=") + 6));
    const auto end = std::stoll(path.substr(path.find("end=") + 4));
    std::string a, b;
    for (auto t = start; t <= end; t += 10) {
      a += (a.empty() ? "" : ",") + std::string("[") + std::to_string(t) + ",\"1\"]";
      b += (b.empty() ? "" : ",") + std::string("[") + std::to_string(t) + ",\"2\"]";
    }
    return R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"node":"a"},"values":[)" +
           a + R"(]},{"metric":{"node":"b"},"values":[)" + b + "]}]}}";
  });
  Client client(std::move(transport), 3);
  std::vector<std::pair<std::string, std::vector<int64_t>>> seen;
  client.queryRangeEach("up", 0, 50'000, 10'000,
                        [&](RangeSeries& s) { seen.emplace_back(s.label("node"), s.ts_ms); });
  // Two chunks of three steps, each with both series.
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].first, "a");
  EXPECT_EQ(seen[1].first, "b");
  EXPECT_EQ(seen[0].second, (std::vector<int64_t>{0, 10'000, 20'000}));
  EXPECT_EQ(seen[2].second, (std::vector<int64_t>{30'000, 40'000, 50'000}));
  EXPECT_EQ(client.stats().points, 12u);
  // queryRange, built on it, joins the chunks.
  const auto joined = client.queryRange("up", 0, 50'000, 10'000);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[1].values, (std::vector<double>(6, 2.0)));
}

TEST(PrometheusClient, LabelValuesAreQuotedForPromQL) {
  EXPECT_EQ(promqlString("slurm:1"), "\"slurm:1\"");
  EXPECT_EQ(promqlString("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
}

TEST(PrometheusClient, OptionsThatCannotWorkAreRefused) {
  ClientOptions o;
  o.url = "ftp://x";
  EXPECT_THROW(httpTransport(o), QueryError);
  o.url = "http://127.0.0.1:1";
  o.bearer_token_file = "/nonexistent/token";
  EXPECT_THROW(httpTransport(o), QueryError);
  o.bearer_token_file.clear();
  o.headers = {"no colon"};
  EXPECT_THROW(httpTransport(o), QueryError);
  o.headers = {"X-Scope-OrgID: t1"};
  auto t = httpTransport(o);
  // Nothing listens on port 1: the error names the URL.
  try {
    t->get("/api/v1/query_range?query=up");
    FAIL() << "no error";
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
}

// Issue 46: what the client reads from the operator's files and says back is checked where it
// enters. A token file's line break would add a header to every request; /dev/zero or a FIFO
// would read until memory ran out, or block until killed; a password in the URL was said in
// every error line.
TEST(PrometheusClient, TokenFilesThatAreNoTokenAreRefusedWithoutBlocking) {
  testing::ScratchDir dir;
  ClientOptions o;
  o.url = "http://127.0.0.1:1";
  auto write = [&](const char* name, const std::string& text) {
    const auto path = dir.path() / name;
    std::ofstream(path) << text;
    return path.string();
  };
  o.bearer_token_file = write("injected", "abc\r\nX-Injected: yes\r\n");
  EXPECT_THROW(httpTransport(o), QueryError);
  o.bearer_token_file = write("huge", std::string(100 * 1024, 'a'));
  EXPECT_THROW(httpTransport(o), QueryError);
  o.bearer_token_file = "/dev/zero";
  EXPECT_THROW(httpTransport(o), QueryError);
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  o.bearer_token_file = fifo.string();
  EXPECT_THROW(httpTransport(o), QueryError);  // said, not read: nothing writes the FIFO
  o.bearer_token_file.clear();
  o.ca_file = fifo.string();
  EXPECT_THROW(httpTransport(o), QueryError);
  o.ca_file.clear();
  o.bearer_token_file = write("good", "  abc.def-ghi\n");
  EXPECT_NO_THROW(httpTransport(o));
}

TEST(PrometheusClient, APasswordInTheUrlIsNeverSaid) {
  ClientOptions o;
  o.url = "http://user:s3cret@127.0.0.1:1";
  auto t = httpTransport(o);
  try {
    t->get("/api/v1/query_range?query=up");
    FAIL() << "no error";
  } catch (const QueryError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
    EXPECT_NE(what.find("***@127.0.0.1:1"), std::string::npos) << what;
  }
  EXPECT_EQ(common::withoutUserinfo("https://a:b@h:9/x?y=@"), "https://***@h:9/x?y=@");
  EXPECT_EQ(common::withoutUserinfo("http://h/p@q"), "http://h/p@q");
}

}  // namespace
}  // namespace stallwatch::prometheus
