// File input/output used by the tools and the driver.
#pragma once
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace syssim {

// Reads a whole file, or standard input when path is "-" or empty.
std::string read_input(const std::string& path);

// The first byte of `text` that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF included), and its line (from 1); none:
// the text is UTF-8.
struct NotUtf8 {
  int64_t line;
  unsigned char byte;
};
std::optional<NotUtf8> find_not_utf8(const std::string& text);
// Throws DataError "SOURCE: line N: not UTF-8 text (byte 0xFF)" at that byte: every text
// syssim reads is UTF-8, and names it reads are written back into JSON.
void require_utf8(const std::string& text, const std::string& source);
// "0xFF": a byte as the messages name it.
std::string byte_text(unsigned char byte);

// The rest of an opened file from its read position: one read where it can seek, else as a
// stream. `path` names it in errors.
std::string read_rest(std::ifstream& in, const std::string& path);

// Whether an output path means standard output: "-" or empty.
bool is_stdout(const std::string& path);

// Writes to standard output when path is "-" or empty; otherwise atomically
// (a temporary file beside the target, then rename) so a failure leaves nothing half-written.
void write_output(const std::string& path, const std::string& text);

// UsageError when an output a command was given, as (flag, path), names a folder; when two of
// them name the same file (standard output, "-", aside): each would overwrite the other; or when
// an output names one of the `inputs` (flag, path), which it would replace.
void check_outputs(const std::vector<std::pair<std::string, std::string>>& flag_paths,
                          const std::vector<std::pair<std::string, std::string>>& inputs = {});

// Writes several outputs (path, text), all or none: every file goes to its temporary first,
// and only when all are written are they renamed into place; standard output comes last.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

// Installs handlers for SIGINT, SIGTERM and SIGHUP that delete the temporaries of the outputs
// being written before the signal ends the process as it would have (for the tools' main).
void remove_partial_outputs_on_signals();

}  // namespace syssim
