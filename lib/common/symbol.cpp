#include "common/symbol.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace syssim {
namespace {

struct Table {
  std::mutex lock;
  // Keyed by a view of the owned text, so a lookup allocates nothing; the texts never move.
  std::unordered_map<std::string_view, std::unique_ptr<const Symbol::Entry>> texts;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: symbols may be used by static destructors
  return *t;
}

// `text` with each dot-separated part of only digits as '*'; empty where no part is.
std::string any_layer_of(std::string_view text) {
  std::string pattern;
  bool numbered = false;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('.', begin), text.size());
    const std::string_view part = text.substr(begin, end - begin);
    const bool number = !part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos;
    numbered = numbered || number;
    if (begin) pattern += '.';
    pattern += number ? std::string_view("*") : part;
    begin = end + 1;
  }
  return numbered ? pattern : std::string();
}

const Symbol::Entry* intern(std::string_view text) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.lock);
  auto it = t.texts.find(text);
  if (it != t.texts.end()) return it->second.get();
  auto owned = std::make_unique<const Symbol::Entry>(
      Symbol::Entry{std::string(text), parse_enum<NamedOp>(text).value_or(NamedOp::other), parse_module_path(text),
                    any_layer_of(text)});
  const Symbol::Entry* interned = owned.get();
  t.texts.emplace(interned->text, std::move(owned));
  return interned;
}

}  // namespace

Symbol::Symbol() {
  static const Entry* const empty = intern("");
  entry_ = empty;
}

Symbol::Symbol(std::string_view text) : entry_(intern(text)) {}

}  // namespace syssim
