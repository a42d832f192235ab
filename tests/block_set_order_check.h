// Shared by the caching block-set tests: a set walked forwards and backwards holds the same
// blocks in the same order as the std::set it is checked against.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace gmb::testing {

template <class Set, class Ref>
void expect_same_order(Set& set, const Ref& ref) {
  ASSERT_EQ(set.size(), ref.size());
  auto* x = set.first();
  for (auto* r : ref) {
    ASSERT_EQ(x, r);
    x = set.next(x);
  }
  ASSERT_EQ(x, nullptr);
  x = set.last();
  for (auto it = ref.rbegin(); it != ref.rend(); ++it) {
    ASSERT_EQ(x, *it);
    x = set.prev(x);
  }
  ASSERT_EQ(x, nullptr);
}

// Erases a member chosen by `rng` from the set, its reference and the list of members `in`, and
// returns it (its tree leaf must then be cleared: the callers assert it).
template <class Block, class Set, class Ref, class Rng>
Block* erase_random_member(std::vector<Block*>& in, Set& set, Ref& ref, Rng& rng) {
  const std::size_t i = rng() % in.size();
  Block* b = in[i];
  in[i] = in.back();
  in.pop_back();
  set.erase(b);
  ref.erase(b);
  return b;
}

}  // namespace gmb::testing
