#include "services/http/cluster_json.h"

namespace cepbus::services::http {

nlohmann::json clusterNodeJson(const ClusterStats& s) {
  nlohmann::json partitions = nlohmann::json::array();
  for (const PartitionStats& p : s.partitions) {
    partitions.push_back({{"partition", p.partition},
                          {"role", p.role},
                          {"owner", p.owner},
                          {"held", p.held},
                          {"unaccepted_outputs", p.unaccepted_outputs},
                          {"held_messages_peak", p.held_messages_peak},
                          {"stream_ended", p.stream_ended},
                          {"watermark", p.watermark ? nlohmann::json(*p.watermark) : nullptr}});
    if (p.resume_from) {
      partitions.back()["resume_from"] = *p.resume_from;
      partitions.back()["lease_offset"] = *p.lease_offset;
    }
  }
  return {{"node", s.node},
          {"live_nodes", s.live_nodes},
          {"partitions", std::move(partitions)},
          {"received", s.received},
          {"settled", s.settled},
          {"replayed", s.replayed},
          {"takeovers", s.takeovers},
          {"handovers", s.handovers},
          {"duplicates", s.duplicates},
          {"late", s.late},
          {"rejected", s.rejected},
          {"composites", s.composites},
          {"detector_errors", s.detector_errors},
          {"reconnects", s.reconnects},
          {"stalls", s.stalls},
          {"unconfirmed_handovers", s.unconfirmed_handovers},
          {"window_full", s.window_full},
          {"checkpoints", s.checkpoints},
          {"retention_gaps", s.retention_gaps},
          {"out_of_order", s.out_of_order},
          {"sequence_gaps", s.sequence_gaps},
          {"stream_refreshes", s.stream_refreshes},
          {"stream_broker_switches", s.stream_broker_switches},
          {"echo_timeouts", s.echo_timeouts},
          {"streams_ended", s.streams_ended},
          {"ingress_received", s.ingress_received},
          {"ingress_events", s.ingress_events},
          {"ingress_accepted", s.ingress_accepted},
          {"ingress_rejected", s.ingress_rejected},
          {"ingress_released", s.ingress_released},
          {"ingress_batches", s.ingress_batches},
          {"ingress_resent", s.ingress_resent}};
}

}  // namespace cepbus::services::http
