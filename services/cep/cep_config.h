#pragma once

// The CEP service's settings of one service unit (cep_service.h), which its
// detections' stages are made with.

#include <cstddef>
#include <string>

namespace cepbus::services::cep {

struct CepServiceConfig {
  std::string name;        // the registry name: "<assembly>.<unit>"
  size_t capacity = 4096;  // queue capacity of each detector's stage
  // Most events each detector's worker hands it in one call.
  size_t batch_size = 64;
};

}  // namespace cepbus::services::cep
