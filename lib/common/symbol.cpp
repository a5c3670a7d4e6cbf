#include "common/symbol.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace syssim {
namespace {

struct Table {
  std::mutex lock;
  // Keyed by a view of the owned text, so a lookup allocates nothing; the texts never move.
  std::unordered_map<std::string_view, std::unique_ptr<const std::string>> texts;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: symbols may be used by static destructors
  return *t;
}

const std::string* intern(std::string_view text) {
  Table& t = table();
  std::lock_guard<std::mutex> guard(t.lock);
  auto it = t.texts.find(text);
  if (it != t.texts.end()) return it->second.get();
  auto owned = std::make_unique<const std::string>(text);
  const std::string* interned = owned.get();
  t.texts.emplace(*interned, std::move(owned));
  return interned;
}

}  // namespace

Symbol::Symbol() {
  static const std::string* const empty = intern("");
  text_ = empty;
}

Symbol::Symbol(std::string_view text) : text_(intern(text)) {}

}  // namespace syssim
