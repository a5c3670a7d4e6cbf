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
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
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
