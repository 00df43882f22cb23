#pragma once

// CapturedLog: the lines one Poco logger logs while it lives, for tests
// that assert what the bus says (the admin API's audit lines).
//
// Thread-safety: lines may be logged from any thread while a test reads
// them. Ownership: swaps the logger's channel for its own and puts the old
// one back when destroyed.

#include <Poco/AutoPtr.h>
#include <Poco/Channel.h>
#include <Poco/Logger.h>
#include <Poco/Message.h>

#include <string>
#include <string_view>
#include <vector>

#include "bus/base/mutex.h"

namespace cepbus::services::http {

class CapturedLog {
 public:
  explicit CapturedLog(std::string_view logger)
      : logger_(Poco::Logger::get(std::string(logger))),
        before_(logger_.getChannel()),
        level_before_(logger_.getLevel()),
        lines_(new Lines) {
    logger_.setChannel(lines_);
    logger_.setLevel(Poco::Message::PRIO_INFORMATION);
  }
  ~CapturedLog() {
    logger_.setChannel(before_);
    logger_.setLevel(level_before_);
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::vector<std::string> lines() const { return lines_->all(); }

 private:
  class Lines : public Poco::Channel {
   public:
    void log(const Poco::Message& message) override {
      MutexLock lock(mu_);
      lines_.push_back(message.getText());
    }
    std::vector<std::string> all() const {
      MutexLock lock(mu_);
      return lines_;
    }

   private:
    mutable Mutex mu_;
    std::vector<std::string> lines_ GUARDED_BY(mu_);
  };

  Poco::Logger& logger_;
  Poco::AutoPtr<Poco::Channel> before_;
  const int level_before_;
  Poco::AutoPtr<Lines> lines_;
};

}  // namespace cepbus::services::http
