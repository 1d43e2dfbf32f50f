// Keeping incidents: the one column order every statement that writes them uses, and reading
// them back. Live incidents are written by the Store (writeIncidentEvent), recomputed ones by
// replaceIncidents; both go through bindIncident.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/incident.h"
#include "model/incident_json.h"
#include "model/recording.h"

namespace stallwatch::storage {

// The records read back (model/recording.h).
using model::StoredIncident;

std::string evidenceJson(const std::vector<model::EvidenceItem>& evidence);
std::vector<model::EvidenceItem> parseEvidenceJson(const std::string& text);
// The typed name of a signal stored before evidence had one (read once, where it is loaded).
model::EvidenceName legacyName(const std::string& signal);

// Binds an incident's stored fields to the named parameters :start_ms, :end_ms, :class,
// :device, :physical_device, :idle_share, :gpu_seconds_lost, :confidence, :evidence,
// :straggler_rank, :straggler_pid, :straggler_gpu and :waiting_ranks of ST.
void bindIncident(SQLite::Statement& st, const model::Incident& incident);
// The statements that write them, with those parameters: an INSERT that also takes :job_id,
// :source and :detected_ms, and an UPDATE of the fields WHERE incident_id = :incident_id.
std::string insertIncidentSql();
std::string updateIncidentSql();

// Replaces the job's incidents from SOURCE with INCIDENTS, in one transaction.
void replaceIncidents(SQLite::Database& db, int64_t job_id, const std::string& source,
                      const std::vector<model::Incident>& incidents, int64_t detected_ms);

// The stored incidents (of one job, or all), oldest first. SCHEMA_VERSION: the DB's. With
// OPEN_AT_MS, only the live ones open at that time (opened, not yet closed; schema 4).
std::vector<StoredIncident> readIncidents(SQLite::Database& db, int schema_version,
                                          std::optional<int64_t> job_id = {},
                                          std::optional<int64_t> open_at_ms = {});

}  // namespace stallwatch::storage
