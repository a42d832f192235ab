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

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/pickle/pickle_value.h"

namespace gmb::pickle {

// Parses one pickle (up to its STOP opcode; bytes after it are an error). `file` names the
// input in error messages.
Document parse(std::string_view data, const std::string& file);

// Takes the items of lists it chooses as the parser meets them, instead of the Document keeping
// them: a snapshot's trace of a million entries is converted batch by batch, and the nodes of
// each batch (the entry dicts, their ints and strs) are dropped once it is taken, so the tree
// never holds the trace. The list stays in the Document, empty.
class ListSink {
 public:
  virtual ~ListSink() = default;
  // An empty list about to receive its first items: stack[p] is the list, stack[0, size) the
  // parser's value stack and marks[0, n_marks) its marks (stack sizes, ascending). True: this
  // list's items go to take() from now on, in order. Asked again at the list's next append
  // while it stays empty.
  virtual bool claim(const Document& doc, const Ref* stack, std::size_t size, std::size_t p,
                     const std::size_t* marks, std::size_t n_marks) = 0;
  // Items appended to a claimed list, in order. Nodes they refer to live until nodes_dropped().
  // Every container whose items it looked at goes into `read`: a later change to one of them
  // (an append through the memo) restarts the parse without the sink.
  virtual void take(const Document& doc, Ref list, const Ref* items, std::size_t n, std::vector<Ref>& read) = 0;
  // The nodes from `floor` on were dropped, after a take(): the memoized strs and numbers among
  // them live on under new numbers from `floor` on. Forget whatever was kept by node number.
  virtual void nodes_dropped(Ref floor) = 0;
  // True: a later batch of a claimed list whose items are all dicts of str keys (fetched from
  // the memo) and values that are no containers, or lists of such dicts (a trace entry's
  // frames), as Python writes a snapshot's trace entries, is read without making the entries'
  // dicts, their marks or their items, and handed to take_flat(). The lists of dicts are made
  // as nodes, as the general read makes them.
  virtual bool takes_flat() const { return false; }
  // n such dicts: dict j's keys and values interleaved in kv[ends[j - 1], ends[j]) (from 0 for
  // the first). The same entries, in the same order, as take() would have been given; `read`
  // as take()'s (the lists of dicts looked into).
  virtual void take_flat(const Document& doc, Ref list, const Ref* kv, const std::uint32_t* ends, std::size_t n,
                         std::vector<Ref>& read) {
    (void)doc, (void)list, (void)kv, (void)ends, (void)n, (void)read;
  }
};

// Thrown by parse() with a sink when the pickle refers back to something the sink took (a trace
// entry memoized and used again, a claimed list referenced twice): such a pickle is parsed
// again without a sink. Python's pickler never writes one for a snapshot.
struct SinkRestart {};

// parse() with a sink (nullptr: the plain parse). Throws SinkRestart as above.
Document parse(std::string_view data, const std::string& file, ListSink* sink);

// Bytes that arrive while the parse runs, into one buffer that never moves (read and inflated
// on another thread: workloads/content_feed.h).
class ArrivingBytes {
 public:
  virtual ~ArrivingBytes() = default;
  virtual const char* data() const = 0;
  // Blocks until at least n bytes have arrived, or all there will be; returns how many have.
  virtual std::size_t wait_for(std::size_t n) = 0;
  // The length the content is expected to have (for sizing; 0: not known).
  virtual std::size_t expected_size() const = 0;
  // The parser reads no byte before `offset` again: their memory may serve bytes to come.
  virtual void release(std::size_t offset) { (void)offset; }
};

// parse() of bytes as they arrive: the same Document, or the same error, as parse() of all of
// them at once (a check that needs a byte not yet there waits for it, or for the end).
Document parse(ArrivingBytes& data, const std::string& file, ListSink* sink);

}  // namespace gmb::pickle
