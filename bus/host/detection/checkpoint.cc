#include "bus/host/detection/checkpoint.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "bus/core/pattern/printer.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::detection {
namespace {

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// The clauses an edit may change and keep the state, taken out.
pattern::Query shapeOf(const pattern::Query& query) {
  pattern::Query shape = query;
  shape.where = nullptr;
  shape.within.reset();
  shape.min_probability.reset();
  shape.returns.reset();
  shape.having = nullptr;
  shape.emit.reset();
  if (shape.window) shape.window->emit_every = 0;
  return shape;
}

}  // namespace

CheckpointIdentity checkpointIdentity(std::string engine,
                                      std::span<const CheckpointedQuery> queries,
                                      const plugin::DetectorOptions& options) {
  std::string full;
  std::string shape;
  for (const CheckpointedQuery& q : queries) {
    full.append(q.name).append(1, '\n').append(pattern::toString(q.query)).append(1, '\n');
    shape.append(q.name).append(1, '\n').append(pattern::toString(shapeOf(q.query)));
    shape.append(1, '\n');
  }
  std::string settings;
  for (const auto& [key, value] : options.values()) {
    settings.append(key).append(1, '=').append(value).append(1, '\n');
  }
  return {std::move(engine), plugin::snapshotFingerprint(full + settings),
          plugin::snapshotFingerprint(shape + settings)};
}

Status checkCheckpointable(const Detection& detection) {
  plugin::SnapshotWriter scratch;
  if (Status s = detection.snapshot(scratch); !s) {
    return Status::invalidArgument("engine '" + detection.engine() +
                                   "' cannot checkpoint this query: " + s.message());
  }
  if (detection.snapshotVersion() == 0) {
    return Status::invalidArgument("engine '" + detection.engine() +
                                   "' cannot checkpoint this query: it gives no snapshot version");
  }
  return Status::ok();
}

Status writeCheckpoint(const std::string& file, const Detection& detection,
                       const CheckpointIdentity& identity, uint64_t position, size_t* bytes) {
  plugin::SnapshotWriter out;
  if (Status s = detection.snapshot(out); !s) return s;
  auto data = out.finish({.engine = identity.engine,
                          .engine_version = detection.snapshotVersion(),
                          .fingerprint = identity.fingerprint,
                          .shape = identity.shape,
                          .position = position});
  if (!data) return data.status();
  const std::string tmp = file + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data->data(), static_cast<std::streamsize>(data->size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return Status::ioError("cannot write checkpoint '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::ioError("cannot rename '" + tmp + "' to checkpoint '" + file + "'");
  }
  if (bytes != nullptr) *bytes = data->size();
  return Status::ok();
}

Result<RestoredCheckpoint> restoreCheckpoint(const std::string& file, Detection& detection,
                                             const CheckpointIdentity& identity) {
  std::ifstream f(file, std::ios::binary);
  if (!f) return Status::notFound("cannot open checkpoint '" + file + "'");
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto in = plugin::SnapshotReader::open(data);
  auto refuse = [&file](const std::string& why) {
    return Status::invalidArgument("checkpoint '" + file + "': " + why);
  };
  if (!in) return refuse(in.status().message());
  const plugin::SnapshotHeader& h = in->header();
  if (h.engine != identity.engine) {
    return refuse("it holds the state of engine '" + h.engine + "', this run's engine is '" +
                  identity.engine + "'");
  }
  if (h.engine_version != detection.snapshotVersion()) {
    return refuse("it holds " + h.engine + " state version " + std::to_string(h.engine_version) +
                  "; this cepbus's " + h.engine + " reads version " +
                  std::to_string(detection.snapshotVersion()));
  }
  const bool edited = h.fingerprint != identity.fingerprint;
  if (edited && h.shape != identity.shape) {
    return refuse("it was written for another query or options (fingerprint " + hex(h.fingerprint) +
                  ", this run's " + hex(identity.fingerprint) +
                  "); an edit keeps the state only when it changes WITHIN, WHERE, HAVING, "
                  "RETURN, PROBABILITY or EMIT alone");
  }
  if (edited) in->carryOver();
  if (Status s = detection.restore(*in); !s) {
    if (edited)
      return refuse("the state cannot be carried over to the edited query: " + s.message());
    return refuse(s.message());
  }
  if (!in->atEnd()) return refuse("state left unread after the detector's");
  return RestoredCheckpoint{h.position, edited};
}

}  // namespace cepbus::detection
