//===- Schedule.h - the learning rate of each step --------------*- C++ -*-===//
//
// The lr schedules of hpcrt.h ("Training programs"): constant, and linear or
// cosine decay after a linear warmup, as transformers'
// get_linear/cosine_schedule_with_warmup compute them. The lr of a step
// depends only on the step and the schedule, so a resumed run feeds the
// same values as an uninterrupted one.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_SCHEDULE_H
#define HPCRT_DRIVER_SCHEDULE_H

#include <cstdint>
#include <string>

namespace hpcrt::driver {

struct LrSchedule {
  std::string kind = "constant"; ///< "constant", "linear" or "cosine"
  int64_t warmup = 0, total = 0;
  double lr = 0; ///< the base lr

  /// The lr of step `step` (from 1).
  double at(int64_t step) const;
  /// "constant", "cosine:W,T", "linear:W,T".
  std::string describe() const;
};

/// Parses --lr-schedule's value: constant | cosine:WARMUP,TOTAL |
/// linear:WARMUP,TOTAL (throws hpcrt::Error naming the flag).
LrSchedule parseLrSchedule(const std::string &text);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_SCHEDULE_H
