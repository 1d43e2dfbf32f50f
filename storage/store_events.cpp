// The Store's rows of what happened rather than what was measured: the agent's events, live
// incidents as they open, change and close, and drive health readings.
#include "health/reading_json.h"
#include "storage/incident_store.h"
#include "storage/sql_row.h"
#include "storage/store.h"

namespace stallwatch::storage {

void Store::writeEvent(int64_t run_id, const AgentEvent& event) {
  SQLite::Statement st(db_,
                       "INSERT INTO agent_events (ts_ms, run_id, source, level, message) "
                       "VALUES (?,?,?,?,?)");
  st.bind(1, event.ts_ms);
  if (run_id > 0) {
    st.bind(2, run_id);
  } else {
    st.bind(2);
  }
  st.bind(3, event.source);
  st.bind(4, event.level);
  st.bind(5, event.message);
  st.exec();
}

void Store::writeIncidentEvent(int64_t run_id, const LiveIncidentEvent& live) {
  const auto& e = live.event;
  const auto& i = e.incident;
  const int64_t job = jobId(e.job_key);
  if (!job) return;  // a job the DB has not seen described: nothing to hang it on
  SQLite::Transaction tx(db_);
  int64_t incident_id = 0;
  if (auto it = live_incident_ids_.find(e.live_id); it != live_incident_ids_.end()) {
    incident_id = it->second;
    SQLite::Statement st(db_, updateIncidentSql());
    bindIncident(st, i);
    st.bind(":incident_id", incident_id);
    st.exec();
  } else {
    SQLite::Statement st(db_, insertIncidentSql() + " RETURNING incident_id");
    st.bind(":job_id", job);
    st.bind(":source", "live");
    bindIncident(st, i);
    st.bind(":detected_ms", e.ts_ms);
    st.executeStep();
    incident_id = st.getColumn(0).getInt64();
    live_incident_ids_[e.live_id] = incident_id;
  }
  if (e.kind == model::IncidentEventKind::kClose) live_incident_ids_.erase(e.live_id);
  SQLite::Statement ev(
      db_,
      "INSERT INTO incident_events (ts_ms, incident_id, run_id, event, class, device, notified) "
      "VALUES (?,?,?,?,?,?,?)");
  ev.bind(1, e.ts_ms);
  ev.bind(2, incident_id);
  if (run_id > 0) {
    ev.bind(3, run_id);
  } else {
    ev.bind(3);
  }
  ev.bind(4, model::toString(e.kind));
  ev.bind(5, model::toString(i.cls));
  bindTextOrNull(ev, 6, i.device);
  ev.bind(7, live.notified ? 1 : 0);
  ev.exec();
  tx.commit();
}

void Store::writeHealth(int64_t run_id, const HealthRecord& h) {
  const auto& r = h.reading;
  SQLite::Statement st(db_,
                       "INSERT INTO drive_health (ts_ms, run_id, device, kind, source, verdict, "
                       "model, serial, passed, "
                       "temperature_c, power_on_hours, reading, evidence, note) VALUES "
                       "(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, h.ts_ms);
  if (run_id > 0) {
    st.bind(2, run_id);
  } else {
    st.bind(2);
  }
  st.bind(3, r.device);
  st.bind(4, health::toString(r.kind));
  st.bind(5, r.source);
  st.bind(6, health::toString(h.verdict.verdict));
  bindTextOrNull(st, 7, r.model);
  bindTextOrNull(st, 8, r.serial);
  if (r.passed) {
    st.bind(9, *r.passed ? 1 : 0);
  } else {
    st.bind(9);
  }
  bindOptional(st, 10, r.temperature_c);
  bindOptional(st, 11, r.power_on_hours);
  st.bind(12, health::toJson(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  st.bind(13, health::toJson(h.verdict)["evidence"].dump(-1, ' ', false,
                                                         nlohmann::json::error_handler_t::replace));
  bindTextOrNull(st, 14, r.note);
  st.exec();
}

void Store::replaceIncidents(int64_t job_id, const std::string& source,
                             const std::vector<model::Incident>& incidents, int64_t detected_ms) {
  storage::replaceIncidents(db_, job_id, source, incidents, detected_ms);
}

}  // namespace stallwatch::storage
