#include "plugins/join/time_matrix.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace cepbus::plugins::join {
namespace {

struct Cell {
  std::string_view text;
  size_t column = 1;  // 1-based character column of the cell's first character
};

std::string_view trim(std::string_view s, size_t& lead) {
  lead = 0;
  while (lead < s.size() && (s[lead] == ' ' || s[lead] == '\t')) ++lead;
  size_t end = s.size();
  while (end > lead && (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\r')) --end;
  return s.substr(lead, end - lead);
}

std::vector<Cell> splitRow(std::string_view line) {
  std::vector<Cell> cells;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    const std::string_view raw = line.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t lead = 0;
    const std::string_view t = trim(raw, lead);
    cells.push_back(Cell{t, start + lead + 1});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return cells;
}

bool parseNumber(std::string_view s, double& out) {
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Result<TimeMatrix> TimeMatrix::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::invalidArgument("time matrix '" + path + "': cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

Result<TimeMatrix> TimeMatrix::parse(std::string_view text, const std::string& name) {
  struct Row {
    size_t line;
    std::vector<Cell> cells;
  };
  std::vector<Row> rows;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    ++line_no;
    size_t lead = 0;
    const std::string_view t = trim(line, lead);
    if (!t.empty() && t.front() != '#') rows.push_back(Row{line_no, splitRow(line)});
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  auto at = [&](size_t line, size_t column) {
    return name + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  };
  if (rows.empty()) return Status::invalidArgument(name + ": the time matrix is empty");

  TimeMatrix m;
  double probe = 0;
  const bool labelled = !parseNumber(rows.front().cells.front().text, probe);
  size_t first_data = 0;
  size_t first_col = 0;
  if (labelled) {
    const Row& header = rows.front();
    for (size_t c = 1; c < header.cells.size(); ++c) {
      const Cell& cell = header.cells[c];
      if (cell.text.empty()) {
        return Status::invalidArgument(at(header.line, cell.column) + "empty site label");
      }
      std::string label(cell.text);
      if (m.by_label_.count(label) != 0) {
        return Status::invalidArgument(at(header.line, cell.column) + "site '" + label +
                                       "' labels two columns");
      }
      m.by_label_.emplace(label, static_cast<int64_t>(m.labels_.size()));
      m.labels_.push_back(std::move(label));
    }
    if (m.labels_.empty()) {
      return Status::invalidArgument(at(header.line, 1) + "the header names no site");
    }
    first_data = 1;
    first_col = 1;
  } else {
    for (size_t i = 0; i < rows.front().cells.size(); ++i) {
      m.labels_.push_back(std::to_string(i));
      m.by_label_.emplace(m.labels_.back(), static_cast<int64_t>(i));
    }
  }
  const size_t n = m.labels_.size();
  if (rows.size() - first_data != n) {
    const Row& last = rows.back();
    return Status::invalidArgument(at(last.line, 1) + "not square: " + std::to_string(n) +
                                   " columns but " + std::to_string(rows.size() - first_data) +
                                   " rows");
  }
  m.cells_.assign(n * n, 0);
  for (size_t r = 0; r < n; ++r) {
    const Row& row = rows[first_data + r];
    if (row.cells.size() != n + first_col) {
      const Cell& where =
          row.cells.size() > n + first_col ? row.cells[n + first_col] : row.cells.back();
      return Status::invalidArgument(at(row.line, where.column) + "not square: expected " +
                                     std::to_string(n) + " values, found " +
                                     std::to_string(row.cells.size() - first_col));
    }
    if (labelled && row.cells.front().text != m.labels_[r]) {
      return Status::invalidArgument(at(row.line, row.cells.front().column) + "row label '" +
                                     std::string(row.cells.front().text) + "', expected '" +
                                     m.labels_[r] + "' (rows must follow the header's order)");
    }
    for (size_t c = 0; c < n; ++c) {
      const Cell& cell = row.cells[first_col + c];
      double v = 0;
      if (!parseNumber(cell.text, v) || !std::isfinite(v)) {
        return Status::invalidArgument(at(row.line, cell.column) + "'" + std::string(cell.text) +
                                       "' is not a number");
      }
      if (v < 0) {
        return Status::invalidArgument(at(row.line, cell.column) + "negative travel time " +
                                       std::string(cell.text));
      }
      m.cells_[r * n + c] = v;
      if (c < r && m.cells_[c * n + r] != v) {
        return Status::invalidArgument(
            at(row.line, cell.column) + "not symmetric: time[" + m.labels_[r] + "][" +
            m.labels_[c] + "] = " + std::string(cell.text) + " but time[" + m.labels_[c] + "][" +
            m.labels_[r] + "] = " + Value(m.cells_[c * n + r]).toString());
      }
      m.max_ = std::max(m.max_, v);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    int64_t k = 0;
    const std::string& l = m.labels_[i];
    const auto [end, ec] = std::from_chars(l.data(), l.data() + l.size(), k);
    if (ec != std::errc() || end != l.data() + l.size() || k < 0 || k > 1'000'000) continue;
    if (std::to_string(k) != l) continue;  // "007" is a string label, not site 7
    if (m.by_int_.size() <= static_cast<size_t>(k)) m.by_int_.resize(k + 1, -1);
    m.by_int_[k] = static_cast<int64_t>(i);
  }
  return m;
}

int64_t TimeMatrix::indexOf(const Value& site) const {
  if (site.kind() == Value::Kind::kInt) {
    const int64_t k = site.asInt();
    return k >= 0 && static_cast<size_t>(k) < by_int_.size() ? by_int_[k] : -1;
  }
  if (site.kind() == Value::Kind::kString) {
    auto it = by_label_.find(site.asString());
    return it == by_label_.end() ? -1 : it->second;
  }
  return -1;
}

}  // namespace cepbus::plugins::join
