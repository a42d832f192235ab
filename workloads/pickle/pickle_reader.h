// A reader for pickles of plain data, protocols 0 to 5: what Python's pickle.dump writes for
// dicts, lists, tuples, sets, str, bytes, int, float, bool and None (PyTorch memory snapshots
// are such pickles). It builds values and nothing else: opcodes that name Python code or
// objects (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT, out-of-band
// buffers) are refused with a PickleError, as is any unknown opcode.
//
// Bounds: every length is checked against the bytes left before anything is allocated, and
// each opcode adds at most one node, so memory stays proportional to the input; the reader
// never recurses (a pickle can nest as deep as it likes without using the C++ stack).
#pragma once

#include <string>
#include <string_view>

#include "workloads/pickle/pickle_value.h"

namespace gmb::pickle {

// Parses one pickle (up to its STOP opcode; bytes after it are an error). `file` names the
// input in error messages.
Document parse(std::string_view data, const std::string& file);

}  // namespace gmb::pickle
