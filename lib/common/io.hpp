// File input/output used by the tools and the driver.
#pragma once
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace syssim {

// Reads a whole file, or standard input when path is "-" or empty.
std::string read_input(const std::string& path);

// The rest of an opened file from its read position: one read where it can seek, else as a
// stream. `path` names it in errors.
std::string read_rest(std::ifstream& in, const std::string& path);

// Writes to standard output when path is "-" or empty; otherwise atomically
// (a temporary file beside the target, then rename) so a failure leaves nothing half-written.
void write_output(const std::string& path, const std::string& text);

// Writes several outputs (path, text), all or none: every file goes to its temporary first,
// and only when all are written are they renamed into place; standard output comes last.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

// Installs handlers for SIGINT, SIGTERM and SIGHUP that delete the temporaries of the outputs
// being written before the signal ends the process as it would have (for the tools' main).
void remove_partial_outputs_on_signals();

}  // namespace syssim
