// Input quoted back in error messages: short and printable. In the lowest layer so that every
// layer (alloc_conf, config, trace readers) quotes what it was given the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gmb {

// At most max_bytes of `bytes` as printable ASCII: other bytes as \xNN, \n \r \t \\ \" escaped,
// "..." when cut. For error messages: never raw bytes to the terminal.
std::string escaped_excerpt(std::string_view bytes, std::size_t max_bytes = 40);

// Text from the user's files shown whole (a file name, a frame's function): well-formed UTF-8
// as it is (names stay readable), but for what a terminal acts on (C0 and C1 controls, DEL, the
// bidi controls); those, and bytes that are no UTF-8, as \xNN. Never a terminal's escape
// sequence in a table or a message.
std::string printable_text(std::string_view text);
// Text written for another program to read as UTF-8: well-formed UTF-8 as it is, each byte that
// starts no well-formed sequence (a stray byte, a truncated or overlong sequence, a surrogate) as
// U+FFFD. allow_surrogates keeps U+D800-DFFF encoded in three bytes: Python's pickle writes a
// str's lone surrogates so and reads them back ('surrogatepass'), and fails on anything else.
bool is_well_formed_utf8(std::string_view text, bool allow_surrogates = false);
std::string well_formed_utf8(std::string_view text, bool allow_surrogates = false);
// A message, which quotes such text, for the terminal: printable_text line by line (its own line
// breaks and tabs stay).
std::string printable_message(std::string_view message);

}  // namespace gmb
