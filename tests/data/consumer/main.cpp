// Runs `syssim run`'s default job through the installed library and prints its JSON report.
#include <iostream>

#include "common/install.hpp"
#include "driver/driver.hpp"

int main() {
  syssim::set_install_prefix(SYSSIM_INSTALL_PREFIX);  // from find_package(syssim)
  syssim::RunRequest request;
  request.options = syssim::default_job_options();
  request.format = "json";
  try {
    std::cout << syssim::run(request).report;
  } catch (const std::exception& error) {
    std::cerr << "default_job: " << error.what() << "\n";
    return 1;
  }
}
