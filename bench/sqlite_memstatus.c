// Whether SQLite's memory statistics (a mutex around each allocation) cost the writer: a table
// with an index, 60 rows a transaction (a five-second flush of a node), in WAL mode with
// synchronous=NORMAL as the agent writes; MEMSTATUS is 1 (SQLite's default) or 0 (the agent's
// since issue 47). Thread CPU time a transaction.
// Build: gcc -O2 -o /tmp/sqlite_memstatus bench/sqlite_memstatus.c -lsqlite3
// Run:   for r in 1 2 3; do /tmp/sqlite_memstatus 1 3000; /tmp/sqlite_memstatus 0 3000; done
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double cpuMicroseconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MEMSTATUS(0|1) TRANSACTIONS\n", argv[0]);
    return 2;
  }
  const int memstatus = atoi(argv[1]), transactions = atoi(argv[2]);
  if (sqlite3_config(SQLITE_CONFIG_MEMSTATUS, memstatus) != SQLITE_OK) {
    fprintf(stderr, "SQLite refused the setting\n");
    return 1;
  }
  char path[64];
  snprintf(path, sizeof path, "/tmp/sqlite_memstatus-%d.db", (int)getpid());
  unlink(path);
  sqlite3* db;
  sqlite3_open(path, &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
               "CREATE TABLE t(ts INTEGER, dev INTEGER, a REAL, b REAL, c REAL, d REAL, e REAL,"
               " f REAL); CREATE INDEX t_by_dev ON t(dev, ts);",
               0, 0, 0);
  sqlite3_stmt* insert;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?,?,?,?,?,?,?,?)", -1, &insert, 0);
  double total = 0;
  for (int x = 0; x < transactions; ++x) {
    const double start = cpuMicroseconds();
    sqlite3_exec(db, "BEGIN", 0, 0, 0);
    for (int r = 0; r < 60; ++r) {
      sqlite3_bind_int64(insert, 1, (sqlite3_int64)x * 1000 + r);
      sqlite3_bind_int64(insert, 2, r % 6);
      for (int k = 3; k <= 8; ++k) sqlite3_bind_double(insert, k, r * 1.5 + k);
      sqlite3_step(insert);
      sqlite3_reset(insert);
    }
    sqlite3_exec(db, "COMMIT", 0, 0, 0);
    total += cpuMicroseconds() - start;
  }
  printf("memstatus %d: %.1f us a transaction of 60 rows\n", memstatus, total / transactions);
  sqlite3_finalize(insert);
  sqlite3_close(db);
  unlink(path);
  return 0;
}
