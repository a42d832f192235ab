// The pickle reader and writer (workloads/pickle/): every plain value type in protocols 0 to 5
// as Python writes them (tests/data/torch_snapshots/synthetic/values_p*.pickle, from
// scripts/make_test_snapshots.py), the opcodes it refuses, and the writer read back.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "test_helpers.h"
#include "workloads/pickle/pickle_reader.h"
#include "workloads/pickle/pickle_writer.h"

namespace gmb {
namespace {

using pickle::Document;
using pickle::Ref;
using pickle::Type;

std::string synthetic(const std::string& name) {
  std::ifstream in(testing::source_path("tests/data/torch_snapshots/synthetic/" + name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string error_of(std::string_view bytes) {
  try {
    pickle::parse(bytes, "x.pickle");
  } catch (const pickle::PickleError& e) {
    return e.what();
  }
  return "no error";
}

class PickleValues : public ::testing::TestWithParam<int> {};

TEST_P(PickleValues, ReadsEveryPlainTypeAsPythonWroteIt) {
  const int protocol = GetParam();
  std::string bytes = synthetic(fmt::format("values_p{}.pickle", protocol));
  ASSERT_FALSE(bytes.empty());
  Document d = pickle::parse(bytes, "values.pickle");
  Ref root = d.root();
  ASSERT_EQ(d.type(root), Type::Dict);

  Ref ints = d.get(root, "ints");
  ASSERT_EQ(d.type(ints), Type::List);
  const std::vector<std::int64_t> want = {0, 1, 255, 256, 65535, 65536, -1, -256, INT32_MAX, INT32_MIN,
                                          std::int64_t(1) << 31, std::int64_t(1) << 32, INT64_MAX, INT64_MIN};
  ASSERT_EQ(d.size(ints), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(d.type(d.items(ints)[i]), Type::Int) << i;
    EXPECT_EQ(d.as_int(d.items(ints)[i]), want[i]) << i;
  }
  Ref big = d.get(root, "big");
  for (Ref r : d.items(big)) EXPECT_EQ(d.type(r), Type::BigInt);
  // 2**63 as little-endian two's complement: 00 .. 00 80 00.
  EXPECT_EQ(d.as_bytes(d.items(big)[0]), std::string("\0\0\0\0\0\0\0\x80\0", 9));

  Ref floats = d.get(root, "floats");
  ASSERT_EQ(d.size(floats), 4u);
  EXPECT_EQ(d.as_float(d.items(floats)[1]), 1.5);
  EXPECT_EQ(d.as_float(d.items(floats)[2]), -2.25);
  EXPECT_EQ(d.as_float(d.items(floats)[3]), 1e300);

  Ref strs = d.get(root, "strs");
  ASSERT_EQ(d.size(strs), 5u);
  EXPECT_EQ(d.as_bytes(d.items(strs)[0]), "");
  EXPECT_EQ(d.as_bytes(d.items(strs)[2]), "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80");
  EXPECT_EQ(d.as_bytes(d.items(strs)[3]), "back\\slash\nnewline");
  EXPECT_EQ(d.as_bytes(d.items(strs)[4]), std::string(300, 'x'));
  if (protocol >= 3) {
    EXPECT_EQ(d.as_bytes(d.get(root, "bytes")), std::string("\0\x01\xff", 3));
  }

  Ref consts = d.get(root, "consts");
  EXPECT_EQ(d.type(d.items(consts)[0]), Type::Bool);
  EXPECT_EQ(d.as_int(d.items(consts)[0]), 1);
  EXPECT_EQ(d.as_int(d.items(consts)[1]), 0);
  EXPECT_EQ(d.type(d.items(consts)[2]), Type::None);

  EXPECT_EQ(d.size(d.get(root, "tuple0")), 0u);
  EXPECT_EQ(d.size(d.get(root, "tuple1")), 1u);
  EXPECT_EQ(d.size(d.get(root, "tuple3")), 3u);
  EXPECT_EQ(d.size(d.get(root, "tuple4")), 4u);
  EXPECT_EQ(d.type(d.get(root, "tuple4")), Type::Tuple);
  if (protocol >= 4) {
    EXPECT_EQ(d.type(d.get(root, "set")), Type::Set);
    EXPECT_EQ(d.as_int(d.items(d.get(root, "frozenset"))[0]), 8);
  }
  Ref nested = d.get(root, "nested");
  Ref inner = d.items(d.items(d.get(nested, "a"))[0])[1];  // the dict's value: (1, [2, {"c": None}])
  EXPECT_EQ(d.type(inner), Type::Tuple);
  EXPECT_EQ(d.type(d.get(d.items(d.items(inner)[1])[1], "c")), Type::None);
  // One shared list, referenced twice through the memo: one node.
  Ref shared = d.get(root, "shared");
  EXPECT_EQ(d.items(shared)[0], d.items(shared)[1]);
  // Lists and dicts longer than Python's 1000-item batches.
  Ref long_list = d.get(root, "long_list");
  ASSERT_EQ(d.size(long_list), 2500u);
  EXPECT_EQ(d.as_int(d.items(long_list)[2499]), 2499);
  Ref big_dict = d.get(root, "big_dict");
  ASSERT_EQ(d.size(big_dict), 1200u);
  EXPECT_EQ(d.as_int(d.get(big_dict, "1199")), 1199);
}

INSTANTIATE_TEST_SUITE_P(Protocols, PickleValues, ::testing::Range(0, 6));

// Ints 0 <= v < 2^30 are held in their Ref (no node); the ones around that edge, bools (which
// stay bools), a memoized small int read twice, and an int where a container is expected.
TEST(PickleReader, SmallIntsAndTheirEdgeReadBackExactly) {
  // [2^30 - 1, 2^30, LONG1 2^30 - 1, True, 0, -1, memo'd 7 twice]
  const std::string bytes("\x80\x02](J\xff\xff\xff\x3fJ\x00\x00\x00\x40\x8a\x04\xff\xff\xff\x3f\x88K\x00"
                          "J\xff\xff\xff\xffK\x07q\x01h\x01" "e.",
                          36);
  Document d = pickle::parse(bytes, "x.pickle");
  const Ref list = d.root();
  ASSERT_EQ(d.type(list), Type::List);
  const std::vector<std::int64_t> want = {(1 << 30) - 1, 1 << 30, (1 << 30) - 1, 1, 0, -1, 7, 7};
  ASSERT_EQ(d.size(list), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Ref r = d.items(list)[i];
    EXPECT_EQ(d.type(r), i == 3 ? Type::Bool : Type::Int) << i;
    ASSERT_TRUE(d.is_int(r)) << i;
    EXPECT_EQ(d.as_int(r), want[i]) << i;
    EXPECT_NE(r, Document::kAbsent) << i;
  }
  EXPECT_EQ(d.items(list)[6], d.items(list)[7]);  // one value, read twice from the memo
  // Only the list, 2^30, -1 and True are nodes.
  EXPECT_EQ(d.node_count(), 4u);
  EXPECT_EQ(error_of("K\x05K\x06" "a."), "x.pickle: byte 4: APPEND applies to a list, found a int");
  EXPECT_EQ(error_of("K\x05(K\x06K\x07u."), "x.pickle: byte 7: SETITEMS applies to a dict, found a int");
}

// Equal short strs written anew (not through the memo) may share one node; what each reads is
// its own text, a NUL inside included.
TEST(PickleReader, ShortStringsReadBackExactly) {
  // ['N/A', 'N/A', 'a', 'a\0', 'abcdefgh', 'abcdefghi', 'N/A']
  const std::string bytes(
      "\x80\x04](\x8c\x03N/A\x8c\x03N/A\x8c\x01" "a\x8c\x02" "a\x00\x8c\x08" "abcdefgh\x8c\x09" "abcdefghi"
      "\x8c\x03N/Ae.",
      49);
  Document d = pickle::parse(bytes, "x.pickle");
  const std::vector<std::string> want = {"N/A", "N/A", "a", std::string("a\0", 2), "abcdefgh", "abcdefghi", "N/A"};
  ASSERT_EQ(d.size(d.root()), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(d.type(d.items(d.root())[i]), Type::Str) << i;
    EXPECT_EQ(d.as_bytes(d.items(d.root())[i]), want[i]) << i;
  }
  EXPECT_EQ(d.items(d.root())[0], d.items(d.root())[6]);
  EXPECT_NE(d.items(d.root())[2], d.items(d.root())[3]);
}

TEST(PickleReader, RefusesOpcodesThatNamePythonCode) {
  // What Python writes for a set under protocol 2: GLOBAL '__builtin__ set' then REDUCE.
  std::string e = error_of(synthetic("refused_set_p2.pickle"));
  EXPECT_NE(e.find("x.pickle: byte 15: opcode GLOBAL ('c') is refused"), std::string::npos) << e;
  EXPECT_NE(error_of("\x80\x04\x93.").find("STACK_GLOBAL ('\\x93') is refused"), std::string::npos);
  EXPECT_NE(error_of("(NR.").find("REDUCE"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02}b.").find("BUILD"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02N\x81.").find("NEWOBJ"), std::string::npos);
  EXPECT_NE(error_of("Pabc\n.").find("PERSID"), std::string::npos);
  EXPECT_NE(error_of("(iabc\ndef\n.").find("INST"), std::string::npos);
  EXPECT_NE(error_of("(o.").find("OBJ"), std::string::npos);
}

TEST(PickleReader, NamesTheByteOffsetOfEveryError) {
  EXPECT_EQ(error_of("\x80\x04\xff"), "x.pickle: byte 2: unknown pickle opcode '\\xff' (not a pickle, or a corrupt one)");
  EXPECT_EQ(error_of("\x80\x09."), "x.pickle: byte 0: pickle protocol 9 (this reader knows protocols 0 to 5)");
  EXPECT_EQ(error_of("\x80\x04N"), "x.pickle: byte 3: the pickle ends before its STOP opcode (truncated file?)");
  // A str or bytes of its word's length: up to 64 MiB; past that refused before its bytes are read (a
  // small compressed file could otherwise make the reader hold gigabytes).
  EXPECT_EQ(error_of(std::string("X\x00\x00\x00\x04.", 6)),
            "x.pickle: byte 0: the opcode needs 67108864 more bytes but only 1 are left (truncated file?)");
  EXPECT_EQ(error_of(std::string("X\x01\x00\x00\x04.", 6)),
            "x.pickle: byte 0: a str of 67108865 bytes: more than the 64 MiB this reader takes for one (a snapshot's "
            "strs are file names, function names and short notes)");
  EXPECT_EQ(error_of("\x8d\xff\xff\xff\xff\xff\xff\xff\xff."),
            "x.pickle: byte 0: a str of 18446744073709551615 bytes: more than the 64 MiB this reader takes for one (a "
            "snapshot's strs are file names, function names and short notes)");
  EXPECT_EQ(error_of(std::string("\x8e\x00\x00\x00\x10\x00\x00\x00\x00.", 10)),
            "x.pickle: byte 0: a bytes of 268435456 bytes: more than the 64 MiB this reader takes for one (a "
            "snapshot's strs are file names, function names and short notes)");
  EXPECT_EQ(error_of("h\x05."), "x.pickle: byte 0: memo index 5 was never stored");
  EXPECT_EQ(error_of("NNa."), "x.pickle: byte 2: APPEND applies to a list, found a NoneType");
  EXPECT_EQ(error_of("e."), "x.pickle: byte 0: the opcode needs a MARK but there is none");
  EXPECT_EQ(error_of("NN."), "x.pickle: byte 2: STOP with 2 values and 0 marks on the stack (expected one value)");
  EXPECT_EQ(error_of("N.junk"), "x.pickle: byte 2: 4 bytes after the pickle's STOP opcode: 'junk'");
  EXPECT_EQ(error_of(std::string("\x95\x10\0\0\0\0\0\0\0N.", 11)),
            "x.pickle: byte 0: FRAME of 16 bytes but only 2 are left (truncated file?)");
}

TEST(PickleWriter, WritesWhatTheReaderReadsBack) {
  std::string out;
  pickle::Writer w(out);
  w.begin_dict();
  w.key("n");
  w.integer(-5);
  w.key("big");
  w.integer(INT64_MIN);
  w.key("u");
  w.uinteger(UINT64_MAX);
  w.key("f");
  w.real(0.25);
  w.key("list");
  w.begin_list();
  for (int i = 0; i < 2500; ++i) w.integer(i * 70000);
  w.end_list();
  w.key("t");
  w.begin_tuple();
  w.boolean(true);
  w.none();
  w.str("n");  // a repeated string: fetched from the memo
  w.end_tuple();
  w.end_dict();
  w.finish();
  Document d = pickle::parse(out, "w.pickle");
  Ref root = d.root();
  EXPECT_EQ(d.as_int(d.get(root, "n")), -5);
  EXPECT_EQ(d.as_int(d.get(root, "big")), INT64_MIN);
  EXPECT_EQ(d.type(d.get(root, "u")), Type::BigInt);
  EXPECT_EQ(d.as_float(d.get(root, "f")), 0.25);
  Ref list = d.get(root, "list");
  ASSERT_EQ(d.size(list), 2500u);
  EXPECT_EQ(d.as_int(d.items(list)[2499]), 2499 * 70000);
  Ref t = d.get(root, "t");
  ASSERT_EQ(d.size(t), 3u);
  EXPECT_EQ(d.as_bytes(d.items(t)[2]), "n");
}

// Python's unpickler fails on a str's byte that is no UTF-8 (lone surrogates it passes), and one
// would make the whole file unloadable: the writer puts U+FFFD in its place; well-formed text and
// surrogates stay as they are.
TEST(PickleWriter, WritesTextThatIsNoUtf8WithUFFFDSoPythonLoadsIt) {
  std::string out;
  pickle::Writer w(out);
  w.begin_list();
  w.str("tr\xffin.py");
  w.str("modèle.py");
  w.str("tr\xed\xb3\xbfin.py");  // 'tr\udcffin.py', as Python's pickler writes it
  w.str("tr\xffin.py");           // the memo's copy: U+FFFD too
  w.end_list();
  w.finish();
  EXPECT_EQ(out.find('\xff'), std::string::npos);
  Document d = pickle::parse(out, "w.pickle");
  ASSERT_EQ(d.size(d.root()), 4u);
  EXPECT_EQ(d.as_bytes(d.items(d.root())[0]), "tr\xef\xbf\xbd" "in.py");
  EXPECT_EQ(d.as_bytes(d.items(d.root())[1]), "modèle.py");
  EXPECT_EQ(d.as_bytes(d.items(d.root())[2]), "tr\xed\xb3\xbfin.py");
  EXPECT_EQ(d.as_bytes(d.items(d.root())[3]), "tr\xef\xbf\xbd" "in.py");
}

TEST(PickleReader, EscapesExcerpts) {
  EXPECT_EQ(pickle::escape_excerpt(std::string("ab\x01\n'\\", 6)), "ab\\x01\\x0a\\x27\\x5c");
  EXPECT_EQ(pickle::escape_excerpt(std::string(30, 'a'), 4), "aaaa...");
}

}  // namespace
}  // namespace gmb
