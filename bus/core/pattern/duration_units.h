#pragma once

// Units of durations in the pattern language (`WITHIN 30 s`): us, ms, s, min
// and h, converted at parse time into the units of the input's `ts` that
// the query declares (ParseOptions::ts_unit), so that a Query holds `ts`
// units whatever its text wrote. Internal to bus/core: parser.cc reads
// durations through it.

#include <cstdint>
#include <string>

#include "bus/core/pattern/lexer.h"
#include "bus/core/pattern/parser.h"

namespace cepbus::pattern::parsing {

// `n` of the unit token `unit` that follows the duration's number token
// `number`, in units of `ts`. `written` is the duration as the query wrote
// it, for errors. Throws ParseError (parse_error.h), at the unit or the
// number: an unknown unit (naming the spelling to write for common others),
// no declared `ts` unit, not a whole number of `ts` units, more than 64 bits.
int64_t inTsUnits(int64_t n, const Token& number, const Token& unit, const std::string& written,
                  TimeUnit ts);

}  // namespace cepbus::pattern::parsing
