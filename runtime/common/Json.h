//===- Json.h - JSON string text, shared by the runtime and hpc-launch -*- C++ -*-===//
//
// The metrics files' JSON lines are written by hand (no JSON library in the
// runtime or the launcher); this is their one string escaper.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COMMON_JSON_H
#define HPC_COMMON_JSON_H

#include <cstdio>
#include <string>

namespace hpc {
namespace json {

/// `s` as a JSON string: quoted, with quotes, backslashes and control
/// characters escaped.
inline std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace json
} // namespace hpc

#endif // HPC_COMMON_JSON_H
