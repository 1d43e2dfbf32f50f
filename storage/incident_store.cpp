#include "storage/incident_store.h"

#include <nlohmann/json.hpp>

#include "storage/sql_row.h"

namespace stallwatch::storage {
namespace {

std::string joinRanks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::vector<int32_t> splitRanks(const std::string& text) {
  std::vector<int32_t> out;
  for (const auto& part : splitList(text)) {
    try {
      out.push_back(std::stoi(part));
    } catch (const std::exception&) {
      // a hand-edited row: skipped, the rest still read
    }
  }
  return out;
}

}  // namespace

std::string evidenceJson(const std::vector<model::EvidenceItem>& evidence) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : evidence) j.push_back(model::evidenceItemJson(e));
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// An incident stored before evidence had typed names (issue 42): its name read from the signal
// once, here, in the shapes this project wrote, so that what reads incidents uses the names
// alone. A signal of another shape, or a metric this version does not know, is kUnknown: its
// signal says it.
model::EvidenceName legacyName(const std::string& signal) {
  const size_t space = signal.find(' ');
  const std::string metric = signal.substr(0, space);
  const std::string rest = space == std::string::npos ? "" : signal.substr(space + 1);
  auto word = [](const std::string& s) { return s.substr(0, s.find(' ')); };
  auto after = [](const std::string& s) {
    const size_t sp = s.find(' ');
    return sp == std::string::npos ? std::string() : s.substr(sp + 1);
  };
  auto typed = [](std::string_view m, std::string_view scope, std::string subject,
                  std::string_view note) {
    return model::evidenceNameFromStored(m, scope, std::move(subject), note);
  };
  if (rest.empty()) return typed(metric, metric.starts_with("job_") ? "job" : "host", "", "");
  if (rest.starts_with("rank ") || rest.starts_with("node ")) {
    const std::string scope = word(rest), tail = after(rest);
    return typed(metric, scope, word(tail), after(tail));
  }
  if (metric == "checkpoint_slowed_by")  // "checkpoint_slowed_by await_ms DEV"
    return typed("checkpoint_slowed_by_await_ms", "device", after(rest), "");
  if (metric == "checkpoint_held_by")
    return typed("checkpoint_held_by_write_limit", "device", "", rest);
  if (metric == "main_process_asleep") return typed(metric, "process", "", rest);
  if (metric == "workers_asleep" || metric == "job_processes_idle" ||
      metric == "job_write_bytes_per_s" || metric == "job_d_state_threads")
    return typed(metric, "job", "", rest);
  if (rest.starts_with("(the job's cgroup)")) return typed(metric, "cgroup", "", rest);
  if (metric == "job_cgroup_read_bytes_per_s" || metric == "job_cgroup_cpu_throttled_share")
    return typed(metric, "cgroup", "", rest);
  // "await_ms loop0 (the job does not read it)", "neighbour_bytes_per_s vda /x", "read_p99_ms ..."
  return typed(metric, "device", word(rest), after(rest));
}

std::vector<model::EvidenceItem> parseEvidenceJson(const std::string& text) {
  std::vector<model::EvidenceItem> out;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (!e.is_object()) continue;
    auto field = [&](const char* key) {
      const auto it = e.find(key);
      return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    model::EvidenceItem item;
    item.signal = field("signal");
    item.baseline = e.value("baseline", 0.0);
    item.during = e.value("during", 0.0);
    item.supports = e.value("supports", false);
    const std::string metric = field("metric");
    item.name = metric.empty() ? legacyName(item.signal)
                               : model::evidenceNameFromStored(metric, field("scope"),
                                                               field("subject"), field("note"));
    out.push_back(std::move(item));
  }
  return out;
}

// The one list of an incident's stored fields, in bindIncident's parameters' names.
constexpr const char* kIncidentFields =
    "start_ms, end_ms, class, device, physical_device, idle_share, gpu_seconds_lost, confidence, "
    "evidence, "
    "straggler_rank, straggler_pid, straggler_gpu, waiting_ranks";

std::string insertIncidentSql() {
  return insertSql("incidents",
                   std::string("job_id, ") + kIncidentFields + ", source, detected_ms");
}

std::string updateIncidentSql() {
  return "UPDATE incidents SET " + assignmentsSql(kIncidentFields) +
         " WHERE incident_id = :incident_id";
}

void bindIncident(SQLite::Statement& st, const model::Incident& inc) {
  st.bind(":start_ms", inc.start_ms);
  st.bind(":end_ms", inc.end_ms);
  st.bind(":class", model::toString(inc.cls));
  bindTextOrNull(st, ":device", inc.device);
  bindTextOrNull(st, ":physical_device", inc.physical_device);
  st.bind(":idle_share", inc.idle_share);
  st.bind(":gpu_seconds_lost", inc.gpu_seconds_lost);
  st.bind(":confidence", inc.confidence);
  st.bind(":evidence", evidenceJson(inc.evidence));
  if (inc.straggler) {
    st.bind(":straggler_rank", inc.straggler->rank);
    st.bind(":straggler_pid", static_cast<int64_t>(inc.straggler->pid));
    st.bind(":straggler_gpu", inc.straggler->gpu);
    st.bind(":waiting_ranks", joinRanks(inc.waiting_ranks));
    return;
  }
  for (const char* name : {":straggler_rank", ":straggler_pid", ":straggler_gpu"}) st.bind(name);
  // No straggler: the ranks that starved alike, marked so.
  bindTextOrNull(st, ":waiting_ranks",
                 inc.ranks_starved.empty() ? "" : "all:" + joinRanks(inc.ranks_starved));
}

void replaceIncidents(SQLite::Database& db, int64_t job_id, const std::string& source,
                      const std::vector<model::Incident>& incidents, int64_t detected_ms) {
  SQLite::Transaction tx(db);
  SQLite::Statement del(db, "DELETE FROM incidents WHERE job_id = :job_id AND source = :source");
  del.bind(":job_id", job_id);
  del.bind(":source", source);
  del.exec();
  SQLite::Statement ins(db, insertIncidentSql());
  for (const auto& inc : incidents) {
    ins.bind(":job_id", job_id);
    bindIncident(ins, inc);
    ins.bind(":source", source);
    ins.bind(":detected_ms", detected_ms);
    ins.exec();
    ins.reset();
  }
  tx.commit();
}

std::vector<StoredIncident> readIncidents(SQLite::Database& db, int schema_version,
                                          std::optional<int64_t> job_id,
                                          std::optional<int64_t> open_at_ms) {
  std::vector<StoredIncident> out;
  const bool has_ranks = schema_version >= 6;
  SQLite::Statement q(
      db, std::string("SELECT i.incident_id, i.job_id, coalesce(j.label, j.job_key) AS job_label, "
                      "i.start_ms, i.end_ms, i.class, coalesce(i.device, '') AS device, "
                      "coalesce(i.physical_device, '') AS physical_device, i.idle_share, "
                      "i.gpu_seconds_lost, i.confidence, i.evidence, i.source, i.detected_ms, ") +
              (has_ranks ? "i.straggler_rank, i.straggler_pid, i.straggler_gpu, i.waiting_ranks"
                         : "NULL AS straggler_rank, NULL AS straggler_pid, NULL AS straggler_gpu, "
                           "NULL AS waiting_ranks") +
              " FROM incidents i JOIN jobs j USING (job_id) "
              "WHERE (:job_id IS NULL OR i.job_id = :job_id)" +
              // incident_events exists from schema 4 on: named only when asked for.
              (open_at_ms ? " AND i.source = 'live' AND EXISTS (SELECT 1 FROM incident_events e "
                            "WHERE e.incident_id = i.incident_id AND e.event = 'open' AND "
                            "e.ts_ms <= :open_at) AND NOT EXISTS (SELECT 1 FROM incident_events e "
                            "WHERE e.incident_id = i.incident_id AND e.event = 'close' AND "
                            "e.ts_ms <= :open_at)"
                          : "") +
              " ORDER BY i.start_ms");
  bindOptional(q, ":job_id", job_id);
  if (open_at_ms) q.bind(":open_at", *open_at_ms);
  const Columns c(q);
  while (q.executeStep()) {
    StoredIncident s;
    s.incident_id = c.int64("incident_id");
    s.job_id = c.int64("job_id");
    s.job_label = c.text("job_label");
    s.incident.start_ms = c.int64("start_ms");
    s.incident.end_ms = c.int64("end_ms");
    s.incident.cls = model::stallClassFromString(c.text("class"));
    s.incident.device = c.text("device");
    s.incident.physical_device = c.text("physical_device");
    s.incident.idle_share = c.real("idle_share");
    s.incident.gpu_seconds_lost = c.real("gpu_seconds_lost");
    s.incident.confidence = c.real("confidence");
    s.incident.evidence = parseEvidenceJson(c.text("evidence"));
    s.source = c.text("source");
    s.detected_ms = c.int64("detected_ms");
    if (!c.isNull("straggler_rank")) {
      s.incident.straggler = model::Straggler{static_cast<int32_t>(c.int64("straggler_rank")),
                                              static_cast<uint32_t>(c.int64("straggler_pid")),
                                              c.text("straggler_gpu")};
    }
    if (const std::string ranks = c.text("waiting_ranks"); !ranks.empty()) {
      if (ranks.rfind("all:", 0) == 0) {
        s.incident.ranks_starved = splitRanks(ranks.substr(4));
      } else {
        s.incident.waiting_ranks = splitRanks(ranks);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stallwatch::storage
