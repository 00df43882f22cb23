#pragma once

// The dashboard page the admin listener serves at "/": HTML, JavaScript and
// CSS compiled into the binary (services/http/dashboard/*.{html,js,css},
// turned into string literals at configure time by CMake), so the bus needs
// no files and the browser downloads nothing from anywhere else.

#include <string_view>

namespace cepbus::services::http {

struct DashboardAsset {
  std::string_view content_type;
  std::string_view body;
};

// `path` is "/", "/dashboard.js" or "/dashboard.css"; anything else gives
// the page.
DashboardAsset dashboardAsset(std::string_view path);

}  // namespace cepbus::services::http
