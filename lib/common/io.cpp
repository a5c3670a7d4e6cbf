#include "common/io.hpp"

#include <unistd.h>

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

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) throw DataError("<stdout>: write failed");
    return;
  }
  // Devices and pipes (-o /dev/null, a FIFO) are written in place: renaming over them
  // would replace the device with a file.
  std::filesystem::file_status status = std::filesystem::status(path);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out.flush()) throw DataError(path + ": write failed");
    return;
  }
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw DataError(path + ": cannot write file");
    out << text;
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      throw DataError(path + ": write failed");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw DataError(path + ": cannot rename temporary file into place");
  }
}

}  // namespace syssim
