#include "common/io.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common/error.hpp"

namespace syssim {

std::string read_input(const std::string& path) {
  if (path.empty() || path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (std::filesystem::is_directory(path)) throw DataError(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open file");
  return read_rest(in, path);
}

std::string read_rest(std::ifstream& in, const std::string& path) {
  const std::streampos from = in.tellg();
  if (from != std::streampos(-1) && in.seekg(0, std::ios::end)) {
    const std::streampos end = in.tellg();
    if (end != std::streampos(-1) && in.seekg(from)) {
      std::string text(static_cast<size_t>(end - from), '\0');
      if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) throw DataError(path + ": cannot read file");
      return text;
    }
  }
  in.clear();  // not seekable (a pipe): read it as a stream
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<NotUtf8> find_not_utf8(const std::string& text) {
  int64_t line = 1;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      line += byte == '\n';
      ++i;
      continue;
    }
    // The length of the sequence a lead byte starts and the range of its second byte, which
    // excludes the overlong forms, the surrogates and code points past U+10FFFF (RFC 3629).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (byte >= 0xC2 && byte <= 0xDF) length = 2;
    else if (byte >= 0xE0 && byte <= 0xEF) length = 3, low = byte == 0xE0 ? 0xA0 : 0x80, high = byte == 0xED ? 0x9F : 0xBF;
    else if (byte >= 0xF0 && byte <= 0xF4) length = 4, low = byte == 0xF0 ? 0x90 : 0x80, high = byte == 0xF4 ? 0x8F : 0xBF;
    size_t end = i + 1;  // past the bytes that continue the sequence
    if (length > 0 && end < text.size()) {
      const auto second = static_cast<unsigned char>(text[end]);
      if (second >= low && second <= high) ++end;
      while (end > i + 1 && end < i + length && end < text.size() &&
             (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        ++end;
    }
    if (length == 0 || end != i + length) return NotUtf8{line, byte};
    i += length;
  }
  return std::nullopt;
}

std::string byte_text(unsigned char byte) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(byte));
  return hex;
}

void require_utf8(const std::string& text, const std::string& source) {
  if (const std::optional<NotUtf8> bad = find_not_utf8(text))
    throw DataError(source + ": line " + std::to_string(bad->line) + ": not UTF-8 text (byte " + byte_text(bad->byte) + ")");
}

bool is_stdout(const std::string& path) { return path.empty() || path == "-"; }

namespace {

// The temporaries being written, for the signal handler: fixed buffers, as a handler may only
// read memory that is never reallocated.
constexpr size_t kMaxTemporaries = 8;
constexpr size_t kMaxTemporaryPath = 4096;
char g_temporaries[kMaxTemporaries][kMaxTemporaryPath];
volatile std::sig_atomic_t g_temporary_count = 0;

void on_fatal_signal(int signal) {
  for (std::sig_atomic_t i = 0; i < g_temporary_count; ++i)
    if (g_temporaries[i][0] != '\0') ::unlink(g_temporaries[i]);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// Devices and pipes (-o /dev/null, a FIFO) are written in place: renaming over them would
// replace the device with a file.
bool written_in_place(const std::string& path) {
  std::filesystem::file_status status = std::filesystem::status(path);
  return std::filesystem::exists(status) && !std::filesystem::is_regular_file(status);
}

void write_in_place(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw DataError(path + ": write failed");
}

// The temporaries of one write_outputs call, deleted unless renamed into place.
class Temporaries {
 public:
  ~Temporaries() {
    g_temporary_count = 0;
    for (const std::string& temp : paths_)
      if (!temp.empty()) std::remove(temp.c_str());
  }
  std::string add(const std::string& path) {
    std::string temp = path + ".tmp." + std::to_string(::getpid());
    if (paths_.size() >= kMaxTemporaries || temp.size() >= kMaxTemporaryPath)
      throw DataError(path + ": too many outputs or too long a path to write atomically");
    std::snprintf(g_temporaries[paths_.size()], kMaxTemporaryPath, "%s", temp.c_str());
    paths_.push_back(temp);
    g_temporary_count = static_cast<std::sig_atomic_t>(paths_.size());
    return temp;
  }
  const std::string& operator[](size_t i) const { return paths_[i]; }
  // Renamed: nothing left to delete, here or by the signal handler.
  void placed(size_t i) {
    paths_[i].clear();
    g_temporaries[i][0] = '\0';
  }

 private:
  std::vector<std::string> paths_;
};

}  // namespace

void write_output(const std::string& path, const std::string& text) { write_outputs({{path, text}}); }

void check_outputs(const std::vector<std::pair<std::string, std::string>>& flag_paths,
                          const std::vector<std::pair<std::string, std::string>>& inputs) {
  namespace fs = std::filesystem;
  auto same_file = [](const std::string& a, const std::string& b) {
    if (is_stdout(a) || is_stdout(b)) return false;  // "" too: an output not asked for
    std::error_code error;
    return fs::weakly_canonical(fs::absolute(a), error) == fs::weakly_canonical(fs::absolute(b), error);
  };
  for (size_t a = 0; a < flag_paths.size(); ++a) {
    const auto& [flag, path] = flag_paths[a];
    std::error_code error;
    if (!is_stdout(path) && fs::is_directory(path, error))  // refused before the work, not after it
      throw UsageError(flag + " " + path + ": is a directory, expected a file");
    for (size_t b = a + 1; b < flag_paths.size(); ++b)
      if (same_file(path, flag_paths[b].second))
        throw UsageError(flag + " and " + flag_paths[b].first + " both name " + path + ": give each output its own file");
    for (const auto& [input_flag, input] : inputs)
      if (same_file(path, input))
        throw UsageError(flag + " names " + path + ", the " + input_flag + " it reads: write the output elsewhere");
  }
}

void write_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  // Where each output goes, decided once: before anything is renamed, so that a file renamed
  // into place is not then taken for one written in place.
  enum class Destination { standard_output, in_place, renamed };
  std::vector<Destination> destinations;
  for (const auto& [path, text] : outputs)
    destinations.push_back(is_stdout(path)          ? Destination::standard_output
                           : written_in_place(path) ? Destination::in_place
                                                    : Destination::renamed);
  Temporaries temporaries;
  std::vector<std::pair<size_t, size_t>> to_rename;  // output, temporary
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (destinations[o] != Destination::renamed) continue;
    const auto& [path, text] = outputs[o];
    const std::string temp = temporaries.add(path);
    to_rename.emplace_back(o, to_rename.size());
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw DataError(path + ": cannot write file");
    out << text;
    out.close();
    if (!out) throw DataError(path + ": write failed");
  }
  for (const auto& [o, t] : to_rename) {
    if (std::rename(temporaries[t].c_str(), outputs[o].first.c_str()) != 0)
      throw DataError(outputs[o].first + ": cannot rename temporary file into place");
    temporaries.placed(t);
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    if (destinations[o] == Destination::in_place) write_in_place(outputs[o].first, outputs[o].second);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (destinations[o] != Destination::standard_output) continue;
    std::cout << outputs[o].second;
    std::cout.flush();
    if (!std::cout) throw DataError("<stdout>: write failed");
  }
}

void remove_partial_outputs_on_signals() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal, on_fatal_signal);
}

}  // namespace syssim
