// Native CSV rows that do not match their header are errors naming file:line, never read
// silently: an extra field, a column named twice, a free that carries bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

void expect_trace_error(const std::string& csv, const std::string& needle) {
  auto dir = temp_dir("strict");
  write_text(dir / "t.csv", csv);
  auto r = run_gpumembench("replay --device sim --quiet --capacity 1GiB --allocator cuda_malloc --trace " +
                           (dir / "t.csv").string() + " --output " + (dir / "out").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

}  // namespace

TEST(TraceStrictness, RowsThatDoNotMatchTheHeaderAreErrors) {
  expect_trace_error("action,id,bytes,stream\nalloc,0,100,0\nalloc,1,100,0,7\n",
                     "t.csv:3: expected at most 4 fields (the header's), found 5");
  expect_trace_error("action,id,bytes\nalloc,0,100,0\n", "t.csv:2: expected at most 3 fields (the header's), found 4");
  expect_trace_error("action,id,bytes,id\nalloc,0,100,1\n", "t.csv:1: column 'id' is named twice in the header");
  expect_trace_error("action,id,bytes,stream\nalloc,0,100,0\nfree,0,100,0\n",
                     "t.csv:3: a free carries no bytes (found '100'): leave the bytes field empty");
  expect_trace_error("bytes,action,id\n100,alloc,0\n5, free ,0\n",
                     "t.csv:3: a free carries no bytes (found '5')");
}
