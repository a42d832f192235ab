// JSON text for the files and lines the tool writes. A string from a user's input that is no
// UTF-8 (a pickle's str, a config's label) is written with U+FFFD in place of the bytes that are
// not: the file stays valid JSON, where nlohmann's default throws and the run would end in an
// internal error with half its outputs written.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gmb {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gmb
