#include "services/protocols/amqp/access_control.h"

#include <vector>

#include "bus/host/descriptor/address.h"
#include "router/topic.h"
#include "services/protocols/amqp/password_hash.h"

namespace cepbus::services::amqp {
namespace {

// Q[i..] covers P[j..]; P's wildcards are treated as the sets they denote.
bool covers(const std::vector<std::string_view>& q, size_t i,
            const std::vector<std::string_view>& p, size_t j,
            std::vector<std::vector<signed char>>& memo) {
  signed char& m = memo[i][j];
  if (m >= 0) return m == 1;
  bool result = false;
  if (i == q.size()) {
    result = j == p.size();
  } else if (q[i] == router::kHash) {
    result = covers(q, i + 1, p, j, memo) || (j < p.size() && covers(q, i, p, j + 1, memo));
  } else if (j < p.size() && p[j] != router::kHash) {
    const bool one = q[i] == router::kStar ? true : (p[j] != router::kStar && q[i] == p[j]);
    result = one && covers(q, i + 1, p, j + 1, memo);
  }
  m = result ? 1 : 0;
  return result;
}

}  // namespace

bool patternCovers(std::string_view permit, std::string_view pattern) {
  const auto q = router::normalizedPattern(permit);
  const auto p = router::normalizedPattern(pattern);
  std::vector<std::vector<signed char>> memo(q.size() + 1,
                                             std::vector<signed char>(p.size() + 1, -1));
  return covers(q, 0, p, 0, memo);
}

AccessControl::AccessControl(AmqpListenerConfig config)
    : config_(std::move(config)),
      plain_without_tls_(descriptor::isLoopbackHost(config_.host)),
      dummy_hash_(config_.users.empty() ? std::string() : config_.users.front().password_hash) {}

std::string AccessControl::mechanisms(bool encrypted) const {
  std::string out;
  if (hasUsers() && (encrypted || plain_without_tls_)) out = "PLAIN";
  if (allowsAnonymous()) out += out.empty() ? "ANONYMOUS" : " ANONYMOUS";
  return out;
}

bool AccessControl::authenticate(std::string_view user, std::string_view password) const {
  if (const AmqpUser* u = config_.user(user)) {
    return verifyPassword(password, u->password_hash);
  }
  if (!dummy_hash_.empty()) (void)verifyPassword(password, dummy_hash_);
  return false;
}

bool AccessControl::mayPublish(std::string_view user, std::string_view address) const {
  if (user.empty()) return allowsAnonymous();
  const AmqpUser* u = config_.user(user);
  if (u == nullptr) return false;
  for (const auto& p : u->permits) {
    if (!p.publish.empty() && router::topicMatches(p.publish, address)) return true;
  }
  return false;
}

bool AccessControl::maySubscribe(std::string_view user, std::string_view pattern) const {
  if (user.empty()) return allowsAnonymous();
  const AmqpUser* u = config_.user(user);
  if (u == nullptr) return false;
  for (const auto& p : u->permits) {
    if (!p.subscribe.empty() && patternCovers(p.subscribe, pattern)) return true;
  }
  return false;
}

}  // namespace cepbus::services::amqp
