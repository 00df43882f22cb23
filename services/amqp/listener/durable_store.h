#pragma once

// DurableStore: the durable AMQP subscriptions of a bus with a journal,
// recorded so that they outlive the process (services/amqp/listener/amqp_listener.h).
// A table of the reliable flow's SQLite journal (flows/journal/journal.h) holds one
// row per subscription, written when it is made and deleted when its link is
// closed; the listener reads them when it starts and re-creates each one,
// parked, before it accepts a connection.
//
//   durable_subscriptions(endpoint PRIMARY KEY, container_id, link_name,
//                         pattern, user, owner)
//
// It is a second connection to the journal's file: the journal thread stays
// its only writer of events, and the two wait for each other's (short)
// transactions through SQLite's busy timeout. A write is fsynced before it
// returns, so a subscription the client saw attached is on disk.
//
// Thread-safety: none; the listener uses it on one thread at a time.
// Ownership: owns its connection.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"

struct sqlite3;

namespace cepbus::services::amqp {

// The broker endpoint of link `link_name` of client `container_id`: the name
// that identifies its subscription. Every such name begins with
// kSubscriptionEndpointPrefix.
std::string subscriptionEndpoint(const std::string& container_id, const std::string& link_name);
inline constexpr std::string_view kSubscriptionEndpointPrefix = "amqp:";

struct DurableRecord {
  std::string container_id;
  std::string link_name;
  std::string pattern;  // the source address it subscribed with
  std::string user;     // who subscribed; empty: an anonymous client
  std::string owner;    // whose max-durable it counts against
};

class DurableStore {
 public:
  // What load() found: the records to restore, oldest first, and a line for
  // each one that did not decode (it is deleted).
  struct Loaded {
    std::vector<DurableRecord> records;
    std::vector<std::string> corrupt;
  };

  // Opens (creating the table if needed) the journal at `path`; IoError
  // naming the path and SQLite's message when it cannot.
  static Result<std::unique_ptr<DurableStore>> open(const std::string& path);
  ~DurableStore();
  DurableStore(const DurableStore&) = delete;
  DurableStore& operator=(const DurableStore&) = delete;

  // Records a subscription, replacing one of the same endpoint.
  Status record(const DurableRecord& record);
  // Forgets the subscription of `endpoint` (none recorded: nothing to do).
  Status remove(const std::string& endpoint);
  Result<Loaded> load();

  const std::string& path() const { return path_; }

 private:
  explicit DurableStore(std::string path) : path_(std::move(path)) {}
  Status exec(const char* sql);
  Status error(const std::string& what) const;

  const std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace cepbus::services::amqp
