// A fixed-capacity ring buffer: the recent history of one GPU. Pushing into a
// full ring drops the oldest element. Not thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

namespace gpuherd::telemetry {

template <typename T>
class Ring {
 public:
  // A capacity of 0 is raised to 1 so that the newest element is always kept.
  // Space is reserved up front (no reallocation, so Push is O(1)) but
  // elements are constructed only as they arrive.
  explicit Ring(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {
    slots_.reserve(capacity_);
  }

  size_t capacity() const { return capacity_; }
  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }

  // O(1); drops the oldest element when full.
  void Push(T value) {
    if (slots_.size() < capacity_) {
      slots_.push_back(std::move(value));  // not yet full: head_ is 0
    } else {
      slots_[head_] = std::move(value);
      head_ = (head_ + 1) % capacity_;
    }
  }

  // i = 0 is the oldest element, size() - 1 the newest.
  const T& operator[](size_t i) const {
    assert(i < size());
    return slots_[(head_ + i) % capacity_];
  }
  // Requires !empty().
  const T& Newest() const { return (*this)[size() - 1]; }

  // The newest min(n, size()) elements, oldest first.
  std::vector<T> Last(size_t n) const {
    n = std::min(n, size());
    std::vector<T> out;
    out.reserve(n);
    for (size_t i = size() - n; i < size(); ++i) out.push_back((*this)[i]);
    return out;
  }

  void Clear() {
    slots_.clear();
    head_ = 0;
  }

  // Iterates oldest to newest.
  class ConstIterator {
   public:
    ConstIterator(const Ring* ring, size_t i) : ring_(ring), i_(i) {}
    const T& operator*() const { return (*ring_)[i_]; }
    const T* operator->() const { return &(*ring_)[i_]; }
    ConstIterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const ConstIterator& other) const { return i_ == other.i_; }
    bool operator!=(const ConstIterator& other) const { return i_ != other.i_; }

   private:
    const Ring* ring_;
    size_t i_;
  };
  ConstIterator begin() const { return ConstIterator(this, 0); }
  ConstIterator end() const { return ConstIterator(this, size()); }

 private:
  size_t capacity_;
  std::vector<T> slots_;  // grows to capacity_, then is overwritten in place
  size_t head_ = 0;  // slot of the oldest element
};

}  // namespace gpuherd::telemetry
