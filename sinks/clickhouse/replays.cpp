#include "clickhouse/replays.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string_view>

#include "clickhouse/client.h"

namespace picomq::clickhouse {

namespace {

// Offsets looked up at once while a partition replays: a batch's, or this many ahead of it (a
// second consumer group replaying a whole partition reads it back in steps, not all at once).
constexpr int64_t kWindow = 100000;

int64_t parse_int(std::string_view text, const std::string& what) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw std::runtime_error("unexpected answer to " + what + ": '" + std::string(text) + "'");
  return v;
}

std::string where(const std::string& table, const ReplayFilter::Partition& p) {
  return " FROM " + table + " WHERE `pico_topic` = " + quote_string(p.first) +
         " AND `pico_partition` = " + std::to_string(p.second);
}

}  // namespace

std::string ReplayFilter::probe_sql(const std::string& table, const Partition& p, int64_t first) {
  return "SELECT count(), max(`pico_offset`)" + where(table, p) + " AND `pico_offset` >= " + std::to_string(first) +
         " FORMAT TabSeparated";
}

std::string ReplayFilter::window_sql(const std::string& table, const Partition& p, int64_t from, int64_t to) {
  return "SELECT DISTINCT `pico_offset`" + where(table, p) + " AND `pico_offset` BETWEEN " + std::to_string(from) +
         " AND " + std::to_string(to) + " ORDER BY `pico_offset` FORMAT TabSeparated";
}

void ReplayFilter::assigned(const Partition& p) {
  std::lock_guard lock(mutex_);
  State& s = states_[p];
  s = State{};
  ++epochs_[p];
}

void ReplayFilter::revoked(const Partition& p) {
  std::lock_guard lock(mutex_);
  states_.erase(p);
  ++epochs_[p];
}

void ReplayFilter::passed(const Partition& p, int64_t last) {
  std::lock_guard lock(mutex_);
  State& s = states_[p];
  s = State{};
  s.check = false;
  s.next = last + 1;
}

ReplayFilter::Found ReplayFilter::written(const Partition& p, const std::vector<int64_t>& offsets,
                                          const std::string& table, const Query& query,
                                          const std::function<void()>& settle) {
  Found found;
  if (offsets.empty()) return found;
  const int64_t first = offsets.front(), last = offsets.back();
  State s;
  uint64_t epoch = 0;
  {
    std::lock_guard lock(mutex_);
    s = states_[p];
    epoch = epochs_[p];
  }
  if (s.check || first < s.next) {
    settle();
    const std::string answer = query(probe_sql(table, p, first));
    const size_t tab = answer.find('\t');
    if (tab == std::string::npos) throw std::runtime_error("unexpected answer to the replay check: '" + answer + "'");
    std::string_view max_text(answer);
    max_text = max_text.substr(tab + 1);
    while (!max_text.empty() && (max_text.back() == '\n' || max_text.back() == '\r')) max_text.remove_suffix(1);
    const int64_t rows = parse_int(std::string_view(answer).substr(0, tab), "the replay check");
    s = State{};
    s.check = false;
    s.replay_end = rows > 0 ? parse_int(max_text, "the replay check") : -1;
    found.probed = true;
    found.replay_end = s.replay_end;
  }
  if (s.replay_end >= first) {
    if (first < s.window_from || std::min(last, s.replay_end) > s.window_to) {
      const int64_t to = std::min(s.replay_end, std::max(last, first + kWindow - 1));
      const std::string answer = query(window_sql(table, p, first, to));
      s.present.clear();
      for (size_t at = 0; at < answer.size();) {
        size_t end = answer.find('\n', at);
        if (end == std::string::npos) end = answer.size();
        if (end > at)
          s.present.push_back(parse_int(std::string_view(answer).substr(at, end - at), "the replay lookup"));
        at = end + 1;
      }
      s.window_from = first;
      s.window_to = to;
    }
    for (size_t i = 0; i < offsets.size(); ++i)
      if (std::binary_search(s.present.begin(), s.present.end(), offsets[i]))
        found.written.push_back(static_cast<uint32_t>(i));
  }
  s.next = last + 1;
  if (s.replay_end >= 0 && s.next > s.replay_end) {  // past the replay
    s.replay_end = -1;
    s.present.clear();
    s.window_from = 0;
    s.window_to = -1;
  }
  std::lock_guard lock(mutex_);
  if (epochs_[p] != epoch) s.check = true;  // assigned again meanwhile: its next batch is checked anew
  states_[p] = std::move(s);
  return found;
}

}  // namespace picomq::clickhouse
