#pragma once
// A temp buffer laid out region by region, as CUB lays out its temporary storage: every region has
// a name, a size and an alignment, and starts at the next multiple of its alignment after the
// regions laid out before it. Two regions are known to touch only where they were laid out as one
// contiguous group (a memset may then clear the group), and a region shares another's storage only
// as its declared alias.

#include <cstddef>
#include <initializer_list>
#include <string>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops::gpu_sampler {

struct temp_region {
  const char* name = "";
  std::size_t bytes = 0;
  std::size_t align = 256;         ///< a power of two
  std::size_t offset = 0;          ///< from the start of the buffer, set by temp_layout
  const char* alias_of = nullptr;  ///< the region whose storage this one shares, if any

  /// The region's start in the buffer at `temp`.
  template <class T>
  [[nodiscard]] T* in(void* temp) const {
    return reinterpret_cast<T*>(static_cast<std::byte*>(temp) + offset);
  }
};

class temp_layout {
 public:
  /// `region` placed after every region so far, at a multiple of its alignment.
  temp_region add(temp_region region) {
    region.offset = (end_ + region.align - 1) / region.align * region.align;
    end_ = region.offset + region.bytes;
    return region;
  }

  /// `parts` placed back to back, each as add() places it, and returned as one region named `name`
  /// that spans them all (from the first one's start to the last one's end).
  temp_region contiguous(const char* name, std::initializer_list<temp_region*> parts) {
    temp_region whole{name};
    bool first = true;
    for (temp_region* part : parts) {
      *part = add(*part);
      if (first) whole.offset = part->offset;
      first = false;
    }
    whole.bytes = end_ - whole.offset;
    return whole;
  }

  /// `region` in the storage of `of`: the same start, at most as many bytes, no stricter alignment.
  static temp_region alias(temp_region region, const temp_region& of) {
    if (region.bytes > of.bytes || of.align % region.align != 0)
      throw pinfeed::logic_error(std::string("temp layout: ") + region.name + " does not fit the storage of " + of.name);
    region.offset = of.offset;
    region.alias_of = of.name;
    return region;
  }

  /// The bytes the buffer needs: the end of the last region rounded up to kAlign, at least kAlign.
  [[nodiscard]] std::size_t total() const {
    const std::size_t rounded = (end_ + kAlign - 1) / kAlign * kAlign;
    return rounded > kAlign ? rounded : kAlign;
  }

  static constexpr std::size_t kAlign = 256;

 private:
  std::size_t end_ = 0;
};

}  // namespace pinfeed::ops::gpu_sampler
