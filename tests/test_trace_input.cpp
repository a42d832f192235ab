// Trace input: the format is detected from the content (plain or gzip), the byte layer streams,
// and bad input is an error that names the file and the line or byte offset, never raw bytes.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "gzip_text.h"
#include "test_helpers.h"
#include "workloads/trace.h"
#include "workloads/trace_source.h"

namespace gmb {
namespace {

namespace fs = std::filesystem;
using testing::run_gpumembench;
using testing::temp_dir;
using testing::write_text;

using testing::gzip_of;

std::vector<Op> read_all(const std::string& path, TraceMeta* meta = nullptr) {
  auto src = open_trace(path);
  std::vector<Op> ops;
  while (src->read(ops, 3) > 0) {
  }
  if (meta) *meta = src->meta();
  return ops;
}

std::string error_of(const std::string& path) {
  try {
    read_all(path);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kNative = "# a comment\naction,id,bytes,stream\nalloc,0,100,0\nalloc,5,200,1\n\nfree,0,,0\nfree,5,,1\n";

TEST(TraceInput, GzipAndPlainGiveTheSameOpsWhateverTheFileIsCalled) {
  auto dir = temp_dir("trace_in");
  write_text(dir / "plain.bin", kNative);
  write_text(dir / "packed.csv", gzip_of(kNative));
  TraceMeta plain_meta, gz_meta;
  auto plain = read_all((dir / "plain.bin").string(), &plain_meta);
  auto packed = read_all((dir / "packed.csv").string(), &gz_meta);
  EXPECT_EQ(plain_meta.format, "native_csv");
  EXPECT_EQ(gz_meta.format, "native_csv");
  EXPECT_FALSE(plain_meta.gzip);
  EXPECT_TRUE(gz_meta.gzip);
  ASSERT_EQ(plain.size(), 4u);
  ASSERT_EQ(packed.size(), 4u);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].kind, packed[i].kind);
    EXPECT_EQ(plain[i].id, packed[i].id);
    EXPECT_EQ(plain[i].bytes, packed[i].bytes);
    EXPECT_EQ(plain[i].stream, packed[i].stream);
    EXPECT_EQ(plain[i].source_line, packed[i].source_line);
  }
  EXPECT_EQ(plain[1].id, 5u);
  EXPECT_EQ(plain[1].stream, 1);
  EXPECT_EQ(plain[2].source_line, 6u);  // the blank line and the comment count
  fs::remove_all(dir);
}

TEST(TraceInput, PlainAndUnusualLinesOfTheNativeCsvReadAlike) {
  // Plain lines take the reader's one-pass path, the others (blanks, CRLF, 20-digit ids, a free
  // with a blank bytes field, an empty stream) the general one: the same ops either way.
  auto dir = temp_dir("trace_in");
  write_text(dir / "t.csv",
             "action,id,bytes,stream\nalloc,1,100,0\nalloc, 2 ,200,1\r\nfree,1, ,0\n"
             "alloc,18446744073709551614,5,3\nalloc,4,8,\nfree,2,,1\nalloc,12345678901234567890,9,65535\n");
  auto ops = read_all((dir / "t.csv").string());
  ASSERT_EQ(ops.size(), 7u);
  EXPECT_EQ(ops[1].id, 2u);
  EXPECT_EQ(ops[1].bytes, 200u);
  EXPECT_EQ(ops[1].stream, 1);
  EXPECT_EQ(ops[2].kind, Op::Kind::Free);
  EXPECT_EQ(ops[2].id, 1u);
  EXPECT_EQ(ops[3].id, 18446744073709551614ull);
  EXPECT_EQ(ops[3].stream, 3);
  EXPECT_EQ(ops[4].stream, 0);
  EXPECT_EQ(ops[6].id, 12345678901234567890ull);
  EXPECT_EQ(ops[6].stream, 65535);
  for (std::size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(ops[i].source_line, i + 2);
  write_text(dir / "u.csv", "action,id,bytes,stream\nalloc,1,100,0\nalloc,1,100,0\n");
  EXPECT_NE(error_of((dir / "u.csv").string()).find("u.csv:3: alloc of id 1 which is already allocated"),
            std::string::npos);
  write_text(dir / "s.csv", "action,id,bytes,stream\nalloc,1,100,65536\n");
  EXPECT_NE(error_of((dir / "s.csv").string()).find("s.csv:2: stream '65536' is not a stream id (valid: 0 to 65535)"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TraceInput, NativeCsvNumbersOfEveryLengthReadExactly) {
  // Lines with ids, sizes and streams of 1 to 20 digits (leading zeros too), long enough that
  // the reader's eight-bytes-at-a-time path sees them, in the middle of a file: each op as
  // written, whichever path read it.
  auto dir = temp_dir("trace_in");
  std::string text = "action,id,bytes,stream\n";
  std::vector<Op> want;
  std::uint64_t x = 7;
  auto digits = [&](int n) {
    std::string d;
    for (int i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      d += static_cast<char>('0' + (x >> 33) % 10);
    }
    if (n == 20) d[0] = '1', d[1] = '0';  // below 2^64
    return d;
  };
  for (int round = 0; round < 3; ++round)
    for (int n = 1; n <= 20; ++n) {
      const std::string id = digits(n), bytes = digits(21 - n);
      std::string stream = digits(1 + (n % 6));
      // Stream ids are 0 to 65535: leading digits become zeros (the length stays) until it is one.
      while (std::stoull(stream) > 65535) stream[stream.find_first_not_of('0')] = '0';
      Op a;
      a.kind = Op::Kind::Alloc;
      a.id = std::stoull(id);
      a.bytes = std::stoull(bytes);
      a.stream = static_cast<StreamId>(std::stoull(stream));
      if (std::any_of(want.begin(), want.end(), [&](const Op& o) { return o.id == a.id; })) continue;
      text += "alloc," + id + "," + bytes + "," + stream + "\n";
      want.push_back(a);
      if (n % 3 == 0) {
        Op f = a;
        f.kind = Op::Kind::Free;
        f.bytes = 0;
        f.stream = n % 2 ? 0 : a.stream;
        text += "free," + id + ",," + (n % 2 ? std::string() : stream) + "\n";
        want.push_back(f);
      }
    }
  text += "alloc,9,9,0\n" + std::string(100, '#') + "\n";
  write_text(dir / "n.csv", text);
  const auto ops = read_all((dir / "n.csv").string());
  ASSERT_EQ(ops.size(), want.size() + 1);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(ops[i].kind, want[i].kind) << i;
    EXPECT_EQ(ops[i].id, want[i].id) << i;
    EXPECT_EQ(ops[i].bytes, want[i].bytes) << i;
    EXPECT_EQ(ops[i].stream, want[i].stream) << i;
    EXPECT_EQ(ops[i].source_line, i + 2) << i;
  }
  // The reader gives each live buffer a slot (Op::slot): never 0 for an alloc, never one another
  // live buffer holds, and a free carries its buffer's slot.
  std::map<std::uint32_t, BufferId> slot_owner;
  std::map<BufferId, std::uint32_t> slot_of;
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Alloc) {
      ASSERT_NE(op.slot, 0u);
      ASSERT_EQ(slot_owner.count(op.slot), 0u);
      slot_owner[op.slot] = op.id;
      slot_of[op.id] = op.slot;
    } else {
      ASSERT_EQ(op.slot, slot_of.at(op.id));
      slot_owner.erase(op.slot);
      slot_of.erase(op.id);
    }
  }
  // Lines the fast path must leave to the general one, which names them.
  const std::string pad = "alloc,100,1,0\nalloc,101,1,0\nalloc,102,1,0\nalloc,103,1,0\nalloc,104,1,0\n";
  const std::string after = "\nalloc,200,1,0\nalloc,201,1,0\nalloc,202,1,0\nalloc,203,1,0\nalloc,204,1,0\n";
  write_text(dir / "s.csv", "action,id,bytes,stream\n" + pad + "alloc,1,100,65536" + after);
  EXPECT_NE(error_of((dir / "s.csv").string()).find("s.csv:7: stream '65536' is not a stream id (valid: 0 to 65535)"), std::string::npos);
  write_text(dir / "f.csv", "action,id,bytes,stream\n" + pad + "free,100,64,0" + after);
  EXPECT_NE(error_of((dir / "f.csv").string()).find("f.csv:7: a free carries no bytes (found '64')"), std::string::npos);
  write_text(dir / "o.csv", "action,id,bytes,stream\n" + pad + "alloc,5,18446744073709551616,0" + after);
  EXPECT_NE(error_of((dir / "o.csv").string()).find("o.csv:7: bytes '18446744073709551616' is not a non-negative"),
            std::string::npos);
  write_text(dir / "x.csv", "action,id,bytes,stream\n" + pad + "alloc,5,12x,0" + after);
  EXPECT_NE(error_of((dir / "x.csv").string()).find("x.csv:7: bytes '12x' is not a non-negative"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TraceInput, AFreeRequestKeepsItsBufferLiveUntilItsFreeAndWritesBackAsItWasRead) {
  auto dir = testing::temp_dir("free_requested_csv");
  testing::write_text(dir / "r.csv", "action,id,bytes,stream\nalloc,3,8388608,0\nfree_requested,3,,0\nalloc,4,6291456,0\n"
                                     "free,3,,0\nfree,4,,0\n");
  const std::vector<Op> ops = read_all((dir / "r.csv").string());
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[1].kind, Op::Kind::FreeRequested);
  EXPECT_EQ(ops[1].slot, ops[0].slot) << "the buffer keeps its slot";
  EXPECT_NE(ops[2].slot, ops[0].slot) << "a slot of its own for the buffer allocated beside it";
  EXPECT_EQ(ops[3].kind, Op::Kind::Free);
  EXPECT_EQ(ops[3].slot, ops[0].slot);
  write_trace((dir / "w.csv").string(), ops);
  EXPECT_EQ(testing::read_text(dir / "w.csv"), "action,id,bytes,stream\nalloc,3,8388608,0\nfree_requested,3,,0\n"
                                                "alloc,4,6291456,0\nfree,3,,0\nfree,4,,0\n");
  // caching counts the buffer until the request (8 MiB), cuda_malloc until the free (14 MiB).
  auto r = testing::run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "r.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | 20.0 MiB | 8.0 MiB |"), std::string::npos) << r.out;
  r = testing::run_gpumembench("replay --device sim -q --allocator cuda_malloc --trace " + (dir / "r.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| cuda_malloc | 14.0 MiB (modeled) | 14.0 MiB |"), std::string::npos) << r.out;
  // Two 1 GiB buffers in 1.56 GiB, the first freed while another stream uses it. caching waits
  // for that stream before it gives up (as PyTorch does), takes the first back and serves the
  // second; ideal keeps the first until its free, and the OOM is a capacity one (the need keeps
  // a buffer until its free); reduce leaves the request out, says so, and keeps cuda_malloc's OOM.
  testing::write_text(dir / "t.csv", "action,id,bytes,stream\nalloc,1,1073741824,0\nfree_requested,1,,1\n"
                                     "alloc,2,1073741824,0\nfree,1,,1\nfree,2,,0\n");
  r = testing::run_gpumembench("replay --device sim --allocator caching --capacity 1600MiB --trace " +
                               (dir / "t.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | 1024.0 MiB | 1024.0 MiB | 0.0% | 2 | 1 |"), std::string::npos) << r.out;
  r = testing::run_gpumembench("replay --device sim --allocator ideal --capacity 1600MiB --trace " + (dir / "t.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| ideal | capacity | needs at least 2.00 GiB (short by 448.0 MiB) |"), std::string::npos) << r.out;
  r = testing::run_gpumembench("reduce --allocator cuda_malloc --capacity 1600MiB --trace " + (dir / "t.csv").string() +
                               " --output " + (dir / "red").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("1 free requests (frees that waited on another stream) left out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("capacity OOM at event 1 (1.00 GiB request) reduced from 4 events (2 up to the OOM) to 2"),
            std::string::npos)
      << r.out;
  // The same through a config's trace workload.
  testing::write_text(dir / "c.yaml", "name: c\nallocators: [cuda_malloc]\nworkloads:\n  - trace: {path: " +
                                          (dir / "t.csv").string() + "}\n");
  r = testing::run_gpumembench("reduce --allocator cuda_malloc --capacity 1600MiB --config " + (dir / "c.yaml").string() +
                               " --output " + (dir / "red2").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("capacity OOM at event 1 (1.00 GiB request) reduced from 4 events (2 up to the OOM) to 2"),
            std::string::npos)
      << r.out;
  // A request of a buffer not live, or one that carries bytes: exit 2 naming the line.
  testing::write_text(dir / "u.csv", "action,id,bytes\nalloc,1,512\nfree_requested,2,\n");
  EXPECT_NE(error_of((dir / "u.csv").string()).find("u.csv:3: free_requested of unknown id 2 (never allocated, or already freed)"),
            std::string::npos);
  testing::write_text(dir / "b.csv", "action,id,bytes\nalloc,1,512\nfree_requested,1,512\n");
  EXPECT_NE(error_of((dir / "b.csv").string()).find("b.csv:3: a free_requested carries no bytes (found '512')"),
            std::string::npos);
  testing::write_text(dir / "z.csv", "action,id,bytes\nalloc,1,512\nfree_request,1,\n");
  EXPECT_NE(error_of((dir / "z.csv").string())
                .find("unknown action 'free_request' (valid: alloc, free, free_requested, empty_cache)"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// The program's torch.cuda.empty_cache() in a native CSV (a snapshot's EmptyCache op, written out):
// caching returns its cached segment there, so the next request takes a new one.
TEST(TraceInput, AnEmptyCacheRowReturnsTheCacheAndWritesBackAsItWasRead) {
  auto dir = testing::temp_dir("empty_cache_csv");
  const std::string rows = "alloc,1,8388608,0\nfree,1,,0\nempty_cache,,,\nalloc,2,8388608,0\nfree,2,,0\n";
  testing::write_text(dir / "r.csv", "action,id,bytes,stream\n" + rows);
  const std::vector<Op> ops = read_all((dir / "r.csv").string());
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[2].kind, Op::Kind::EmptyCache);
  write_trace((dir / "w.csv").string(), ops);
  EXPECT_EQ(testing::read_text(dir / "w.csv"), "action,id,bytes,stream\n" + rows);
  // One 20 MiB segment for both requests without the call; with it, a cudaFree and a second one.
  auto r = testing::run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "r.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | 20.0 MiB | 8.0 MiB | 60.0% | 2 | 1 |"), std::string::npos) << r.out;
  testing::write_text(dir / "n.csv", "action,id,bytes,stream\nalloc,1,8388608,0\nfree,1,,0\nalloc,2,8388608,0\nfree,2,,0\n");
  r = testing::run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "n.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | 20.0 MiB | 8.0 MiB | 60.0% | 1 | 0 |"), std::string::npos) << r.out;
  // Any column order; no id and no bytes (exit 2 naming the line); a stream is checked.
  testing::write_text(dir / "o.csv", "stream,bytes,action,id\n0,512,alloc,1\n,,empty_cache,\n0,,free,1\n");
  EXPECT_EQ(read_all((dir / "o.csv").string())[1].kind, Op::Kind::EmptyCache);
  testing::write_text(dir / "i.csv", "action,id,bytes,stream\nempty_cache,3,,0\n");
  EXPECT_NE(error_of((dir / "i.csv").string()).find("i.csv:2: an empty_cache carries no id (found '3')"), std::string::npos);
  testing::write_text(dir / "b.csv", "action,id,bytes\nempty_cache,,512\n");
  EXPECT_NE(error_of((dir / "b.csv").string()).find("b.csv:2: an empty_cache carries no bytes (found '512')"),
            std::string::npos);
  testing::write_text(dir / "t3.csv", "action,id,bytes\nempty_cache,,\n");  // no stream column: two commas
  EXPECT_EQ(read_all((dir / "t3.csv").string())[0].kind, Op::Kind::EmptyCache);
  testing::write_text(dir / "typo.csv", "action,id,bytes,stream\nemptycache,,,\n");  // the action is checked first
  EXPECT_NE(error_of((dir / "typo.csv").string())
                .find("typo.csv:2: unknown action 'emptycache' (valid: alloc, free, free_requested, empty_cache)"),
            std::string::npos);
  testing::write_text(dir / "s.csv", "action,id,bytes,stream\nempty_cache,,,70000\n");
  EXPECT_NE(error_of((dir / "s.csv").string()).find("s.csv:2: stream '70000' is not a stream id"), std::string::npos);
  // reduce replays allocations and frees only: it says it left the call out.
  testing::write_text(dir / "t.csv", "action,id,bytes,stream\nalloc,1,1073741824,0\nfree,1,,0\nempty_cache,,,\n"
                                     "alloc,2,3221225472,0\nfree,2,,0\n");
  r = testing::run_gpumembench("reduce --allocator caching --capacity 2100MiB --trace " + (dir / "t.csv").string() +
                               " --output " + (dir / "red").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("1 empty_cache calls of the program left out"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(TraceInput, ConcatenatedGzipMembersReadAsOneContent) {
  auto dir = temp_dir("trace_in");
  write_text(dir / "t.gz", gzip_of("action,id,bytes\nalloc,1,10\n") + gzip_of("free,1,\n"));
  auto ops = read_all((dir / "t.gz").string());
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[1].kind, Op::Kind::Free);
  fs::remove_all(dir);
}

TEST(TraceInput, TruncatedAndCorruptGzipNameTheFileAndOffset) {
  auto dir = temp_dir("trace_in");
  std::string big = "action,id,bytes\n";
  for (int i = 0; i < 20000; ++i) big += "alloc," + std::to_string(i) + ",4096\n";
  const std::string gz = gzip_of(big);
  write_text(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  std::string err = error_of((dir / "cut.gz").string());
  EXPECT_NE(err.find("cut.gz: byte "), std::string::npos) << err;
  EXPECT_NE(err.find("truncated gzip stream"), std::string::npos) << err;

  std::string bad = gz;
  for (std::size_t i = 40; i < 80; ++i) bad[i] = static_cast<char>(0xff);
  write_text(dir / "bad.gz", bad);
  err = error_of((dir / "bad.gz").string());
  EXPECT_NE(err.find("bad.gz: byte "), std::string::npos) << err;
  EXPECT_NE(err.find("corrupt gzip data"), std::string::npos) << err;
  EXPECT_NE(err.find("compressed byte "), std::string::npos) << err;

  // Through the CLI: found while replaying (past the start checked up front), exit 2, no table.
  auto r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "cut.gz").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cut.gz: byte "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated gzip stream"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("| allocator |"), std::string::npos) << r.out;
  r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "bad.gz").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("bad.gz: byte "), std::string::npos) << r.out;

  write_text(dir / "tail.gz", gzip_of(kNative) + "junk");
  err = error_of((dir / "tail.gz").string());
  EXPECT_NE(err.find("not another gzip member"), std::string::npos) << err;
  fs::remove_all(dir);
}

// One byte flipped in the middle of a gzip'd trace: the inflate gives garbage before it finds
// the damage, and the garbage is not the file's content. The damage is the error, with its
// compressed byte, for the native CSV and the RMM log alike (not "expected 4 fields").
TEST(TraceInput, DamageInTheGzipWinsOverTheGarbageInflatedBeforeIt) {
  auto dir = temp_dir("trace_flip");
  std::string native = "action,id,bytes,stream\n", rmm = "Thread,Time,Action,Pointer,Size,Stream\n";
  for (int i = 0; i < 100000; ++i) {
    native += fmt::format("alloc,{},4096,0\n", i);
    rmm += fmt::format("1,{}.5,allocate,{:#x},4096,0x0\n", i, 0x7f0000000000ull + 4096ull * i);
  }
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"n.csv.gz", native}, {"r.csv.gz", rmm}}) {
    SCOPED_TRACE(name);
    std::string gz = gzip_of(text);
    gz[gz.size() / 2] = static_cast<char>(gz[gz.size() / 2] ^ 0xff);
    write_text(dir / name, gz);
    const std::string err = error_of((dir / name).string());
    EXPECT_NE(err.find(name + ": byte "), std::string::npos) << err;
    EXPECT_NE(err.find("corrupt gzip data"), std::string::npos) << err;
    EXPECT_NE(err.find("(compressed byte "), std::string::npos) << err;
    EXPECT_EQ(err.find("fields"), std::string::npos) << err;
  }
  fs::remove_all(dir);
}

// RFC 1952: a member whose FLG has a reserved bit set must be refused, the first member or a
// later one (ISA-L reads past it; zlib names it).
TEST(TraceInput, AReservedFlagBitInAGzipHeaderIsRefused) {
  auto dir = temp_dir("trace_flg");
  std::string first = gzip_of(kNative);
  first[3] = static_cast<char>(first[3] | 0xe0);
  write_text(dir / "a.gz", first);
  std::string err = error_of((dir / "a.gz").string());
  EXPECT_NE(err.find("a.gz: byte 0: corrupt gzip data (unknown header flags set)"), std::string::npos) << err;
  std::string second = gzip_of("free,0,,0\n");
  second[3] = static_cast<char>(second[3] | 0x20);
  write_text(dir / "b.gz", gzip_of(kNative) + second);
  err = error_of((dir / "b.gz").string());
  EXPECT_NE(err.find("b.gz: byte "), std::string::npos) << err;
  EXPECT_NE(err.find("unknown header flags set"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(TraceInput, UnknownContentIsNamedWithTheRecognisedFormatsAndAnEscapedExcerpt) {
  auto dir = temp_dir("trace_in");
  write_text(dir / "pic.png", std::string("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x1b[31m", 21));
  std::string err = error_of((dir / "pic.png").string());
  EXPECT_NE(err.find("pic.png: byte 0: not a trace in a recognised format"), std::string::npos) << err;
  EXPECT_NE(err.find("\\x89PNG\\r\\n\\x1a\\n\\x00"), std::string::npos) << err;
  EXPECT_NE(err.find("\\x1b[31m"), std::string::npos) << err;
  EXPECT_NE(err.find("native_csv"), std::string::npos) << err;
  EXPECT_NE(err.find("pytorch_snapshot"), std::string::npos) << err;
  for (char c : err) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "raw byte " << int(static_cast<unsigned char>(c));

  write_text(dir / "notes.txt", "\n# header follows\nhello,world\n");
  err = error_of((dir / "notes.txt").string());
  EXPECT_NE(err.find("notes.txt:3: not a trace in a recognised format: the first line \"hello,world\""),
            std::string::npos)
      << err;
  fs::remove_all(dir);
}

TEST(TraceInput, BinaryGarbageThroughTheCliExitsTwoWithTheOffsetAndNoRawBytes) {
  auto dir = temp_dir("trace_in");
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 37 + 11) & 0xff);
  junk[0] = 0x07;  // not a pickle's first byte
  write_text(dir / "junk.bin", junk);
  auto r = run_gpumembench("replay --device sim --trace " + (dir / "junk.bin").string() + " --allocator caching");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("junk.bin: byte 0: not a trace in a recognised format"), std::string::npos) << r.out;
  for (char c : r.out) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "raw byte in: " << r.out;

  write_text(dir / "junk.gz", gzip_of(junk));
  r = run_gpumembench("replay --device sim --trace " + (dir / "junk.gz").string() + " --allocator caching");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("junk.gz: byte 0: not a trace in a recognised format: gzip-compressed binary"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

TEST(TraceInput, ByteInputReadsExactlyAndNamesTheOffsetWhereTheContentEnds) {
  auto dir = temp_dir("trace_in");
  write_text(dir / "b.gz", gzip_of("abcdef"));
  auto in = ByteInput::open((dir / "b.gz").string());
  EXPECT_TRUE(in->gzip());
  char buf[4];
  in->read_exact(buf, 4, "a frame");
  EXPECT_EQ(std::string(buf, 4), "abcd");
  EXPECT_EQ(in->offset(), 4u);
  EXPECT_EQ(in->read_u8("an opcode"), 'e');
  try {
    in->read_exact(buf, 4, "an 8-byte length");
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.byte_offset, 5u);
    EXPECT_NE(std::string(e.what()).find("b.gz: byte 5: truncated"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("an 8-byte length"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// A regular file streams through ISA-L where it is installed, a pipe through zlib (it cannot be
// read again to name damage): both give the same content for every layout of members, and the
// same error, at the same offsets, for damage anywhere, however late (zlib reads the file again
// and names what ISA-L only found wrong).
TEST(TraceInput, AFileAndAPipeStreamTheSameContentAndTheSameErrors) {
  const fs::path dir = testing::temp_dir("file_and_pipe");
  std::string text;
  for (int i = 0; text.size() < (std::size_t(3) << 20); ++i) text += fmt::format("alloc,{},{},{}\n", i, 4096 * (i % 97), i % 3);
  auto stream = [&](const std::string& bytes, bool pipe) {
    const fs::path path = dir / (pipe ? "p.gz" : "f.gz");
    std::thread writer;
    std::atomic<bool> reader_done{false};
    if (pipe) {
      fs::remove(path);
      EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
      // Opened for reading and writing (that never blocks): the reader, opened next, finds a
      // writer. Written without blocking, so that a reader that stops early ends the writer.
      const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK);
      EXPECT_GE(fd, 0);
      writer = std::thread([&bytes, &reader_done, fd] {
        for (std::size_t at = 0; at < bytes.size() && !reader_done;) {
          const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
          if (n > 0) at += static_cast<std::size_t>(n);
          else std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ::close(fd);
      });
    } else {
      write_text(path, bytes);
    }
    std::string got;
    try {
      auto in = ByteInput::open(path.string());
      EXPECT_EQ(in->pipe(), pipe);
      while (!in->at_end()) {
        got += in->buffered();
        in->consume(in->buffered().size());
      }
    } catch (const TraceError& e) {
      // What came before the error is the content's start (zlib skipped what ISA-L gave).
      const bool prefix = got.size() <= text.size() && text.compare(0, got.size(), got) == 0;
      got = fmt::format("error: {} (the content before it {} the content's start)", e.what(), prefix ? "is" : "is NOT");
      const std::size_t name = got.find(pipe ? "p.gz" : "f.gz");
      if (name != std::string::npos) got.replace(name, 4, "X.gz");
    }
    reader_done = true;
    if (writer.joinable()) writer.join();
    return got;
  };
  const std::string a = gzip_of(text.substr(0, 1000)), b = gzip_of(text.substr(1000, 2'000'000)),
                    c = gzip_of(text.substr(2'001'000)), empty = gzip_of("");
  const std::map<std::string, std::string> layouts = {
      {"one member", gzip_of(text)},
      {"three members", a + b + c},
      {"an empty member between", a + empty + b + c},
      {"stored blocks", gzip_of(text, 0)},
  };
  for (const auto& [name, gz] : layouts) {
    EXPECT_EQ(stream(gz, false), text) << name;
    EXPECT_EQ(stream(gz, true), text) << name;
  }
  const std::string whole = a + b + c;
  std::map<std::string, std::string> damaged = {
      {"cut in the last member", whole.substr(0, whole.size() - 5000)},
      {"cut in a trailer", whole.substr(0, a.size() + b.size() - 3)},
      {"junk after the last member", whole + "junk"},
  };
  std::string crc = whole;
  crc[a.size() + b.size() - 6] ^= 1;  // the second member's CRC, 2 MB into the content
  damaged["a CRC"] = crc;
  std::string body = whole;
  body[a.size() + b.size() / 2] ^= 0x55;  // inside the second member's deflate data
  damaged["deflate data"] = body;
  for (const auto& [name, gz] : damaged) {
    const std::string from_file = stream(gz, false);
    EXPECT_EQ(from_file.rfind("error: ", 0), 0u) << name << ": " << from_file.substr(0, 200);
    EXPECT_NE(from_file.find("X.gz: byte "), std::string::npos) << name << ": " << from_file;
    EXPECT_NE(from_file.find("(compressed byte "), std::string::npos) << name << ": " << from_file;
    if (name != "deflate data") {  // (that damage changes the bytes inflated before the CRC finds it)
      EXPECT_NE(from_file.find("before it is the content's start"), std::string::npos) << name << ": " << from_file;
    }
    EXPECT_EQ(from_file, stream(gz, true)) << name;
  }
  fs::remove_all(dir);
}

// read_rest (what a snapshot is read with): the whole content, however the file is cut into
// gzip members and whatever their length fields say, after what was consumed; damage and too
// much content are errors with the offset, as when the stream is read block by block.
TEST(TraceInput, ReadRestGivesTheWholeContentOfEveryGzipLayout) {
  auto dir = temp_dir("trace_in");
  std::string text;
  for (std::uint64_t i = 0; text.size() < (3u << 20); ++i) text += "line " + std::to_string(i * 7919 % 100003) + "\n";
  const std::string a = text.substr(0, 1000), b = text.substr(1000, 2u << 20), c = text.substr(1000 + (2u << 20));
  auto rest_of = [&](const std::string& name, const std::string& bytes, std::size_t consumed = 0) {
    write_text(dir / name, bytes);
    auto in = ByteInput::open((dir / name).string());
    if (consumed) {
      in->peek(consumed);
      in->consume(consumed);
    }
    const WholeContent whole = in->read_rest(std::uint64_t(1) << 30, "the content");
    std::string got(whole.data(), whole.size());
    EXPECT_EQ(in->offset(), text.size()) << name;
    EXPECT_TRUE(in->at_end()) << name;
    return got;
  };
  EXPECT_EQ(rest_of("one.gz", gzip_of(text)), text);
  EXPECT_EQ(rest_of("plain.txt", text), text);
  // Three members: the first member's length is not at the file's end; the last one's is short.
  EXPECT_EQ(rest_of("three.gz", gzip_of(a) + gzip_of(b) + gzip_of(c)), text);
  EXPECT_EQ(rest_of("small_last.gz", gzip_of(text.substr(0, text.size() - 10)) + gzip_of(text.substr(text.size() - 10))), text);
  // What was consumed before (a format's head) is not given again.
  EXPECT_EQ(rest_of("consumed.gz", gzip_of(text), 100), text.substr(100));
  EXPECT_EQ(rest_of("consumed.txt", text, 100), text.substr(100));

  // Damage: named with its offsets, as the stream names it; more than the most read whole.
  auto error_reading = [&](const std::string& name, std::uint64_t max_bytes = std::uint64_t(1) << 30) {
    try {
      ByteInput::open((dir / name).string())->read_rest(max_bytes, "the content");
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string gz = gzip_of(text);
  write_text(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  std::string err = error_reading("cut.gz");
  EXPECT_NE(err.find("cut.gz: byte "), std::string::npos) << err;
  EXPECT_NE(err.find("truncated gzip stream"), std::string::npos) << err;
  std::string crc = gz;
  crc[crc.size() - 6] ^= 1;  // the CRC field
  write_text(dir / "crc.gz", crc);
  err = error_reading("crc.gz");
  EXPECT_NE(err.find("crc.gz: byte "), std::string::npos) << err;
  EXPECT_NE(err.find("corrupt gzip data (incorrect data check)"), std::string::npos) << err;
  std::string lie = gz;  // a length field that is not the content's: damage too (gzip checks it)
  lie[lie.size() - 3] ^= 0x7f;
  write_text(dir / "lie.gz", lie);
  err = error_reading("lie.gz");
  EXPECT_NE(err.find("corrupt gzip data (incorrect length check)"), std::string::npos) << err;
  // A small file whose length field claims 4 GiB: the same error, without room made for 4 GiB
  // (peak RSS, which only grows, stays within 256 MiB of what it was).
  std::string huge_claim = gzip_of(text.substr(0, 100000));
  for (int k = 1; k <= 4; ++k) huge_claim[huge_claim.size() - k] = '\xff';
  write_text(dir / "claim.gz", huge_claim);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  err = error_reading("claim.gz", std::uint64_t(16) << 30);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_NE(err.find("corrupt gzip data (incorrect length check)"), std::string::npos) << err;
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024) << "KiB of peak RSS more";
  for (const char* name : {"one.gz", "plain.txt", "three.gz"}) {
    err = error_reading(name, std::uint64_t(1) << 20);
    EXPECT_NE(err.find("the content is larger than 1 MiB (the most read whole)"), std::string::npos) << name << ": " << err;
  }
  fs::remove_all(dir);
}

// A member's CRC-32 and length are checked wherever its trailer falls, also across two reads of
// the compressed file (read 2 bytes, then 256 KiB at a time): a damaged field is named at the
// compressed byte where zlib's own check names it (after the CRC field, after the length
// field). A header's own CRC (FHCRC) is checked too.
TEST(TraceInput, GzipTrailersAreCheckedWhereverTheyFall) {
  const fs::path dir = testing::temp_dir("trailer");
  auto error_reading = [&](const std::string& bytes) {
    write_text(dir / "t.gz", bytes);
    try {
      const WholeContent whole = ByteInput::open((dir / "t.gz").string())->read_rest(std::uint64_t(1) << 30, "the content");
      return std::string(whole.data(), whole.size());
    } catch (const TraceError& e) {
      return std::string("error: ") + e.what();
    }
  };
  const std::size_t boundary = 2 + (std::size_t(1) << 18);
  std::string content;
  for (int i = 0; content.size() < boundary; ++i) content += fmt::format("alloc,{},{},0\n", i, 4096 + i);
  for (std::size_t trailer_at = boundary - 9; trailer_at <= boundary + 1; ++trailer_at) {
    // Stored blocks (level 0): the member grows byte for byte with the content.
    std::size_t n = trailer_at - 100;
    std::string gz = gzip_of(content.substr(0, n), 0);
    while (gz.size() - 8 != trailer_at) {
      n += trailer_at - (gz.size() - 8);
      gz = gzip_of(content.substr(0, n), 0);
    }
    EXPECT_EQ(error_reading(gz), content.substr(0, n)) << trailer_at;
    std::string crc = gz;
    crc[trailer_at + 2] ^= 1;
    EXPECT_NE(error_reading(crc).find(fmt::format("byte {}: corrupt gzip data (incorrect data check) (compressed byte {})",
                                                  n, trailer_at + 4)),
              std::string::npos)
        << trailer_at << ": " << error_reading(crc);
    std::string length = gz;
    length[trailer_at + 6] ^= 1;
    EXPECT_NE(error_reading(length).find(fmt::format("byte {}: corrupt gzip data (incorrect length check) (compressed byte {})",
                                                     n, trailer_at + 8)),
              std::string::npos)
        << trailer_at << ": " << error_reading(length);
  }
  // FHCRC: the header's flag bit 1, then the low 16 bits of the header's CRC-32. Read as a
  // stream (libdeflate, which reads a file whole, checks the data's CRC but not the header's).
  auto error_streaming = [&](const std::string& bytes) {
    write_text(dir / "t.gz", bytes);
    std::string got;
    try {
      auto in = ByteInput::open((dir / "t.gz").string());
      while (!in->at_end()) {
        got += in->buffered();
        in->consume(in->buffered().size());
      }
    } catch (const TraceError& e) {
      return std::string("error: ") + e.what();
    }
    return got;
  };
  std::string gz = gzip_of(content.substr(0, 5000));
  std::string header = gz.substr(0, 10);
  header[3] = static_cast<char>(header[3] | 2);
  const std::uint32_t hcrc = static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(header.data()), 10));
  std::string with_hcrc = header + static_cast<char>(hcrc & 0xff) + static_cast<char>((hcrc >> 8) & 0xff) + gz.substr(10);
  EXPECT_EQ(error_streaming(with_hcrc), content.substr(0, 5000));
  with_hcrc[10] ^= 1;
  EXPECT_NE(error_streaming(with_hcrc).find("byte 0: corrupt gzip data (header crc mismatch) (compressed byte 12)"),
            std::string::npos)
      << error_streaming(with_hcrc);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gmb
