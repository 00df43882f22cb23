#pragma once

// P4's time matrix: time[x][y] is the fastest travel time between checkpoints
// x and y (distance / speed limit), in the time units of the stream. A pair of
// readings of one plate at x and y whose timestamps differ by less than
// time[x][y] cannot be one car: the plate is cloned.
//
// CSV, one row per line, cells separated by ',' (blank lines and lines
// starting with '#' skipped). Two forms:
//
//   labelled                    plain (sites are 0 .. N-1)
//   site,A,B,C                  0,30,45
//   A,0,30,45                   30,0,20
//   B,30,0,20                   45,20,0
//   C,45,20,0
//
// The labelled form is recognised by a first cell that is not a number; its
// row labels must repeat the header's labels in the same order. The matrix
// must be square, symmetric (the join condition |t1 - t2| < time[x][y] has no
// direction) and every cell a finite number >= 0. The diagonal is usually 0,
// so that two readings at the same checkpoint never join. Every error names
// file:line:column (column = 1-based cell number).
//
// Immutable once loaded; safe to read from any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/core/status.h"
#include "bus/core/value.h"

namespace cepbus::plugins::join {

class TimeMatrix {
 public:
  // Reads and checks the CSV file at `path`.
  static Result<TimeMatrix> load(const std::string& path);
  // Checks `text`; `name` stands for the file in messages.
  static Result<TimeMatrix> parse(std::string_view text, const std::string& name);

  size_t size() const { return labels_.size(); }
  const std::string& label(size_t i) const { return labels_[i]; }
  double at(size_t x, size_t y) const { return cells_[x * labels_.size() + y]; }
  // The largest entry: no pair can join with a larger time difference.
  double maxTime() const { return max_; }

  // The index of the site a reading names: a string equal to a label, or an
  // integer whose decimal form is a label. -1 when it names no site.
  int64_t indexOf(const Value& site) const;

 private:
  std::vector<std::string> labels_;
  std::vector<double> cells_;  // row-major
  double max_ = 0;
  std::unordered_map<std::string, int64_t> by_label_;
  std::vector<int64_t> by_int_;  // by_int_[k]: the site labelled with decimal k, or -1
};

}  // namespace cepbus::plugins::join
