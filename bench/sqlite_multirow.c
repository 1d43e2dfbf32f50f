// Whether a flush's rows go faster as multi-row INSERTs: a table shaped like disk_samples (17
// columns, an index on device and time), 60 rows a transaction (a five-second flush of a node),
// 400 transactions, one statement a row against statements of ROWS rows each, in WAL mode
// with synchronous=NORMAL as the agent writes. Thread CPU time a flush.
// Build: gcc -O2 -o /tmp/sqlite_multirow bench/sqlite_multirow.c -lsqlite3
// Run:   /tmp/sqlite_multirow 0; /tmp/sqlite_multirow 6; /tmp/sqlite_multirow 12 (issue 47:
//        SQLite's multi-row VALUES is slower a row than one prepared statement a row)
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
#define COLS 17
int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ROWS (0: one statement a row)\n", argv[0]);
    return 2;
  }
  int multi = atoi(argv[1]);
  int rows_per_flush = 60, flushes = 400;
  remove("/tmp/sqlite_multirow.db");
  remove("/tmp/sqlite_multirow.db-wal");
  remove("/tmp/sqlite_multirow.db-shm");
  sqlite3* db;
  sqlite3_open("/tmp/sqlite_multirow.db", &db);
  sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", 0, 0, 0);
  sqlite3_exec(
      db,
      "CREATE TABLE disk_samples (ts_ms INTEGER NOT NULL, device_id INTEGER NOT NULL, interval_ms "
      "INTEGER NOT NULL, a REAL NOT NULL, b REAL NOT NULL, c REAL NOT NULL, d REAL NOT NULL, e "
      "REAL, f REAL, g REAL, h REAL, i REAL, j REAL, k REAL NOT NULL, l REAL NOT NULL, m INTEGER "
      "NOT NULL, n INTEGER) STRICT; CREATE INDEX ds_t ON disk_samples(device_id, ts_ms);",
      0, 0, 0);
  char sql[65536];
  strcpy(sql, "INSERT INTO disk_samples VALUES ");
  int per = multi ? multi : 1;
  for (int r = 0; r < per; r++) {
    strcat(sql, r ? ",(" : "(");
    for (int c = 0; c < COLS; c++) {
      strcat(sql, c ? ",?" : "?");
    }
    strcat(sql, ")");
  }
  sqlite3_stmt* st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, 0)) {
    printf("%s\n", sqlite3_errmsg(db));
    return 1;
  }
  long long t0 = now();
  long long ts = 1000;
  for (int f = 0; f < flushes; f++) {
    sqlite3_exec(db, "BEGIN", 0, 0, 0);
    for (int r = 0; r < rows_per_flush; r += per) {
      for (int k = 0; k < per; k++) {
        int base = k * COLS;
        ts++;
        sqlite3_bind_int64(st, base + 1, ts);
        sqlite3_bind_int64(st, base + 2, k % 6);
        sqlite3_bind_int64(st, base + 3, 1000);
        for (int c = 3; c < 15; c++) sqlite3_bind_double(st, base + c + 1, c * 1.5 + ts);
        sqlite3_bind_int64(st, base + 16, 3);
        sqlite3_bind_int64(st, base + 17, 4);
      }
      if (sqlite3_step(st) != SQLITE_DONE) {
        printf("err %s\n", sqlite3_errmsg(db));
        return 1;
      }
      sqlite3_reset(st);
    }
    sqlite3_exec(db, "COMMIT", 0, 0, 0);
  }
  long long t1 = now();
  printf("rows per statement %2d: %.1f us per flush of %d rows\n", per, (t1 - t0) / 1e3 / flushes,
         rows_per_flush);
}
