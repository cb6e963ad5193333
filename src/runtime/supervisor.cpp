#include "runtime/supervisor.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "config/env.h"
#include "decoders/payload_decoder.h"
#include "runtime/config_check.h"

namespace picomq::runtime {

namespace {
std::string file_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string file_name(const std::string& file) { return std::filesystem::path(file).filename().string(); }
}  // namespace

Supervisor::Supervisor(const config::RuntimeConfig& config, std::string bootstrap_servers, StatusBoard& status)
    : config_(config), bootstrap_(std::move(bootstrap_servers)), status_(status) {}

Supervisor::~Supervisor() { stop_all(); }

bool Supervisor::running_locked(const std::string& key) const {
  auto it = sinks_.find(key);
  if (it == sinks_.end() || !it->second.runner) return false;
  auto st = status_.get(key);
  return st && (st->state == SinkState::Running || st->state == SinkState::Starting);
}

Supervisor::Outcome Supervisor::stop_locked(Entry& e) {
  if (!e.runner) return {200, "sink '" + e.definition.key + "' is stopped"};
  e.runner->request_stop();
  const bool clean = e.runner->join();
  if (!clean) {
    (void)e.runner.release();  // its delivery thread is stuck in the plugin: leave it behind
    abandoned_ = true;
    return {500, "sink '" + e.definition.key + "' did not finish its write within shutdown_timeout; abandoned"};
  }
  e.runner.reset();
  status_.clear_error(e.definition.key);
  status_.set_state(e.definition.key, e.definition.file, SinkState::Stopped);
  return {200, "sink '" + e.definition.key + "' stopped (buffered records written and committed)"};
}

Supervisor::Outcome Supervisor::start_locked(Entry& e) {
  const auto& key = e.definition.key;
  if (!e.definition.enabled)
    return {409, "sink '" + key + "' is disabled (enabled = false in " + e.definition.file + ")"};
  if (e.runner) {
    if (running_locked(key)) return {409, "sink '" + key + "' is already running"};
    // In Error: its blocks have stopped; join them and close the instance before a new one opens.
    stop_locked(e);
  }
  e.runner = std::make_unique<SinkRunner>(e.definition, config_, bootstrap_, status_);
  if (!e.runner->start()) {
    auto st = status_.get(key);
    return {500, "sink '" + key + "' did not start: " + (st ? st->message : std::string("unknown error"))};
  }
  return {200, "sink '" + key + "' started"};
}

Supervisor::Outcome Supervisor::stop(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it == sinks_.end()) return {404, "no sink '" + key + "'"};
  spdlog::info("sink '{}': stop requested by the operator", key);
  return stop_locked(it->second);
}

Supervisor::Outcome Supervisor::start(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it == sinks_.end()) return {404, "no sink '" + key + "'"};
  spdlog::info("sink '{}': start requested by the operator", key);
  return start_locked(it->second);
}

Supervisor::Outcome Supervisor::restart(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it == sinks_.end()) return {404, "no sink '" + key + "'"};
  spdlog::info("sink '{}': restart requested by the operator", key);
  if (auto stopped = stop_locked(it->second); stopped.status != 200) return stopped;
  auto started = start_locked(it->second);
  if (started.status == 200) started.message = "sink '" + key + "' restarted";
  return started;
}

Supervisor::Outcome Supervisor::pause(const std::string& key, bool paused) {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it == sinks_.end()) return {404, "no sink '" + key + "'"};
  if (!running_locked(key)) return {409, "sink '" + key + "' is not running"};
  it->second.runner->set_paused(paused);
  spdlog::info("sink '{}': {} requested by the operator", key, paused ? "pause" : "resume");
  return {200, "sink '" + key + "' " + (paused ? "paused" : "resumed")};
}

std::shared_ptr<Tap> Supervisor::tap(const std::string& key, Outcome& why) {
  std::lock_guard lock(mutex_);
  auto it = sinks_.find(key);
  if (it == sinks_.end()) {
    why = {404, "no sink '" + key + "'"};
    return nullptr;
  }
  if (!running_locked(key)) {
    why = {409, "sink '" + key + "' is not running: nothing passes it to tap"};
    return nullptr;
  }
  return it->second.runner->tap();
}

Supervisor::ReloadReport Supervisor::reload() {
  auto dir = config::load_sink_directory(config_.sinks_dir, config::process_env(), decoders::compile_block_schema);
  std::lock_guard lock(mutex_);
  ReloadReport report;
  std::map<std::string, std::vector<config::ConfigError>> errors_by_file;
  for (const auto& e : dir.errors) errors_by_file[e.file].push_back(e);

  std::set<std::string> seen;
  for (auto& def : dir.definitions) {
    seen.insert(def.key);
    std::string text = file_text(def.file);
    auto it = sinks_.find(def.key);
    if (it != sinks_.end() && it->second.text == text && it->second.definition.file == def.file) {
      status_.set_reload_error(def.key, {});
      report.unchanged.push_back(def.key);
      continue;
    }
    if (invalid_.erase(file_name(def.file))) status_.remove(file_name(def.file));
    if (it == sinks_.end()) {
      Entry& e = sinks_[def.key];
      e.definition = std::move(def);
      e.text = std::move(text);
      const auto& key = e.definition.key;
      if (!e.definition.enabled) {
        spdlog::info("sink '{}' ({}) is disabled", key, e.definition.file);
        status_.set_state(key, e.definition.file, SinkState::Disabled);
      } else {
        start_locked(e);  // a failed start is the sink's Error state, as at process start
        report.started.push_back(key);
      }
      continue;
    }
    // A changed definition: checked against its plugin before the running version goes.
    Entry& e = it->second;
    if (def.enabled) {
      auto problems = check_sink_plugin(def, config_.plugin_path);
      if (!problems.empty()) {
        std::string why;
        for (const auto& p : problems) {
          why += (why.empty() ? "" : "\n") + p.to_string();
          report.errors.push_back(p.to_string());
        }
        spdlog::error("sink '{}': changed definition not applied (the running version stays): {}", def.key, why);
        status_.set_reload_error(def.key, why);
        continue;
      }
    }
    const bool was_running = e.runner != nullptr;
    spdlog::info("sink '{}': definition {} changed: {}", def.key, def.file,
                 !def.enabled  ? "disabled"
                 : was_running ? "restarting this sink only"
                               : "kept stopped");
    stop_locked(e);
    e.definition = std::move(def);
    e.text = std::move(text);
    status_.set_reload_error(e.definition.key, {});
    if (!e.definition.enabled) {
      status_.set_state(e.definition.key, e.definition.file, SinkState::Disabled);
      report.stopped.push_back(e.definition.key);
    } else if (was_running) {
      start_locked(e);
      report.restarted.push_back(e.definition.key);
    }
  }

  // Sinks whose file is gone, or now holds errors (then the running version stays).
  for (auto it = sinks_.begin(); it != sinks_.end();) {
    if (seen.count(it->first)) {
      ++it;
      continue;
    }
    Entry& e = it->second;
    if (auto errs = errors_by_file.find(e.definition.file); errs != errors_by_file.end()) {
      std::string why;
      for (const auto& p : errs->second) {
        why += (why.empty() ? "" : "\n") + p.to_string();
        report.errors.push_back(p.to_string());
      }
      spdlog::error("sink '{}': changed definition not applied (the running version stays): {}", it->first, why);
      status_.set_reload_error(it->first, why);
      errors_by_file.erase(errs);
      ++it;
      continue;
    }
    spdlog::info("sink '{}': definition {} removed: stopping this sink", it->first, e.definition.file);
    stop_locked(e);
    if (e.runner) {  // abandoned: keep the entry (and the runner it leaked) out of the way
      ++it;
      continue;
    }
    status_.remove(it->first);
    report.stopped.push_back(it->first);
    it = sinks_.erase(it);
  }

  // Files that never loaded: Invalid under their file name, as at process start.
  std::set<std::string> still_invalid;
  for (const auto& [file, errs] : errors_by_file) {
    std::string why;
    for (const auto& p : errs) {
      why += (why.empty() ? "" : "\n") + p.to_string();
      report.errors.push_back(p.to_string());
      spdlog::error("invalid sink definition: {}", p.to_string());
    }
    const std::string key = file_name(file);
    still_invalid.insert(key);
    status_.set_state(key, file, SinkState::Invalid, why);
  }
  for (const auto& key : invalid_)
    if (!still_invalid.count(key)) status_.remove(key);
  invalid_ = std::move(still_invalid);
  publish_definitions_locked();
  return report;
}

void Supervisor::publish_definitions_locked() {
  std::map<std::string, config::SinkDefinition> defs;
  for (const auto& [key, e] : sinks_) defs.emplace(key, e.definition);
  std::lock_guard lock(definitions_mutex_);
  definitions_ = std::move(defs);
}

bool Supervisor::known(const std::string& key) const {
  std::lock_guard lock(definitions_mutex_);
  return definitions_.count(key) > 0;
}

bool Supervisor::running(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return running_locked(key);
}

std::optional<config::SinkDefinition> Supervisor::definition(const std::string& key) const {
  std::lock_guard lock(definitions_mutex_);
  auto it = definitions_.find(key);
  if (it == definitions_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Supervisor::keys() const {
  std::lock_guard lock(definitions_mutex_);
  std::vector<std::string> out;
  for (const auto& [key, d] : definitions_) out.push_back(key);
  return out;
}

std::shared_ptr<Redrive> Supervisor::start_redrive(const std::string& key, RedriveRequest request, Outcome& why) {
  const auto d = definition(key);
  if (!d) {
    why = {404, "no sink '" + key + "'"};
    return nullptr;
  }
  std::lock_guard lock(redrives_mutex_);
  for (const auto& r : redrives_)
    if (r->sink() == key && r->running()) {
      std::string message = "sink '" + key + "' has a redrive running: " + r->id();
      message += " (stop it first: DELETE /sinks/" + key + "/redrives/" + r->id() + ")";
      why = {409, std::move(message)};
      return nullptr;
    }
  std::string error;
  int status = 500;
  auto r = Redrive::start(*d, config_, bootstrap_, std::move(request), error, status);
  if (!r) {
    why = {status, error};
    return nullptr;
  }
  why = {202, "redrive " + r->id() + " started"};
  redrives_.push_back(r);
  return r;
}

std::vector<std::shared_ptr<Redrive>> Supervisor::redrives(const std::string& key) const {
  std::lock_guard lock(redrives_mutex_);
  std::vector<std::shared_ptr<Redrive>> out;
  for (const auto& r : redrives_)
    if (r->sink() == key) out.push_back(r);
  return out;
}

std::shared_ptr<Redrive> Supervisor::redrive(const std::string& key, const std::string& id) const {
  std::lock_guard lock(redrives_mutex_);
  for (auto it = redrives_.rbegin(); it != redrives_.rend(); ++it)
    if ((*it)->sink() == key && (*it)->id() == id) return *it;
  return nullptr;
}

bool Supervisor::stop_all() {
  {
    // A redrive ends after the chunk it writes, committed: the next start resumes it by its id.
    std::lock_guard lock(redrives_mutex_);
    for (auto& r : redrives_) r->stop();
    for (auto& r : redrives_) r->join();
  }
  std::lock_guard lock(mutex_);
  for (auto& [key, e] : sinks_)
    if (e.runner) e.runner->request_stop();
  bool clean = !abandoned_;
  for (auto& [key, e] : sinks_) {
    if (!e.runner) continue;
    if (!e.runner->join()) {
      clean = false;
      (void)e.runner.release();
    }
    e.runner.reset();
  }
  abandoned_ = !clean;
  return clean;
}

}  // namespace picomq::runtime
