#include "services/amqp/listener/return_waits.h"

#include <Poco/Clock.h>
#include <Poco/Util/Timer.h>

#include <utility>

namespace cepbus::services::amqp {

ReturnWaits::ReturnWaits() = default;

ReturnWaits::~ReturnWaits() { stop(); }

void ReturnWaits::after(std::chrono::milliseconds delay, std::function<void()> task) {
  Poco::Clock due;
  due += std::chrono::duration_cast<std::chrono::microseconds>(delay).count();
  MutexLock lock(mu_);
  if (!timer_) timer_ = std::make_unique<Poco::Util::Timer>();
  timer_->schedule(Poco::Util::Timer::func(std::move(task)), due);
}

void ReturnWaits::stop() {
  std::unique_ptr<Poco::Util::Timer> timer;
  {
    MutexLock lock(mu_);
    timer = std::move(timer_);
  }
  // Destroyed outside the lock: the timer's thread stops before any pending
  // task and is joined. Not cancel(true): Poco destroys its cancel notice's
  // event while the timer's thread may still be signalling it
  // (ThreadSanitizer reports the race).
  timer.reset();
}

}  // namespace cepbus::services::amqp
