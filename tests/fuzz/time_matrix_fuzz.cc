// The join plugin's time-matrix CSV: text -> TimeMatrix::parse(). A matrix
// that loads must hold what its contract says (square, symmetric, finite,
// >= 0, max = the largest cell, every label found by indexOf()).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "plugins/join/time_matrix.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cepbus;
  if (size > 16384) return -1;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto matrix = plugins::join::TimeMatrix::parse(text, "fuzz.csv");
  if (!matrix) {
    fuzz::check(matrix.status().message().starts_with("fuzz.csv"),
                "error without the file:", matrix.status().message());
    return 0;
  }
  const size_t n = matrix->size();
  double max = 0;
  for (size_t x = 0; x < n; ++x) {
    const int64_t index = matrix->indexOf(Value(std::string(matrix->label(x))));
    fuzz::check(index >= 0 && matrix->label(static_cast<size_t>(index)) == matrix->label(x),
                "label not found:", matrix->label(x));
    for (size_t y = 0; y < n; ++y) {
      const double t = matrix->at(x, y);
      fuzz::check(std::isfinite(t) && t >= 0, "bad cell");
      fuzz::check(t == matrix->at(y, x), "not symmetric");
      max = std::max(max, t);
    }
  }
  fuzz::check(max == matrix->maxTime(), "maxTime is not the largest cell");
  (void)matrix->indexOf(Value(int64_t{-1}));
  (void)matrix->indexOf(Value(int64_t{1} << 40));
  return 0;
}
