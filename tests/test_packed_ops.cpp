// PackedOps gives back every op as it was given, packed or held whole.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "workloads/packed_ops.h"

namespace gmb {
namespace {

Op make(Op::Kind kind, BufferId id, Bytes bytes, StreamId stream, std::uint64_t line, std::uint32_t slot = 0) {
  Op op;
  op.kind = kind;
  op.id = id;
  op.bytes = bytes;
  op.stream = stream;
  op.source_line = line;
  op.slot = slot;
  return op;
}

std::string text(const Op& op) {
  return fmt::format("{}:{}:{}:{}:{}:{}", static_cast<int>(op.kind), op.id, op.bytes, op.stream, op.source_line, op.slot);
}

TEST(PackedOps, GivesBackEveryOpAsGivenAtTheEdgesOfItsFields) {
  const std::vector<Op> ops = {
      make(Op::Kind::Alloc, 0, 512, 0, 1),
      make(Op::Kind::Free, 0, 0, 0, 2),
      make(Op::Kind::Compute, 7, 0, 3, 3),
      // the largest values that pack
      make(Op::Kind::Alloc, 0xffffffffu, (Bytes(1) << 48) - 1, (1 << 14) - 1, 0xffffffffu),
      // one past each field: held whole
      make(Op::Kind::Alloc, 1, Bytes(1) << 48, 0, 5),
      make(Op::Kind::Alloc, 2, 4096, 1 << 14, 6),
      make(Op::Kind::Free, std::uint64_t(1) << 32, 0, 0, 7),
      make(Op::Kind::Free, 3, 0, 0, std::uint64_t(1) << 32),
      make(Op::Kind::Alloc, 4, 4096, 0, 9, 12),
      make(Op::Kind::Alloc, 5, 4096, -1, 10),
      make(Op::Kind::Free, (std::uint64_t(1) << 63) | 4, 0, 2, 11),  // a converter's tagged id
      make(Op::Kind::Alloc, 6, ~Bytes(0), 0, 12),
      make(Op::Kind::Free, 6, 0, 0, 13),
  };
  PackedOps packed;
  for (const Op& op : ops) packed.push_back(op);
  ASSERT_EQ(packed.size(), ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(text(packed[i]), text(ops[i])) << "op " << i;
  EXPECT_EQ(text(packed.back()), text(ops.back()));
  std::size_t i = 0;
  for (const Op& op : packed) EXPECT_EQ(text(op), text(ops[i++])) << "iterating, op " << i - 1;
  EXPECT_EQ(i, ops.size());
  std::vector<Op> out = {ops[0]};
  packed.append_to(out, 3, 5);
  ASSERT_EQ(out.size(), 6u);
  for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(text(out[1 + j]), text(ops[3 + j])) << "appended op " << j;
}

// A reader appends chunk after chunk to one vector (read_trace, reduce's input): the vector
// grows by doubling, not by exactly the chunk at each call, which would copy it whole every time.
TEST(PackedOps, AppendingChunkAfterChunkGrowsTheVectorByDoubling) {
  PackedOps packed;
  for (std::uint64_t i = 0; i < 100000; ++i) packed.push_back(make(Op::Kind::Alloc, i % 7, 512, 0, i + 1));
  std::vector<Op> out;
  int reallocations = 0;
  for (std::size_t at = 0; at < packed.size(); at += 100) {
    const std::size_t before = out.capacity();
    packed.append_to(out, at, 100);
    reallocations += out.capacity() != before;
  }
  ASSERT_EQ(out.size(), 100000u);
  EXPECT_EQ(out[99999].source_line, 100000u);
  EXPECT_LE(reallocations, 12) << "1,000 chunks of 100 ops";
}

TEST(PackedOps, HoldsAnOpInSixteenBytes) {
  PackedOps packed;
  packed.reserve(1000);
  for (std::uint64_t i = 0; i < 1000; ++i) packed.push_back(make(Op::Kind::Alloc, i, 512 * i, 1, i + 1));
  EXPECT_EQ(packed.bytes(), 16000u);
  packed.push_back(make(Op::Kind::Alloc, 0, Bytes(1) << 50, 0, 1));
  EXPECT_EQ(packed[1000].bytes, Bytes(1) << 50);
}

}  // namespace
}  // namespace gmb
