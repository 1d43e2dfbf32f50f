#include "collectors/proc_pid.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "collectors/self_process.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

// A real line (Linux 6.18, a python3 process), with the comm field made hostile below.
constexpr const char* kStatLine =
    "4242 (python3) S 4200 4242 4200 34816 4242 4194304 12345 0 3 0 1500 250 0 0 20 0 17 0 "
    "248039 1234567890 20000 18446744073709551615 1 1 0 0 0 0 0 16781312 1 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcStat, ParsesTheFieldsTheTrackerUses) {
  const auto s = parseProcStat(kStatLine);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid, 4242u);
  EXPECT_EQ(s->comm, "python3");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 4200u);
  EXPECT_EQ(s->utime_ticks, 1500u);
  EXPECT_EQ(s->stime_ticks, 250u);
  EXPECT_EQ(s->num_threads, 17u);
  EXPECT_EQ(s->start_time_ticks, 248039u);
}

TEST(ProcStat, CommMayHoldSpacesAndParentheses) {
  std::string line = kStatLine;
  line.replace(line.find("(python3)"), 9, "(a) D 1 (b c)");
  const auto s = parseProcStat(line);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm, "a) D 1 (b c");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 4200u);
}

TEST(ProcStat, RejectsMalformedLines) {
  std::string why;
  for (const char* bad : {"", "4242 python3 S 1", "x (a) S 1 2 3", "1 (a) S 1 2 3 4",
                          "1 (a) SS 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
                          "1 (a) S x 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"}) {
    EXPECT_FALSE(parseProcStat(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(ProcIo, ParsesAllSevenLines) {
  const auto io = parseProcIo(
      "rchar: 323934931\nwchar: 323929600\nsyscr: 632687\nsyscw: 632675\nread_bytes: 4096\n"
      "write_bytes: 323932160\ncancelled_write_bytes: 0\n");
  ASSERT_TRUE(io);
  EXPECT_EQ(io->rchar, 323934931u);
  EXPECT_EQ(io->syscr, 632687u);
  EXPECT_EQ(io->read_bytes, 4096u);
  EXPECT_EQ(io->write_bytes, 323932160u);
}

TEST(ProcIo, MissingOrMalformedLinesAreErrors) {
  std::string why;
  EXPECT_FALSE(parseProcIo("rchar: 1\n", &why));
  EXPECT_NE(why.find("wchar"), std::string::npos);
  EXPECT_FALSE(parseProcIo("rchar 1\n", &why));
  EXPECT_FALSE(parseProcIo("rchar: x\nwchar: 1\n", &why));
}

TEST(Environ, SplitsOnNulAndKeepsEqualsInValues) {
  const std::string text("SLURM_JOB_ID=77\0EMPTY=\0X=a=b\0junk\0", 33);
  const auto env = parseEnviron(text);
  EXPECT_EQ(env.at("SLURM_JOB_ID"), "77");
  EXPECT_EQ(env.at("EMPTY"), "");
  EXPECT_EQ(env.at("X"), "a=b");
  EXPECT_EQ(env.count("junk"), 0u);
}

// Every /proc and /sys parser's numbers: decimal digits only, the whole token, within 64 bits.
TEST(TextScan, ParsesUnsignedDecimalsAndRefusesTheRest) {
  EXPECT_EQ(parseUnsigned("0"), 0u);
  EXPECT_EQ(parseUnsigned("007"), 7u);
  EXPECT_EQ(parseUnsigned("69501353"), 69501353u);
  EXPECT_EQ(parseUnsigned("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parseUnsigned("000000000000000000000000018446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "18446744073709551616", "99999999999999999999", "-1", "+1", " 1",
                          "1 ", "1x", "x1", "0x10", "1.5", "1e3", "\xff"}) {
    EXPECT_FALSE(parseUnsigned(bad)) << bad;
  }
}

TEST(PidList, SkipsJunk) {
  EXPECT_EQ(parsePidList("12 13\n14 x 0 99999999999\n"), (std::vector<uint32_t>{12, 13, 14}));
  EXPECT_TRUE(parsePidList("").empty());
}

// The agent's own figures for process_*: fields counted from the last ')' (a comm with spaces
// and parentheses), rss in pages, the limits' soft value, btime.
TEST(SelfProcess, ParsesStatLimitsAndBootTime) {
  const std::string stat =
      "4242 (sw (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 "
      "33513472 3835 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  const auto p = parseSelfStat(stat, 100, 4096);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->cpu_seconds, 3.0);  // (250 + 50) ticks at 100 a second
  EXPECT_EQ(p->virtual_bytes, 33513472u);
  EXPECT_EQ(p->resident_bytes, 3835u * 4096u);
  ASSERT_TRUE(p->start_time_seconds);
  EXPECT_DOUBLE_EQ(*p->start_time_seconds, 123.45);  // since boot, before btime is added
  EXPECT_FALSE(parseSelfStat("4242 (sw) S 1 2 3", 100, 4096));
  EXPECT_FALSE(parseSelfStat("no parenthesis", 100, 4096));
  EXPECT_EQ(
      parseMaxOpenFiles("Limit                     Soft Limit           Hard Limit           "
                        "Units     \nMax open files            20000                524288    "
                        "           files     \n"),
      20000u);
  EXPECT_FALSE(
      parseMaxOpenFiles("Max open files            unlimited            unlimited  files\n"));
  EXPECT_EQ(parseBootTime("cpu  1 2 3\nbtime 1795600000\nprocesses 10\n"), 1795600000u);
  EXPECT_FALSE(parseBootTime("cpu 1 2 3\n"));
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The reader the endpoint keeps: a captured root's fd/ is a plain folder (its size no count), so
// its entries are counted; a rewritten statm and a CPU time that moved are read afresh; the start
// is read once, the limits once a minute.
TEST(SelfProcess, AKeptReaderCountsACapturedRootsFilesAndSeesItsMemoryAndCpuChange) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("stallwatch-self-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "self" / "fd");
  for (const char* fd : {"0", "1", "2"}) writeFile(root / "self" / "fd" / fd, "");
  writeFile(root / "self" / "stat",
            "4242 (sw) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 33513472 "
            "3835 18446744073709551615 1 1\n");
  writeFile(root / "self" / "statm", "8182 3835 1000 10 0 2000 0\n");
  writeFile(root / "self" / "limits",
            "Max open files            20000                524288    files\n");
  writeFile(root / "stat", "cpu  1 2 3\nbtime 1795600000\n");
  double cpu = 3.0;
  SelfProcessReader reader(root, [&cpu]() -> std::optional<double> { return cpu; });
  const auto first = reader.read();
  ASSERT_TRUE(first);
  EXPECT_DOUBLE_EQ(first->cpu_seconds, 3.0);
  EXPECT_EQ(first->resident_bytes, 3835u * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(first->virtual_bytes, 8182u * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(first->open_fds, 3u);
  EXPECT_EQ(first->max_fds, 20000u);
  ASSERT_TRUE(first->start_time_seconds);
  EXPECT_DOUBLE_EQ(*first->start_time_seconds,
                   1795600000 + 12345.0 / static_cast<double>(::sysconf(_SC_CLK_TCK)));
  cpu = 4.0;
  writeFile(root / "self" / "statm", "8182 4000 1000 10 0 2000 0\n");
  writeFile(root / "self" / "fd" / "3", "");
  writeFile(root / "self" / "limits",
            "Max open files            10                524288    files\n");
  writeFile(root / "self" / "stat", "garbage");  // the start is not read again
  const auto second = reader.read();
  ASSERT_TRUE(second);
  EXPECT_DOUBLE_EQ(second->cpu_seconds, 4.0);
  EXPECT_EQ(second->resident_bytes, 4000u * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(second->open_fds, 4u);
  EXPECT_EQ(second->max_fds, 20000u);  // within the minute: as first read
  EXPECT_EQ(second->start_time_seconds, first->start_time_seconds);
  fs::remove_all(root);
  EXPECT_FALSE(reader.read());  // its statm gone: nothing, not the last figures
}

TEST(SelfProcess, ParsesStatm) {
  EXPECT_EQ(parseStatm("8182 3835 1000 10 0 2000 0\n", 4096),
            (std::pair<uint64_t, uint64_t>{8182u * 4096u, 3835u * 4096u}));
  EXPECT_FALSE(parseStatm("8182\n", 4096));
  EXPECT_FALSE(parseStatm("x 1 2", 4096));
  EXPECT_FALSE(parseStatm("", 4096));
}

// This process's CPU time, as the live reader has it: it grows with work done.
TEST(SelfProcess, TheLiveReadersCpuTimeGrowsWithWork) {
  SelfProcessReader reader;
  const auto before = reader.read();
  ASSERT_TRUE(before);
  // 50 ms of this process's own CPU, by its CPU clock: a wall-clock spin got less than the 20 ms
  // asserted below on a 2-core machine under a parallel test run.
  const auto cpu_now = [] {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
  };
  const double cpu_until = cpu_now() + 0.05;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  volatile uint64_t spin = 0;
  while (cpu_now() < cpu_until && std::chrono::steady_clock::now() < give_up) spin = spin + 1;
  const auto after = reader.read();
  ASSERT_TRUE(after);
  EXPECT_GE(after->cpu_seconds - before->cpu_seconds, 0.02);
  EXPECT_GT(after->resident_bytes, 0u);
  EXPECT_GE(after->virtual_bytes, after->resident_bytes);
  EXPECT_TRUE(after->start_time_seconds);
}

// On the live /proc the count the kernel gives (or the listing where it gives none) follows the
// files this process opens.
TEST(SelfProcess, AKeptReaderFollowsTheOpenFilesOfThisProcess) {
  SelfProcessReader reader;
  const auto before = reader.read();
  ASSERT_TRUE(before && before->open_fds);
  const int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC),
            b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const auto after = reader.read();
  ::close(a);
  ::close(b);
  ASSERT_TRUE(after && after->open_fds);
  EXPECT_EQ(*after->open_fds, *before->open_fds + 2);
}

}  // namespace
}  // namespace stallwatch::collectors
