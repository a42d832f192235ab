// A malformed or unreadable trace. The message names the file and where in it: the line for
// text formats ("run.csv:12: ..."), the byte offset for binary ones and for whatever is found
// before the format is known ("run.pickle: byte 4096: ..."). The CLI turns it into exit 2.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace gmb {

struct TraceError : std::runtime_error {
  // "file:line: message" (line 0: the file as a whole, e.g. it cannot be opened).
  TraceError(const std::string& file, std::uint64_t line, const std::string& message);
  // "file: byte N: message".
  static TraceError at_byte(const std::string& file, std::uint64_t offset, const std::string& message);
  // "file: WHERE: message", WHERE a place inside structured content ("segments[3].blocks") or the
  // option that selected it ("--trace-device").
  static TraceError in_content(const std::string& file, const std::string& where, const std::string& message);

  std::string file;
  std::uint64_t line = 0;                  // 0 when the error is placed by byte offset
  std::optional<std::uint64_t> byte_offset;

 private:
  TraceError(const std::string& file, std::uint64_t offset, const std::string& message, bool);
  TraceError(const std::string& file, const std::string& where, const std::string& message);
};

}  // namespace gmb
