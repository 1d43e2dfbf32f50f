// Drive health: the smartctl JSON reader over every real drive in fixtures/smartctl, the
// native parsers fed binary pages built from those drives' values, and the verdicts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "health/ata_smart.h"
#include "health/nvme_smart_log.h"
#include "health/reading_json.h"
#include "health/smartctl_json.h"
#include "health/smartctl_reader.h"
#include "health/verdict.h"
#include "test_support.h"

namespace stallwatch::health {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path fixtures() { return stallwatch::testing::fixtures() / "smartctl"; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> allFixtures() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fixtures())) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

TEST(SmartctlJson, EveryFixtureIsReadWithoutError) {
  const auto files = allFixtures();
  ASSERT_EQ(files.size(), 126u);
  size_t ata = 0, nvme = 0, scsi = 0, scans = 0, failed_opens = 0, partial = 0;
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    SCOPED_TRACE(name);
    SmartctlParse p;
    ASSERT_NO_THROW(p = parseSmartctlJson(slurp(f)));
    if (startsWith(name, "smartctl-scan")) {
      EXPECT_EQ(p.kind, SmartctlOutput::kScan);
      EXPECT_FALSE(p.scanned.empty());
      ++scans;
      continue;
    }
    if (startsWith(name, "smartctl-error")) {
      EXPECT_EQ(p.kind, SmartctlOutput::kOpenFailed);
      EXPECT_NE(p.reading.note.find("Open failed"), std::string::npos) << p.reading.note;
      ++failed_opens;
      continue;
    }
    EXPECT_EQ(p.kind, SmartctlOutput::kDrive);
    if (startsWith(name, "ata-")) {
      EXPECT_EQ(p.reading.kind, DriveKind::kAta);
      EXPECT_GE(p.reading.ata.size(), 10u);
      ++ata;
    } else if (startsWith(name, "nvme-")) {
      EXPECT_EQ(p.reading.kind, DriveKind::kNvme);
      EXPECT_TRUE(p.reading.nvme);
      ++nvme;
    } else if (startsWith(name, "scsi-")) {
      EXPECT_EQ(p.reading.kind, DriveKind::kScsi);
      ++scsi;
    } else {
      ++partial;  // -H alone, --info alone
    }
  }
  EXPECT_EQ(ata, 77u);
  EXPECT_EQ(nvme, 38u);
  EXPECT_EQ(scsi, 5u);
  EXPECT_EQ(scans, 2u);
  EXPECT_EQ(failed_opens, 1u);
  EXPECT_EQ(partial, 3u);
}

SmartctlParse fixture(const std::string& name) {
  return parseSmartctlJson(slurp(fixtures() / name));
}

TEST(SmartctlJson, AtaDriveWithReallocatedSectors) {
  const auto p = fixture("ata-hdd-seagate-st3500418as-realloc304.json");
  const AtaAttribute* a5 = p.reading.attribute(5);
  ASSERT_TRUE(a5);
  EXPECT_EQ(a5->raw, 304u);
  EXPECT_TRUE(a5->prefailure);
  EXPECT_EQ(p.reading.passed, true);
  EXPECT_EQ(p.reading.power_on_hours, 44668u);
  EXPECT_EQ(p.reading.temperature_c, 33.0);
}

TEST(SmartctlJson, NvmeDriveWithMediaErrors) {
  const auto p = fixture("nvme-samsung-970-evo-500gb-media-errors7.json");
  ASSERT_TRUE(p.reading.nvme);
  EXPECT_EQ(toString(p.reading.nvme->media_errors), "7");
  EXPECT_EQ(toString(p.reading.nvme->error_log_entries), "62");
  EXPECT_EQ(toString(p.reading.nvme->data_units_written), "65602088");
  EXPECT_EQ(p.reading.nvme->available_spare, 99);
  EXPECT_EQ(p.reading.nvme->temperature_c, 35);
}

TEST(SmartctlJson, ScsiDriveWithGrownDefects) {
  const auto p = fixture("scsi-seagate-st4000nm0043-grown-defects56.json");
  ASSERT_TRUE(p.reading.scsi);
  EXPECT_EQ(p.reading.scsi->grown_defects, 56u);
  EXPECT_EQ(p.reading.scsi->read_uncorrected, 0u);
  EXPECT_EQ(p.reading.power_on_hours, 43549u);
}

TEST(SmartctlJson, RaidVolumeWithoutSmartIsSaidSo) {
  const auto p = fixture("scsi-intel-raid1-volume-no-smart-data.json");
  EXPECT_FALSE(p.reading.scsi);
  EXPECT_FALSE(p.reading.note.empty());
  EXPECT_EQ(judge(p.reading).verdict, Verdict::kUnknown);
}

TEST(SmartctlJson, HostileInputIsAClearError) {
  EXPECT_THROW(parseSmartctlJson("{"), std::invalid_argument);
  EXPECT_THROW(parseSmartctlJson("[1,2]"), std::invalid_argument);
  EXPECT_THROW(parseSmartctlJson("{\"a\": 1}"), std::invalid_argument);
  // Wrong types where numbers belong: skipped, not thrown.
  const auto p = parseSmartctlJson(
      R"({"json_format_version":[0,1],"device":{"protocol":"ATA"},"ata_smart_attributes":{"table":[
          {"id":"5","value":[],"raw":{"value":-1}},{"id":5,"value":300,"thresh":1e99,"raw":{"value":1e300}}]}})");
  ASSERT_EQ(p.reading.ata.size(), 1u);
  EXPECT_EQ(p.reading.ata[0].value, 255);
}

// Expectations read from each file by the test itself, not by the reader under test.
struct Expected {
  bool smartctl_failed = false;  // smart_status.passed false, or exit status bit 3
  bool counters = false;         // ATA 5/187/197/198 raw > 0, NVMe media errors, SCSI grown defects
};

Expected expectationsOf(const json& j) {
  Expected e;
  if (j.contains("smart_status") && j["smart_status"].contains("passed") &&
      !j["smart_status"]["passed"].get<bool>()) {
    e.smartctl_failed = true;
  }
  if (j.contains("smartctl") && j["smartctl"].value("exit_status", 0) & 8) e.smartctl_failed = true;
  if (j.contains("ata_smart_attributes")) {
    for (const auto& a : j["ata_smart_attributes"]["table"]) {
      const int id = a["id"].get<int>();
      if ((id == 5 || id == 187 || id == 197 || id == 198) && a["raw"]["value"].get<uint64_t>() > 0)
        e.counters = true;
    }
  }
  if (j.contains("nvme_smart_health_information_log") &&
      j["nvme_smart_health_information_log"].value("media_errors", 0) > 0) {
    e.counters = true;
  }
  if (j.value("scsi_grown_defect_list", 0) > 0) e.counters = true;
  return e;
}

TEST(HealthVerdicts, EveryRealDriveGetsTheVerdictItsCountersCallFor) {
  size_t failing = 0, warned = 0, clean = 0;
  for (const auto& f : allFixtures()) {
    const std::string text = slurp(f);
    const auto p = parseSmartctlJson(text);
    if (p.kind != SmartctlOutput::kDrive) continue;
    SCOPED_TRACE(f.filename().string());
    const Expected e = expectationsOf(json::parse(text));
    const Verdict v = judge(p.reading).verdict;
    if (e.smartctl_failed) {
      EXPECT_EQ(v, Verdict::kFailing);
      ++failing;
    } else if (e.counters) {
      EXPECT_TRUE(v == Verdict::kWarning || v == Verdict::kFailing) << toString(v);
      ++warned;
    } else {
      // Not even a warning: this includes Micron and Seagate drives with 4-33 command timeouts
      // (188) and drives whose error logs hold interface CRC errors only.
      EXPECT_TRUE(v == Verdict::kOk || v == Verdict::kUnknown || v == Verdict::kUnsupported)
          << toString(v) << ": a drive smartctl passes without those counters is ok";
      ++clean;
    }
  }
  // The collection has one drive smartctl calls failing and several with counters up.
  EXPECT_EQ(failing, 1u);
  EXPECT_GE(warned, 6u);
  EXPECT_GE(clean, 100u);
}

TEST(HealthVerdicts, DriveByDrive) {
  auto verdictOf = [](const char* name) { return judge(fixture(name).reading).verdict; };
  EXPECT_EQ(
      verdictOf(
          "ata-hdd-hitachi-hds721050dle630-failed-realloc1975-pending8-errlog56-usb-bridge.json"),
      Verdict::kFailing);
  EXPECT_EQ(verdictOf("ata-hdd-seagate-st3500418as-realloc304.json"), Verdict::kWarning);
  EXPECT_EQ(verdictOf("ata-ssd-intel-ssdsc2kb240g7-realloc4.json"), Verdict::kWarning);
  EXPECT_EQ(verdictOf("nvme-samsung-970-evo-500gb-media-errors7.json"), Verdict::kWarning);
  EXPECT_EQ(verdictOf("scsi-seagate-st4000nm0043-grown-defects56.json"), Verdict::kWarning);
  EXPECT_EQ(verdictOf("nvme-intel-ssdpe2kx020t7-healthy-wear75pct.json"), Verdict::kOk);
  EXPECT_EQ(verdictOf("ata-hdd-hgst-huh721008ale604-healthy.json"), Verdict::kOk);
  EXPECT_EQ(verdictOf("smartctl-health-only-ata-passed.json"), Verdict::kOk);
}

TEST(HealthVerdicts, RisingCountersAreFailingAndCiteBothReadings) {
  DriveReading before = fixture("ata-hdd-seagate-st3500418as-realloc304.json").reading;
  DriveReading now = before;
  for (auto& a : now.ata) {
    if (a.id == 5) a.raw = 310;
  }
  const HealthVerdict v = judge(now, &before);
  EXPECT_EQ(v.verdict, Verdict::kFailing);
  const auto it = std::find_if(v.evidence.begin(), v.evidence.end(), [](const HealthEvidence& e) {
    return e.counter.find("ata 5 ") == 0;
  });
  ASSERT_NE(it, v.evidence.end());
  EXPECT_EQ(it->value, "310");
  EXPECT_EQ(it->previous, "304");
  // Unchanged since the last reading: still a warning, not failing.
  EXPECT_EQ(judge(before, &before).verdict, Verdict::kWarning);
}

TEST(HealthVerdicts, CommandTimeoutsWarnFromOneHundred) {
  // Field data: 0-99 timeouts fail at the rate of drives with none; 100 and more at four times it.
  DriveReading r = fixture("ata-ssd-micron-5300-mtfddak480tds-healthy.json").reading;
  const AtaAttribute* a = r.attribute(188);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->raw, 27u);
  HealthVerdict v = judge(r);
  EXPECT_EQ(v.verdict, Verdict::kOk);
  ASSERT_EQ(v.evidence.size(), 1u) << "shown, not judged";
  EXPECT_EQ(v.evidence[0].value, "27");
  for (auto& x : r.ata) {
    if (x.id == 188) x.raw = 100;
  }
  v = judge(r);
  EXPECT_EQ(v.verdict, Verdict::kWarning);
  // Seagate packs three counters: only the low 16 bits count (51540393996 = 12 << 32 | 12).
  EXPECT_EQ(judge(fixture("ata-hdd-seagate-st16000nm001g-2kk103-healthy.json").reading).verdict,
            Verdict::kOk);
}

TEST(HealthVerdicts, AtaErrorLog) {
  const DriveReading crc = fixture("ata-hdd-hgst-hus724020ale640-healthy-errlog12.json").reading;
  ASSERT_TRUE(crc.ata_error_log);
  EXPECT_EQ(crc.ata_error_log->count, 12u);
  EXPECT_EQ(crc.ata_error_log->logged, 5u);
  EXPECT_EQ(crc.ata_error_log->icrc_logged, 5u);
  EXPECT_EQ(crc.ata_error_log->unc_logged, 0u);
  EXPECT_EQ(crc.ata_error_log->last_lifetime_hours, 15760u);
  HealthVerdict v = judge(crc);
  EXPECT_EQ(v.verdict, Verdict::kOk) << "interface CRC errors only, none new";
  ASSERT_EQ(v.evidence.size(), 1u);
  EXPECT_NE(v.evidence[0].rule.find("5 interface CRC"), std::string::npos) << v.evidence[0].rule;

  // The same drive with two more errors since the last reading.
  DriveReading more = crc;
  more.ata_error_log->count = 14;
  v = judge(more, &crc);
  EXPECT_EQ(v.verdict, Verdict::kWarning);
  EXPECT_EQ(v.evidence[0].previous, "12");

  // An uncorrectable (UNC) error among the logged ones, from smartctl's own JSON.
  json j = json::parse(slurp(fixtures() / "ata-hdd-wdc-wuh721816ale6l4-healthy-errlog1.json"));
  auto& entry = j["ata_smart_error_log"]["summary"]["table"][0];
  entry["completion_registers"]["error"] = 0x40;
  entry["error_description"] = "Error: UNC at LBA = 0x00001000 = 4096";
  const DriveReading unc = parseSmartctlJson(j.dump()).reading;
  ASSERT_TRUE(unc.ata_error_log);
  EXPECT_EQ(unc.ata_error_log->unc_logged, 1u);
  v = judge(unc);
  EXPECT_EQ(v.verdict, Verdict::kWarning);
  EXPECT_NE(v.evidence[0].rule.find("Error: UNC at LBA"), std::string::npos) << v.evidence[0].rule;

  // Stored and read back with the reading, so the next reading can tell new errors.
  EXPECT_EQ(readingFromJson(toJson(unc)).ata_error_log, unc.ata_error_log);
}

TEST(HealthVerdicts, NvmeRules) {
  DriveReading r = fixture("nvme-samsung-970-evo-plus-250gb-healthy.json").reading;
  ASSERT_TRUE(r.nvme);
  EXPECT_EQ(judge(r).verdict, Verdict::kOk);
  DriveReading worn = r;
  worn.nvme->percentage_used = 104;
  EXPECT_EQ(judge(worn).verdict, Verdict::kWornOut);
  DriveReading spare = r;
  spare.nvme->available_spare = 5;
  spare.nvme->available_spare_threshold = 10;
  EXPECT_EQ(judge(spare).verdict, Verdict::kFailing);
  DriveReading critical = r;
  critical.nvme->critical_warning = 0x04;
  const HealthVerdict v = judge(critical);
  EXPECT_EQ(v.verdict, Verdict::kFailing);
  EXPECT_EQ(v.evidence[0].rule, "reliability degraded");
  DriveReading more_errors = r;
  more_errors.nvme->error_log_entries += 3;
  EXPECT_EQ(judge(more_errors, &r).verdict, Verdict::kWarning);
  DriveReading media = r;
  media.nvme->media_errors = 2;
  DriveReading media_more = media;
  media_more.nvme->media_errors = 5;
  EXPECT_EQ(judge(media_more, &media).verdict, Verdict::kFailing);
}

TEST(HealthVerdicts, NothingToJudge) {
  DriveReading virtio;
  virtio.device = "vda";
  virtio.note = "virtio: no SMART";
  EXPECT_EQ(judge(virtio).verdict, Verdict::kUnsupported);
  DriveReading denied;
  denied.kind = DriveKind::kAta;
  denied.note = "permission denied";
  EXPECT_EQ(judge(denied).verdict, Verdict::kUnknown);
}

// The NVMe log page as the spec lays it out, written by this test at literal offsets from
// a drive's smartctl values: the parser must give the same numbers back.
std::array<uint8_t, 512> specPage(const json& log) {
  std::array<uint8_t, 512> p{};
  auto put = [&](size_t offset, size_t width, uint64_t v) {
    for (size_t i = 0; i < width && i < 8; ++i) p[offset + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  auto u = [&](const char* key) { return log.contains(key) ? log[key].get<uint64_t>() : 0; };
  put(0, 1, u("critical_warning"));
  put(1, 2, static_cast<uint64_t>(log["temperature"].get<int>() + 273));
  put(3, 1, u("available_spare"));
  put(4, 1, u("available_spare_threshold"));
  put(5, 1, u("percentage_used"));
  put(32, 16, u("data_units_read"));
  put(48, 16, u("data_units_written"));
  put(64, 16, u("host_reads"));
  put(80, 16, u("host_writes"));
  put(96, 16, u("controller_busy_time"));
  put(112, 16, u("power_cycles"));
  put(128, 16, u("power_on_hours"));
  put(144, 16, u("unsafe_shutdowns"));
  put(160, 16, u("media_errors"));
  put(176, 16, u("num_err_log_entries"));
  put(192, 4, u("warning_temp_time"));
  put(196, 4, u("critical_comp_time"));
  return p;
}

TEST(NvmeSmartLog, ParserAgreesWithSmartctlOnEveryNvmeDrive) {
  size_t drives = 0;
  for (const auto& f : allFixtures()) {
    if (!startsWith(f.filename().string(), "nvme-")) continue;
    SCOPED_TRACE(f.filename().string());
    const std::string text = slurp(f);
    const json log = json::parse(text)["nvme_smart_health_information_log"];
    const auto page = specPage(log);
    const auto native = parseNvmeSmartLog(page);
    ASSERT_TRUE(native);
    const auto from_json = parseSmartctlJson(text).reading.nvme;
    ASSERT_TRUE(from_json);
    EXPECT_EQ(*native, *from_json);
    ++drives;
  }
  EXPECT_EQ(drives, 38u);
}

TEST(NvmeSmartLog, DecodesAll128BitsAndRejectsShortPages) {
  std::array<uint8_t, 512> p{};
  for (int i = 0; i < 16; ++i) p[160 + i] = 0xFF;  // media errors: 2^128 - 1
  p[1] = 0x2C;
  p[2] = 0x01;  // 300 K
  const auto h = parseNvmeSmartLog(p);
  ASSERT_TRUE(h);
  EXPECT_EQ(toString(h->media_errors), "340282366920938463463374607431768211455");
  EXPECT_EQ(h->temperature_c, 27);
  EXPECT_FALSE(parseNvmeSmartLog(std::span<const uint8_t>(p.data(), 511)));
}

TEST(AtaSmart, LibatasmartReadsBackEveryAtaDrivesAttributes) {
  size_t drives = 0;
  for (const auto& f : allFixtures()) {
    if (!startsWith(f.filename().string(), "ata-")) continue;
    SCOPED_TRACE(f.filename().string());
    const DriveReading from_json = parseSmartctlJson(slurp(f)).reading;
    const auto blob = buildAtaSmartBlob(from_json.ata, from_json.passed);
    DriveReading native;
    std::string error;
    ASSERT_TRUE(parseAtaSmartBlob(blob, native, error)) << error;
    EXPECT_EQ(native.passed, from_json.passed);
    ASSERT_EQ(native.ata.size(), std::min<size_t>(from_json.ata.size(), 30));
    for (size_t i = 0; i < native.ata.size(); ++i) {
      const AtaAttribute& n = native.ata[i];
      const AtaAttribute& j = from_json.ata[i];
      EXPECT_EQ(n.id, j.id);
      EXPECT_EQ(n.value, j.value);
      EXPECT_EQ(n.worst, j.worst);
      EXPECT_EQ(n.threshold, j.threshold);
      EXPECT_EQ(n.raw, j.raw);
      EXPECT_EQ(n.prefailure, j.prefailure);
    }
    // The same verdict through either reader.
    DriveReading native_judged = native;
    native_judged.smartctl_exit_status = from_json.smartctl_exit_status;
    EXPECT_EQ(judge(native_judged).verdict, judge(from_json).verdict);
    ++drives;
  }
  EXPECT_EQ(drives, 77u);
}

TEST(AtaSmart, MalformedBlobsAreRejected) {
  DriveReading r;
  std::string error;
  const std::vector<uint8_t> garbage = {1, 2, 3};
  EXPECT_FALSE(parseAtaSmartBlob(garbage, r, error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace stallwatch::health

namespace stallwatch::health {
namespace {

class SmartctlCollector : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stallwatch-smartctl-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A stand-in smartctl: prints BODY's output and exits with STATUS.
  std::string fake(const std::string& body, int status) {
    const fs::path p = dir_ / "smartctl";
    std::ofstream(p) << "#!/bin/sh\n" << body << "\nexit " << status << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  fs::path dir_;
};

DriveTarget sas(const std::string& name) {
  DriveTarget t;
  t.device = name;
  t.kind = DriveKind::kAta;  // as driveTargets classes sd*: the native reader tries first
  t.path = "/dev/" + name;
  return t;
}

TEST_F(SmartctlCollector, ReadsWhatTheNativeReadersCannot) {
  const fs::path dump = fixtures() / "scsi-seagate-st4000nm0043-grown-defects56.json";
  SmartctlFallbackReader reader(nullptr, fake("cat '" + dump.string() + "'", 0),
                                std::chrono::seconds(10));
  DriveReading r;
  std::string error;
  ASSERT_TRUE(reader.read(sas("sdg"), r, error)) << error;
  EXPECT_EQ(r.device, "sdg");
  EXPECT_EQ(r.kind, DriveKind::kScsi);
  ASSERT_TRUE(r.scsi);
  EXPECT_EQ(r.scsi->grown_defects, 56u);
  EXPECT_EQ(judge(r).verdict, Verdict::kWarning);
}

TEST_F(SmartctlCollector, ItsFailingExitStatusIsFailing) {
  const fs::path dump =
      fixtures() /
      "ata-hdd-hitachi-hds721050dle630-failed-realloc1975-pending8-errlog56-usb-bridge.json";
  SmartctlFallbackReader reader(nullptr, fake("cat '" + dump.string() + "'", 216),
                                std::chrono::seconds(10));
  DriveReading r;
  std::string error;
  ASSERT_TRUE(reader.read(sas("sdh"), r, error)) << error;
  EXPECT_EQ(r.smartctl_exit_status, 216);
  EXPECT_EQ(judge(r).verdict, Verdict::kFailing);
}

TEST_F(SmartctlCollector, AHungSmartctlIsKilledAtItsTimeout) {
  SmartctlFallbackReader reader(nullptr, fake("sleep 30", 0), std::chrono::milliseconds(300));
  DriveReading r;
  std::string error;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(reader.read(sas("sdb"), r, error));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_NE(error.find("killed"), std::string::npos) << error;
}

TEST_F(SmartctlCollector, GarbageAndMissingProgramsAreErrors) {
  DriveReading r;
  std::string error;
  SmartctlFallbackReader garbage(nullptr, fake("echo '<html>'", 0), std::chrono::seconds(5));
  EXPECT_FALSE(garbage.read(sas("sdb"), r, error));
  EXPECT_NE(error.find("unreadable"), std::string::npos) << error;
  SmartctlFallbackReader missing(nullptr, (dir_ / "no-such-smartctl").string(),
                                 std::chrono::seconds(5));
  EXPECT_FALSE(missing.read(sas("sdb"), r, error));
  EXPECT_NE(error.find("cannot run"), std::string::npos) << error;
}

}  // namespace
}  // namespace stallwatch::health
