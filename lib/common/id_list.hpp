// A short list of ids: an op's deps, reads and writes. Nearly all hold one to three, and every
// shard pass re-emits every op, so they are kept inline up to kInline and only longer lists
// (a bucket's gradients, an optimizer step's weights) take an allocation. The interface is
// the part of std::vector's the shard passes use; on disk, a JSON array.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace syssim {

class IdList {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  static constexpr uint32_t kInline = 3;

  IdList() = default;
  IdList(std::initializer_list<int64_t> ids) { assign(ids.begin(), ids.end()); }
  template <typename It>
  IdList(It first, It last) { assign(first, last); }
  IdList(const std::vector<int64_t>& ids) { assign(ids.begin(), ids.end()); }  // NOLINT: implicit, as the vectors passes build
  IdList(const IdList& other) { assign(other.begin(), other.end()); }
  IdList(IdList&& other) noexcept { take(other); }
  IdList& operator=(const IdList& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  IdList& operator=(IdList&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  IdList& operator=(std::initializer_list<int64_t> ids) {
    assign(ids.begin(), ids.end());
    return *this;
  }
  ~IdList() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return on_heap() ? heap_ : inline_; }
  const int64_t* data() const { return on_heap() ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t at(size_t i) const {
    if (i >= size_) throw std::out_of_range("IdList::at: index " + std::to_string(i) + " of " + std::to_string(size_));
    return data()[i];
  }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    std::fill(data() + std::min<size_t>(size_, n), data() + n, value);
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t id) {
    if (size_ == capacity_) grow(2 * static_cast<size_t>(capacity_));
    data()[size_++] = id;
  }
  void pop_back() { --size_; }
  template <typename It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    clear();
    reserve(n);
    std::copy(first, last, data());
    size_ = static_cast<uint32_t>(n);
  }
  template <typename It>
  iterator insert(const_iterator at, It first, It last) {
    const size_t offset = static_cast<size_t>(at - begin()), n = static_cast<size_t>(std::distance(first, last));
    reserve(size_ + n);
    int64_t* d = data();
    std::copy_backward(d + offset, d + size_, d + size_ + n);
    std::copy(first, last, d + offset);
    size_ += static_cast<uint32_t>(n);
    return d + offset;
  }
  iterator erase(const_iterator first, const_iterator last) {
    int64_t* d = data();
    const size_t from = static_cast<size_t>(first - d), to = static_cast<size_t>(last - d);
    std::copy(d + to, d + size_, d + from);
    size_ -= static_cast<uint32_t>(to - from);
    return d + from;
  }

  friend bool operator==(const IdList& a, const IdList& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const IdList& a, const IdList& b) { return !(a == b); }

 private:
  bool on_heap() const { return capacity_ > kInline; }
  void grow(size_t capacity) {
    int64_t* heap = new int64_t[capacity];
    std::copy(begin(), end(), heap);
    release();
    heap_ = heap;
    capacity_ = static_cast<uint32_t>(capacity);
  }
  void release() {
    if (on_heap()) delete[] heap_;
    capacity_ = kInline;
  }
  // Takes other's ids and leaves it empty; this holds nothing.
  void take(IdList& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap())
      heap_ = other.heap_;
    else
      std::memcpy(inline_, other.inline_, sizeof(inline_));
    other.size_ = 0;
    other.capacity_ = kInline;
  }

  union {
    int64_t inline_[kInline];
    int64_t* heap_;
  };
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
};

template <typename Json>
void to_json(Json& j, const IdList& ids) {
  j = Json::array();
  for (int64_t id : ids) j.push_back(id);
}

template <typename Json>
void from_json(const Json& j, IdList& ids) {
  ids = IdList(j.template get<std::vector<int64_t>>());
}

}  // namespace syssim
