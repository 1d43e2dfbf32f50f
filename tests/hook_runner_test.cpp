#include "agent/hook_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace stallwatch::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class HookRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stallwatch-hook-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A hook script: BODY runs under /bin/sh (the script's own choice; the agent uses none).
  std::string script(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

TEST_F(HookRunnerTest, RunsTheProgramWithTheEventOnStdinAndInAFixedEnvironment) {
  const std::string out = (dir_ / "calls").string();
  HookConfig c;
  c.argv = {script("record.sh",
                   "n=$(ls " + dir_.string() + " | grep -c call-); f=" + dir_.string() +
                       "/call-$n; cat > $f.stdin; env | sort > $f.env; echo \"$@\" > $f.args"),
            "--team", "storage"};
  setenv("STALLWATCH_TEST_LEAK", "must-not-reach-the-hook", 1);
  {
    HookRunner r(c);
    r.submit("{\"event\":\"open\"}",
             {{"STALLWATCH_EVENT", "open"}, {"STALLWATCH_DEVICE", "loop0"}});
    ASSERT_TRUE(r.waitIdle(10s));
    const HookStats s = r.stats();
    EXPECT_EQ(s.started, 1u);
    EXPECT_EQ(s.succeeded, 1u);
  }
  EXPECT_EQ(read(dir_ / "call-0.stdin"), "{\"event\":\"open\"}");
  EXPECT_EQ(read(dir_ / "call-0.args"), "--team storage\n");
  const std::string env = read(dir_ / "call-0.env");
  EXPECT_NE(env.find("STALLWATCH_EVENT=open\n"), std::string::npos) << env;
  EXPECT_NE(env.find("STALLWATCH_DEVICE=loop0\n"), std::string::npos) << env;
  EXPECT_NE(env.find("PATH=/usr/local/sbin:"), std::string::npos) << env;
  EXPECT_EQ(env.find("STALLWATCH_TEST_LEAK"), std::string::npos) << env;
  EXPECT_EQ(env.find("HOME="), std::string::npos) << env;
}

TEST_F(HookRunnerTest, AHungHookIsKilledAtItsTimeoutWithoutHoldingUpSubmit) {
  HookConfig c;
  // The hook and a child it started both hang; the whole group must go.
  c.argv = {
      script("hang.sh", "sleep 300 & echo $! > " + (dir_ / "child").string() + "; sleep 300")};
  c.timeout = 500ms;
  HookRunner r(c);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) r.submit("{}", {});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 50ms) << "submit must not wait for the hook";
  ASSERT_TRUE(r.waitIdle(10s));
  const auto took = std::chrono::steady_clock::now() - t0;
  const HookStats s = r.stats();
  EXPECT_EQ(s.timed_out, 3u);
  EXPECT_EQ(s.succeeded, 0u);
  // Three ran at once (concurrency 4): about one timeout, not three.
  EXPECT_LT(took, 1400ms);
  const pid_t child = std::stoi(read(dir_ / "child"));
  // The hook's own child was in its process group and is gone too (reaped by init).
  for (int i = 0; i < 50 && ::kill(child, 0) == 0; ++i) std::this_thread::sleep_for(20ms);
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  std::string line;
  std::getline(stat, line);
  EXPECT_TRUE(line.empty() || line.find(") Z ") != std::string::npos) << line;
}

TEST_F(HookRunnerTest, ConcurrencyIsBoundedAndTheQueueDropsTheOldest) {
  HookConfig c;
  c.argv = {script("slow.sh", "sleep 0.3")};
  c.max_concurrent = 2;
  c.queue_capacity = 3;
  HookRunner r(c);
  for (int i = 0; i < 8; ++i) r.submit("{}", {});
  std::this_thread::sleep_for(100ms);
  EXPECT_LE(r.stats().running, 2u);
  ASSERT_TRUE(r.waitIdle(10s));
  const HookStats s = r.stats();
  EXPECT_EQ(s.started + s.dropped, 8u);
  EXPECT_GE(s.dropped, 3u);
  EXPECT_EQ(s.succeeded, s.started);
}

TEST_F(HookRunnerTest, FailuresAreCountedNotFatal) {
  HookConfig missing;
  missing.argv = {(dir_ / "no-such-hook").string()};
  HookRunner a(missing);
  a.submit("{}", {});
  ASSERT_TRUE(a.waitIdle(5s));
  EXPECT_EQ(a.stats().spawn_errors, 1u);

  HookConfig failing;
  failing.argv = {script("fail.sh", "exit 3")};
  HookRunner b(failing);
  b.submit("{}", {});
  ASSERT_TRUE(b.waitIdle(5s));
  EXPECT_EQ(b.stats().failed, 1u);
}

TEST_F(HookRunnerTest, AHookThatDoesNotReadItsInputIsNotWaitedOn) {
  HookConfig c;
  c.argv = {script("ignore.sh", "exit 0")};
  HookRunner r(c);
  r.submit(std::string(200'000, 'x'), {});  // beyond the pipe's buffer: cut, not blocked
  ASSERT_TRUE(r.waitIdle(5s));
  EXPECT_EQ(r.stats().started, 1u);
}

}  // namespace
}  // namespace stallwatch::agent
