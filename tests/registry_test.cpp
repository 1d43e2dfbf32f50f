// The collectors' run order, declared in the registry (runs_after) rather than by their place
// in the table: io_latency reads the cgroups the jobs collector found in the same tick.
#include "collectors/registry.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace stallwatch::collectors {
namespace {

std::vector<std::string> names(const std::vector<const CollectorEntry*>& order) {
  std::vector<std::string> out;
  for (const auto* e : order) out.push_back(e->name);
  return out;
}

CollectorEntry entry(const std::string& name, std::vector<std::string> after = {}) {
  return {name, "", true, nullptr, std::move(after)};
}

TEST(Registry, ACollectorRunsAfterThoseItReadsWhereverTheTableListsIt) {
  const std::vector<CollectorEntry> table = {entry("io_latency", {"jobs"}), entry("diskstats"),
                                             entry("jobs", {"gpu"}), entry("gpu")};
  EXPECT_EQ(names(runOrder(table)),
            (std::vector<std::string>{"gpu", "jobs", "io_latency", "diskstats"}));
}

TEST(Registry, TheRealTableRunsJobsBeforeIoLatency) {
  const auto order = names(runOrder(collectorTable()));
  ASSERT_EQ(order.size(), collectorTable().size());
  const auto at = [&](const std::string& n) {
    return std::find(order.begin(), order.end(), n) - order.begin();
  };
  EXPECT_LT(at("jobs"), at("io_latency"));
}

TEST(Registry, AnUnknownNameOrACircleIsRefused) {
  EXPECT_THROW(runOrder({entry("io_latency", {"jbos"})}), std::invalid_argument);
  EXPECT_THROW(runOrder({entry("a", {"b"}), entry("b", {"a"})}), std::invalid_argument);
}

}  // namespace
}  // namespace stallwatch::collectors
