// Writes plain data as a pickle, protocol 3 (Python 3.0 and later read it): dicts, lists,
// tuples, str, int, float, bool and None, nothing that names Python code. Values are written as
// they come (begin_dict ... end_dict), so a large export never sits in memory as a tree. Short
// strings that repeat (dict keys, action names) are written once and then fetched from the memo.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gmb::pickle {

class Writer {
 public:
  // Appends the pickle to `out` (the PROTO header now, STOP at finish()).
  explicit Writer(std::string& out);

  void begin_dict();   // then key, value, key, value...
  void end_dict();
  void begin_list();
  void end_list();
  void begin_tuple();
  void end_tuple();
  void str(std::string_view s);
  void integer(std::int64_t v);
  void uinteger(std::uint64_t v);  // beyond INT64_MAX it is written as a LONG1
  void real(double v);
  void boolean(bool v);
  void none();
  // Closes the pickle; every begin_* must have been ended.
  void finish();

  // key then value, for the common dict entries.
  void key(std::string_view k) { str(k); }

 private:
  void item_done();
  void op(unsigned char c) { out_ += static_cast<char>(c); }
  void le(std::uint64_t v, int n);

  enum class Level : std::uint8_t { Dict, List, Tuple };
  struct Open {
    Level level;
    std::uint32_t pending = 0;  // values since the last MARK (dicts and lists flush every 1000 items)
  };
  std::string& out_;
  std::vector<Open> open_;
  std::unordered_map<std::string, std::uint32_t> memo_;
};

}  // namespace gmb::pickle
