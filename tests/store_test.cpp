#include "storage/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "storage/recording.h"
#include "storage/writer.h"
#include "test_support.h"

namespace stallwatch::storage {
namespace {

collectors::SampleBatch batchAt(int64_t ts_ms) {
  collectors::SampleBatch b;
  b.wall_time_ms = ts_ms;
  b.interval_seconds = 1.0;
  collectors::DiskSample d;
  d.device = "sda";
  d.major = 8;
  d.minor = 0;
  d.rates.reads_per_second = 100;
  d.rates.read_bytes_per_second = 409600;
  d.rates.r_await_ms = 2.5;  // w_await stays NULL: no writes
  d.rates.aqu_sz = 0.25;
  d.rates.util_percent = 25;
  d.in_flight = 1;
  b.disks.push_back(d);
  b.pressure.push_back({"io", 0.1, 0.05, {}, {}});
  collectors::GpuSample g;
  g.gpu_index = 0;
  g.uuid = "GPU-abc";
  g.utilization_percent = 97.5;
  g.utilization_sample_count = 6;
  g.memory_used_bytes = 1234;
  b.gpus.push_back(g);
  b.gpu_processes.push_back({0, "GPU-abc", 4242, 90.0, std::nullopt});
  return b;
}

TEST(Store, RoundTripKeepsValuesAndNulls) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sub" / "sw.db";
  {
    auto store = Store::open(path);
    const int64_t run = store->beginRun({1000, "host", "0.1.0", 1000, "diskstats"});
    store->writeBatches({batchAt(2000), batchAt(3000)});
    store->endRun(run, 4000, 0);
  }
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM disk_samples").getInt(), 2);
  SQLite::Statement q(db,
                      "SELECT d.name, s.r_await_ms, s.w_await_ms, typeof(s.w_await_ms), s.aqu_sz, "
                      "s.interval_ms FROM disk_samples s JOIN block_devices d USING (device_id) "
                      "ORDER BY ts_ms LIMIT 1");
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getString(), "sda");
  EXPECT_DOUBLE_EQ(q.getColumn(1).getDouble(), 2.5);
  EXPECT_TRUE(q.getColumn(2).isNull());
  EXPECT_EQ(q.getColumn(3).getString(), "null");
  EXPECT_DOUBLE_EQ(q.getColumn(4).getDouble(), 0.25);
  EXPECT_EQ(q.getColumn(5).getInt(), 1000);
  EXPECT_DOUBLE_EQ(
      db.execAndGet("SELECT utilization_percent FROM gpu_utilization LIMIT 1").getDouble(), 97.5);
  EXPECT_EQ(db.execAndGet("SELECT io_some_ratio FROM pressure LIMIT 1").getDouble(), 0.1);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM disk_latest").getInt(), 1);
  EXPECT_EQ(db.execAndGet("SELECT time_utc FROM disk_latest").getString(),
            "1970-01-01 00:00:03.000");
  EXPECT_EQ(db.execAndGet("SELECT ended_ms FROM runs").getInt64(), 4000);
  EXPECT_TRUE(db.execAndGet("SELECT memory_utilization_percent FROM gpu_process_samples").isNull());
}

TEST(Store, CreatesTheFileOwnerOnly) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  Store::open(path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Store, TablesAreStrict) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  EXPECT_THROW(store->db().exec("INSERT INTO pressure_samples VALUES ('soon', 1, 'io', 0, 0)"),
               SQLite::Exception);
  EXPECT_THROW(store->db().exec("INSERT INTO pressure_samples VALUES (1, 1, 'disk', 0, 0)"),
               SQLite::Exception);
}

TEST(Store, MigratesAnEmptyDatabaseAndReopensIdempotently) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  { SQLite::Database empty(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE); }
  EXPECT_EQ(Store::open(path)->schemaVersion(), kSchemaVersion);
  auto again = Store::open(path);
  EXPECT_EQ(again->schemaVersion(), kSchemaVersion);
  EXPECT_EQ(again->db().execAndGet("PRAGMA journal_mode").getString(), "wal");
}

// A file written by the first release (schema 1) keeps its samples and gains the job tables.
TEST(Store, MigratesVersion1WithItsData) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "v1.db";
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec(migrationSql(1));
    db.exec("PRAGMA user_version = 1");
    db.exec(
        "INSERT INTO block_devices (name, major, minor, first_seen_ms, last_seen_ms) "
        "VALUES ('sda', 8, 0, 1, 1)");
    db.exec(
        "INSERT INTO disk_samples VALUES (1000, 1, 1000, 1, 0, 4096, 0, 0.5, NULL, NULL, "
        "NULL, NULL, NULL, 0.01, 1.0, 0)");
  }
  auto store = Store::open(path);
  EXPECT_EQ(store->schemaVersion(), kSchemaVersion);
  EXPECT_EQ(store->db().execAndGet("SELECT r_await_ms FROM disk_latency").getDouble(), 0.5);
  EXPECT_EQ(store->db().execAndGet("SELECT count(*) FROM jobs").getInt(), 0);
  // And it takes new rows of both kinds.
  collectors::SampleBatch b = batchAt(2000);
  b.job_updates.push_back(
      {"pid:1:2", "python3 train.py", 1, "python3 train.py", "", {}, 1500, {}, ""});
  b.jobs.push_back({});
  b.jobs.back().key = "pid:1:2";
  b.jobs.back().steps = 7;
  b.job_devices.push_back({"pid:1:2", "sda", 8, 0, "", 3});
  store->writeBatches({b});
  EXPECT_EQ(store->db().execAndGet("SELECT steps FROM job_samples").getInt(), 7);
  EXPECT_EQ(store->db().execAndGet("SELECT count(*) FROM block_devices").getInt(), 1);  // same sda
  EXPECT_FALSE(migrationSql(kSchemaVersion + 1));
}

// DB at VERSION by the schema's migrations, as an older build left it.
void migrateTo(SQLite::Database& db, int version) {
  for (int v = 1; v <= version; ++v) db.exec(migrationSql(v));
  db.exec("PRAGMA user_version = " + std::to_string(version));
}

// Version 13 rewrote the CHECKs of the rows written every interval from IN lists (a temporary
// b-tree built per row) to ORs: they still refuse what they refused, and a DB that had rows
// before keeps them.
TEST(Store, TheIntervalTablesChecksStillRefuseAfterTheirRewrite) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "v12.db";
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    migrateTo(db, 12);
    db.exec("INSERT INTO pressure_samples VALUES (1000, 1000, 'io', 0.5, 0.25)");
  }
  auto store = Store::open(path);
  auto& db = store->db();
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM pressure_samples").getInt(), 1);
  for (const char* table : {"pressure_samples", "job_processes"}) {
    const std::string sql =
        db.execAndGet(std::string("SELECT sql FROM sqlite_schema WHERE name = '") + table + "'")
            .getString();
    EXPECT_EQ(sql.find(" IN ("), std::string::npos) << sql;
    EXPECT_NE(sql.find("CHECK ("), std::string::npos) << sql;
  }
  for (const char* resource : {"io", "cpu", "memory"}) {
    db.exec(std::string("INSERT INTO pressure_samples VALUES (2000, 1000, '") + resource +
            "', 0, 0)");
  }
  EXPECT_THROW(db.exec("INSERT INTO pressure_samples VALUES (3000, 1000, 'disk', 0, 0)"),
               SQLite::Exception);
  db.exec("INSERT INTO jobs (job_key, root_pid, started_ms, last_seen_ms) VALUES ('k', 1, 1, 1)");
  db.exec("INSERT INTO job_processes VALUES (1, 10, 'worker', 'python3', 1)");
  EXPECT_THROW(db.exec("INSERT INTO job_processes VALUES (1, 11, 'helper', 'python3', 1)"),
               SQLite::Exception);
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
}

// Version 14 lets an interval's I/O wait be unknown (the busy time read from cpu.stat): a DB of
// version 13 keeps its rows, takes NULL after, and still refuses a NULL busy time.
TEST(Store, TheCpuRowsIoWaitMayBeUnknownFromVersion14) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "v13.db";
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    migrateTo(db, 13);
    db.exec("INSERT INTO cpu_samples VALUES (1000, 1000, 1.5, 0.25, 8)");
    EXPECT_THROW(db.exec("INSERT INTO cpu_samples VALUES (2000, 1000, 1.5, NULL, 8)"),
                 SQLite::Exception);
  }
  auto store = Store::open(path);
  auto& db = store->db();
  db.exec("INSERT INTO cpu_samples VALUES (2000, 1000, 1.5, NULL, 8)");
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM cpu_samples").getInt(), 2);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM cpu_samples WHERE iowait_cores IS NULL").getInt(),
            1);
  EXPECT_THROW(db.exec("INSERT INTO cpu_samples VALUES (3000, 1000, NULL, 0, 8)"),
               SQLite::Exception);
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
}

// The report reads the job's GPU utilisation from its own samples where the recorder wrote
// it, and averages the job's GPUs' samples for recordings that lack it.
TEST(JobSeries, StoredGpuUtilisationOrTheMeanOfTheJobsGpus) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  auto batch = [](int64_t ts, std::optional<double> stored) {
    collectors::SampleBatch b;
    b.wall_time_ms = ts;
    b.interval_seconds = 1.0;
    b.job_updates.push_back({"k", "job", 1, "", "", {"GPU-a", "GPU-b"}, 0, {}, ""});
    collectors::JobSample j;
    j.key = "k";
    j.gpu_util_percent = stored;
    b.jobs.push_back(j);
    for (const char* uuid : {"GPU-a", "GPU-b"}) {
      collectors::GpuSample g;
      g.uuid = uuid;
      g.gpu_index = uuid[4] == 'a' ? 0 : 1;
      g.utilization_percent = uuid[4] == 'a' ? 40.0 : 80.0;
      b.gpus.push_back(g);
    }
    return b;
  };
  store->writeBatches({batch(1000, 77.0), batch(2000, 77.0)});
  auto recording = Recording::open(dir.path() / "sw.db");
  auto jobs = recording.jobs();
  ASSERT_EQ(jobs.size(), 1u);
  auto s = recording.jobSeries(jobs[0], {});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.gpu_count, 2u);
  EXPECT_DOUBLE_EQ(*s.gpu_util_percent[0], 77.0);  // the stored mean
  store->db().exec("UPDATE job_samples SET gpu_util_percent = NULL");
  s = recording.jobSeries(jobs[0], {});
  EXPECT_DOUBLE_EQ(*s.gpu_util_percent[1], 60.0);  // (40 + 80) / 2 from the GPUs' own rows
}

// Ranks (schema 6): written once described, sampled every tick, read back aligned on the
// job's ticks, and the straggler kept with its incident.
TEST(JobSeries, RanksAndTheStragglerRoundTrip) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  std::vector<collectors::SampleBatch> batches;
  for (int64_t t = 1000; t <= 3000; t += 1000) {
    collectors::SampleBatch b;
    b.wall_time_ms = t;
    b.interval_seconds = 1.0;
    if (t == 1000) {
      b.job_updates.push_back({"torchelastic:x", "ddp", 10, "", "", {"GPU-a", "GPU-b"}, 0, {}, ""});
      b.rank_updates.push_back({"torchelastic:x", 0, 10, "GPU-a"});
      b.rank_updates.push_back({"torchelastic:x", 1, 11, "GPU-b"});
    }
    collectors::JobSample j;
    j.key = "torchelastic:x";
    j.gpu_work_percent = 5.0;
    b.jobs.push_back(j);
    for (int32_t r : {0, 1}) {
      collectors::RankSample k;
      k.key = "torchelastic:x";
      k.rank = r;
      k.processes = 9;
      k.workers = 8;
      k.d_state_threads = r == 1 && t == 3000 ? 8 : 0;
      k.gpu_util_percent = r == 1 && t == 3000 ? 0.0 : 50.0;
      k.gpu_work_percent = 5.0;
      if (r == 0) k.data_wait_seconds = 0.01;  // rank 1 leaves it NULL
      if (r == 1) {  // where its main thread waited, its pinning thread, its cgroup's limit
        k.main_thread_loader_wait_ratio = 0.4;
        k.main_thread_futex_wait_ratio = 0.3;
        k.pin_memory = true;
        k.cgroup_limited_read_bytes_per_second = 4e6;
        k.cgroup_read_limit_bytes_per_second = 4.2e6;
        k.cgroup_cpu_throttled_ratio = 0.25;
        k.cgroup_io_some = 0.5;
      }
      b.ranks.push_back(k);
    }
    batches.push_back(b);
  }
  store->writeBatches(batches);
  auto recording = Recording::open(dir.path() / "sw.db");
  const auto jobs = recording.jobs();
  ASSERT_EQ(jobs.size(), 1u);
  const auto s = recording.jobSeries(jobs[0], {});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(*s.gpu_work_percent[2], 5.0);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[1].rank, 1);
  EXPECT_EQ(s.ranks[1].pid, 11u);
  EXPECT_EQ(s.ranks[1].gpu, "GPU-b");
  EXPECT_DOUBLE_EQ(*s.ranks[1].d_state_threads[2], 8.0);
  EXPECT_DOUBLE_EQ(*s.ranks[1].gpu_util_percent[2], 0.0);
  EXPECT_TRUE(s.ranks[0].data_wait_s[0].has_value());
  EXPECT_FALSE(s.ranks[1].data_wait_s[0].has_value());
  // Each rank's own figures, not only the job's (issue 41: they were never written).
  EXPECT_DOUBLE_EQ(s.ranks[1].main_thread_loader_wait[1].value_or(-1), 0.4);
  EXPECT_DOUBLE_EQ(s.ranks[1].main_thread_futex_wait[1].value_or(-1), 0.3);
  EXPECT_DOUBLE_EQ(s.ranks[1].pin_memory[1].value_or(-1), 1.0);
  EXPECT_DOUBLE_EQ(s.ranks[0].pin_memory[1].value_or(-1), 0.0);
  EXPECT_FALSE(s.ranks[0].main_thread_loader_wait[1].has_value());
  EXPECT_DOUBLE_EQ(s.ranks[1].cgroup_limited_read_bytes_per_s[1].value_or(-1), 4e6);
  EXPECT_DOUBLE_EQ(s.ranks[1].cgroup_read_limit_bytes_per_s[1].value_or(-1), 4.2e6);
  EXPECT_DOUBLE_EQ(s.ranks[1].cgroup_cpu_throttled[1].value_or(-1), 0.25);
  EXPECT_DOUBLE_EQ(s.ranks[1].cgroup_io_some[1].value_or(-1), 0.5);

  model::Incident inc;
  inc.start_ms = 2000;
  inc.end_ms = 3000;
  inc.cls = model::StallClass::kDiskSlow;
  inc.straggler = model::Straggler{1, 11, "GPU-b"};
  inc.waiting_ranks = {0};
  model::Incident alike = inc;
  alike.straggler.reset();
  alike.waiting_ranks.clear();
  alike.ranks_starved = {0, 1};
  store->replaceIncidents(jobs[0].job_id, "recompute", {inc, alike}, 4000);
  const auto stored = recording.incidents();
  ASSERT_EQ(stored.size(), 2u);
  ASSERT_TRUE(stored[0].incident.straggler.has_value());
  EXPECT_EQ(stored[0].incident.straggler->rank, 1);
  EXPECT_EQ(stored[0].incident.straggler->pid, 11u);
  EXPECT_EQ(stored[0].incident.straggler->gpu, "GPU-b");
  EXPECT_EQ(stored[0].incident.waiting_ranks, std::vector<int32_t>{0});
  EXPECT_FALSE(stored[1].incident.straggler.has_value());
  EXPECT_EQ(stored[1].incident.ranks_starved, (std::vector<int32_t>{0, 1}));
}

// The node summary a report across nodes streams (Recording::nodeSamples) holds what the
// summary read whole holds, on real recordings: a DDP job of two ranks (its slowest rank's
// figures aggregated in SQLite) and one node of a two-node run (one rank).
TEST(JobSeries, NodeSamplesStreamTheNodeSummary) {
  for (const char* file : {"h200x2-ddp-rank-disk.db", "h200x2-two-node-node1-disk/node1.db"}) {
    SCOPED_TRACE(file);
    auto recording =
        Recording::open(stallwatch::testing::fixtures().string() + "/recordings/" + file);
    const auto jobs = recording.jobs();
    ASSERT_FALSE(jobs.empty());
    const JobRecord& job = jobs.front();
    const auto s = recording.jobSeries(job, {}, Recording::Detail::kNodeSummary);
    ASSERT_GT(s.size(), 30u);
    ASSERT_EQ(s.ranks.size(), 1u);
    std::vector<model::NodeSample> all, progress;
    recording.nodeSamples(job, {}, model::NodeSampleFields::kAll,
                          [&](const model::NodeSample& x) { all.push_back(x); });
    recording.nodeSamples(job, {}, model::NodeSampleFields::kProgress,
                          [&](const model::NodeSample& x) { progress.push_back(x); });
    ASSERT_EQ(all.size(), s.size());
    ASSERT_EQ(progress.size(), s.size());
    size_t rank_differs = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto& x = all[i];
      EXPECT_EQ(x.ts_ms, s.ts_ms[i]);
      EXPECT_EQ(progress[i].ts_ms, s.ts_ms[i]);
      EXPECT_DOUBLE_EQ(x.interval_s, s.interval_s[i]);
      EXPECT_EQ(x.steps, s.steps[i]);
      EXPECT_EQ(progress[i].steps, s.steps[i]);
      EXPECT_EQ(x.gpu_util_percent, s.gpu_util_percent[i]);
      EXPECT_EQ(progress[i].gpu_util_percent, s.gpu_util_percent[i]);
      EXPECT_EQ(x.gpu_work_percent, s.gpu_work_percent[i]);
      EXPECT_EQ(x.data_wait_s, s.data_wait_s[i]);
      EXPECT_EQ(x.read_bytes_per_s, s.read_bytes_per_s[i]);
      EXPECT_EQ(x.write_bytes_per_s, s.write_bytes_per_s[i]);
      EXPECT_EQ(x.workers_cpu, s.workers_cpu[i]);
      EXPECT_EQ(x.d_state_threads, s.d_state_threads[i]);
      EXPECT_EQ(x.rank_gpu_util_percent, s.ranks[0].gpu_util_percent[i]);
      EXPECT_EQ(x.rank_gpu_work_percent, s.ranks[0].gpu_work_percent[i]);
      EXPECT_EQ(x.rank_data_wait_s, s.ranks[0].data_wait_s[i]);
      rank_differs += x.rank_gpu_util_percent != x.gpu_util_percent;
    }
    // Two ranks: the slowest's utilisation is not the job's mean (one rank: it is).
    if (std::string(file).find("ddp") != std::string::npos) {
      EXPECT_GT(rank_differs, 10u);
    }
  }
}

// GPUs are described once, as facts of the batch that carries their first readings; a batch
// of figures only (every later one) leaves the description alone.
TEST(Store, GpuDescriptionsTravelInTheBatch) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  collectors::SampleBatch first;
  first.wall_time_ms = 1000;
  first.gpu_updates.push_back({0, "GPU-a", "NVIDIA H200", 150'000'000'000ull});
  first.dropIntervalFigures();  // a priming batch: facts only
  EXPECT_TRUE(first.hasFacts());
  collectors::SampleBatch later;
  later.wall_time_ms = 2000;
  later.interval_seconds = 1;
  collectors::GpuSample g;
  g.uuid = "GPU-a";
  g.utilization_percent = 50;
  later.gpus.push_back(g);
  EXPECT_FALSE(later.hasFacts());
  store->writeBatches({first, later});
  SQLite::Statement q(
      store->db(), "SELECT name, memory_total_bytes, (SELECT count(*) FROM gpu_samples) FROM gpus");
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getString(), "NVIDIA H200");
  EXPECT_EQ(q.getColumn(1).getInt64(), 150'000'000'000);
  EXPECT_EQ(q.getColumn(2).getInt64(), 1);
  EXPECT_FALSE(q.executeStep());  // one GPU row
}

TEST(Store, RefusesANewerSchema) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  {
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA user_version = 99");
  }
  try {
    Store::open(path);
    FAIL() << "a newer schema was accepted";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos);
  }
}

TEST(Store, RefusesAFileThatIsNotADatabase) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  testing::writeFile(path, std::string(4096, 'x'));
  try {
    Store::open(path);
    FAIL() << "garbage was accepted as a database";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos);
  }
}

TEST(Store, RetentionPrunesOnlyWhatIsOlderThanTheCutoff) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  std::vector<collectors::SampleBatch> batches;
  // 50 000 one-second intervals: more than one pruning chunk (20 000 rows) per table.
  for (int64_t i = 0; i < 50'000; ++i) batches.push_back(batchAt(1'000'000 + i * 1000));
  store->writeBatches(batches);
  store->writeEvent(0, {1'000'000, "agent", "info", "old"});
  store->writeEvent(0, {60'000'000, "agent", "info", "new"});
  const int64_t cutoff = 1'000'000 + 45'000 * 1000;
  const uint64_t deleted = store->pruneBefore(cutoff);
  auto count = [&](const char* sql) { return store->db().execAndGet(sql).getInt64(); };
  EXPECT_EQ(count("SELECT count(*) FROM disk_samples"), 5'000);
  EXPECT_EQ(count("SELECT count(*) FROM pressure_samples"), 5'000);
  EXPECT_EQ(count("SELECT count(*) FROM gpu_samples"), 5'000);
  EXPECT_EQ(count("SELECT min(ts_ms) FROM disk_samples"), cutoff);
  EXPECT_EQ(count("SELECT count(*) FROM agent_events"), 1);
  EXPECT_EQ(deleted, 4u * 45'000u + 1u);  // disk, pressure, GPU and GPU process rows, one event
  EXPECT_EQ(store->pruneBefore(cutoff), 0u);
}

TEST(Writer, WritesEverySubmittedBatch) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  auto store = Store::open(path);
  const int64_t run = store->beginRun({0, "h", "v", 1000, "x"});
  SampleWriter writer(std::move(store), run, 100);
  for (int i = 1; i <= 50; ++i) writer.submit(batchAt(i * 1000));
  ASSERT_TRUE(writer.finish(60'000));
  EXPECT_EQ(writer.stats().written_batches, 50u);
  EXPECT_EQ(writer.stats().dropped_batches, 0u);
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM disk_samples").getInt(), 50);
}

// What arrives within a flush interval is written at its end, in one go; submissions do not wake
// the writer meanwhile (a wake-up a tick that found nothing to do), but a queue half full does.
// The batches WRITER has written once N are or LIMIT has passed, whichever is first.
uint64_t writtenWithin(const SampleWriter& writer, uint64_t n, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (writer.stats().written_batches < n && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return writer.stats().written_batches;
}

TEST(Writer, AFlushIntervalGathersItsBatchesAndAHalfFullQueueCutsItShort) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  const int64_t run = store->beginRun({0, "h", "v", 1000, "x"});
  SampleWriter writer(std::move(store), run, /*capacity=*/10, std::chrono::minutes(1));
  writer.submit(batchAt(1000));  // the writer waits for work: written at once
  ASSERT_EQ(writtenWithin(writer, 1, std::chrono::seconds(10)), 1u);
  for (int i = 2; i <= 5; ++i) writer.submit(batchAt(i * 1000));
  EXPECT_EQ(writtenWithin(writer, 2, std::chrono::milliseconds(300)), 1u);  // gathering
  writer.submit(batchAt(6000));  // five queued: half the capacity
  EXPECT_EQ(writtenWithin(writer, 6, std::chrono::seconds(10)), 6u);
  writer.submit(batchAt(7000));
  ASSERT_TRUE(writer.finish(8000));  // the rest at once, not a minute later
  EXPECT_EQ(writer.stats().written_batches, 7u);
  EXPECT_EQ(writer.stats().dropped_batches, 0u);
}

// The flush comes with the first submission after its interval (the sampling thread's tick,
// while the host is awake), not on a timer of the writer's own; with none, a second interval
// later.
TEST(Writer, AFlushIsWrittenWithTheFirstSubmissionAfterItsInterval) {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path() / "sw.db");
  const int64_t run = store->beginRun({0, "h", "v", 1000, "x"});
  SampleWriter writer(std::move(store), run, /*capacity=*/100, std::chrono::seconds(1));
  writer.submit(batchAt(1000));  // the writer waits for work: written at once
  ASSERT_EQ(writtenWithin(writer, 1, std::chrono::seconds(10)), 1u);
  const auto flushed = std::chrono::steady_clock::now();
  writer.submit(batchAt(2000));
  std::this_thread::sleep_until(flushed + std::chrono::milliseconds(1300));
  EXPECT_EQ(writer.stats().written_batches, 1u);  // due, but no submission since
  writer.submit(batchAt(3000));
  EXPECT_EQ(writtenWithin(writer, 3, std::chrono::milliseconds(500)), 3u);
  writer.submit(batchAt(4000));  // and none after it: written two intervals on
  EXPECT_EQ(writtenWithin(writer, 4, std::chrono::seconds(5)), 4u);
  ASSERT_TRUE(writer.finish(5000));
  EXPECT_EQ(writer.stats().written_batches, 4u);
}

// A page overwritten under a running recorder (a bad sector, a stray write): the write that
// finds it (SQLITE_CORRUPT) moves the file aside and what was queued goes into a new one, with
// an event saying so. Before this, the writer retried into the damaged file for ever.
TEST(Writer, CorruptionFoundWhileWritingMovesTheFileAsideAndKeepsTheData) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  int root_page = 0, page_size = 0;
  {
    auto store = Store::open(path);
    const int64_t run = store->beginRun({0, "h", "v", 1000, "x"});
    SampleWriter writer(std::move(store), run, 100);
    for (int i = 1; i <= 20; ++i) writer.submit(batchAt(i * 1000));
    ASSERT_TRUE(writer.finish(30'000));
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    root_page = db.execAndGet("SELECT rootpage FROM sqlite_master WHERE name = 'disk_samples'");
    page_size = db.execAndGet("PRAGMA page_size");
  }
  {
    // The disk_samples table's root page overwritten; the schema (page 1) left intact.
    FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(root_page - 1) * page_size, SEEK_SET);
    const std::vector<char> garbage(static_cast<size_t>(page_size), '\x5a');
    std::fwrite(garbage.data(), 1, garbage.size(), f);
    std::fclose(f);
  }
  auto store = Store::open(path);
  const int64_t run = store->beginRun({40'000, "h", "v", 1000, "x"});
  SampleWriter writer(std::move(store), run, 100);
  std::string moved_to;
  writer.onCorruption([&](const std::string& why) {
    moved_to = Store::moveAside(path, why);
    auto fresh = Store::open(path);
    const int64_t fresh_run = fresh->beginRun({40'000, "h", "v", 1000, "x"});
    return std::pair{std::move(fresh), fresh_run};
  });
  for (int i = 41; i <= 45; ++i) writer.submit(batchAt(i * 1000));
  ASSERT_TRUE(writer.finish(50'000));
  ASSERT_FALSE(moved_to.empty());
  EXPECT_TRUE(std::filesystem::exists(moved_to));
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM disk_samples").getInt(), 5);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM agent_events WHERE message LIKE "
                          "'%became corrupt while recording%'")
                .getInt(),
            1);
  EXPECT_EQ(writer.stats().dropped_batches, 0u);
}

// The DB is locked by someone else (as a stalled disk would hold the writer): submit() must
// not block, the queue keeps the newest CAPACITY batches, and writing resumes afterwards.
TEST(Writer, BlockedDatabaseNeverBlocksSubmitAndDropsTheOldest) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "sw.db";
  auto store = Store::open(path, /*busy_timeout_ms=*/10);
  const int64_t run = store->beginRun({0, "h", "v", 1000, "x"});
  SQLite::Database blocker(path.string(), SQLite::OPEN_READWRITE);
  blocker.exec("BEGIN EXCLUSIVE");
  SampleWriter writer(std::move(store), run, /*capacity=*/10);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= 30; ++i) writer.submit(batchAt(i * 1000));
  const auto submit_time = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(submit_time, std::chrono::milliseconds(500));  // 30 submits, generous bound
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_GE(writer.stats().failed_writes, 1u);
  EXPECT_EQ(writer.stats().dropped_batches, 20u);
  blocker.exec("ROLLBACK");
  ASSERT_TRUE(writer.finish(99'000));
  SQLite::Database db(path.string());
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM disk_samples").getInt(), 10);
  EXPECT_EQ(db.execAndGet("SELECT min(ts_ms) FROM disk_samples").getInt(), 21000);  // newest kept
  EXPECT_EQ(db.execAndGet("SELECT dropped_batches FROM runs").getInt(), 20);
}

}  // namespace
}  // namespace stallwatch::storage
