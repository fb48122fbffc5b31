// The ops' working memory for a call, owned by a session (a batch decode uses its first session's):
// a slot per thread of the call, each holding one object of every type the ops ask for, made on
// first use and kept, with the capacity it grew to, for the next call. A decoded token allocates
// nothing once one has run; memory belongs to the session that uses it and goes with it (no
// thread_local buffers left behind on the application's threads).
//
// Ops name what they keep by a type of their own (a struct in their file): two uses of one type
// would share an object.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "engine/format/error.h"
#include "kernels/thread_team.h"

namespace aft {

class Scratch {
 public:
  // On the calling thread, before the call's team runs: slots for its n_threads threads.
  void begin_call(int n_threads) {
    while (slots_.size() < static_cast<std::size_t>(std::max(n_threads, 1))) {
      slots_.push_back(std::make_unique<Slot>());
    }
  }

  // This thread's T: the calling thread's outside the call's runs, else its member number's. A
  // run nested in another (Op::run_in_team's default) is on one thread: it keeps its slot.
  template <class T>
  T& local() {
    const auto thread = static_cast<std::size_t>(kernels::ThreadTeam::this_member());
    if (thread >= slots_.size()) {
      throw Error(AFT_ERR_INTERNAL, "scratch: a thread beyond the call's thread count");
    }
    return slots_[thread]->get<T>();
  }

  // The calling thread's T (the slot of member 0), for what a region's members share: made (and
  // sized) before the region, in Op::prepare, so that no member adds to the slot while others read.
  template <class T>
  T& shared() {
    if (slots_.empty()) throw Error(AFT_ERR_INTERNAL, "scratch: no call begun");
    return slots_[0]->get<T>();
  }

 private:
  // One object of each type asked for, found by a per-type key: a few entries, searched in order.
  class Slot {
   public:
    template <class T>
    T& get() {
      for (const Entry& entry : entries_) {
        if (entry.key == &key_of<T>) return static_cast<Holder<T>&>(*entry.object).value;
      }
      auto holder = std::make_unique<Holder<T>>();
      T& value = holder->value;
      entries_.reserve(entries_.size() + 1);  // may throw: then nothing changed
      entries_.push_back(Entry{&key_of<T>, std::move(holder)});
      return value;
    }

   private:
    struct Object {
      virtual ~Object() = default;
    };
    template <class T>
    struct Holder final : Object {
      T value{};
    };
    struct Entry {
      const void* key;
      std::unique_ptr<Object> object;
    };
    // An address per type: the key of its entry.
    template <class T>
    static constexpr char key_of = 0;

    std::vector<Entry> entries_;
  };

  // unique_ptr: a slot stays where it is while others are added.
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace aft
