// BlockSet: the caching allocator's ordered sets of blocks, a small B+tree.
//
// Iteration order is exactly that of PyTorch's std::set<Block*, Comparison>:
//   kBySize = true:  (stream, size, address)  -- BlockComparatorSize, the free blocks
//   kBySize = false: (stream, address)        -- BlockComparatorAddress, unmapped ranges
// Streams are ordered as unsigned numbers (the default stream 0 first).
//
// Why a B+tree: a set may hold thousands of blocks, and a binary tree walk is a chain of
// dependent loads with a hard-to-predict branch per level. Most sets are small, though (the
// size bins of free_block_set.h hold a few blocks each), so the leaf is what has to be fast.
// A leaf has 4 key slots followed by 4 more that always hold kNoKey (above every key): a leaf
// search compares all 4 slots without branching, and inserting or erasing moves a fixed 4
// entries with straight-line vector moves, whatever the number of keys. No loop there has a
// trip count for the branch predictor to guess, which is what sorted-array leaves otherwise
// pay for on every update. Inner nodes hold up to 16 children. Nodes come from free lists:
// inserting and erasing do not allocate once the set has reached its high-water mark.
// Deletion is lazy (nodes are removed when empty, never rebalanced), which keeps the code
// short; the depth only grows on splits. Many small sets can share one node pool
// (BlockSet(Nodes&)), as the size bins do.
// A block inserted into an empty set is held by the set itself (`one_`), no leaf touched, and
// moves into the tree when a second block comes. (The size bins do the same one level up, in a
// dense array of free_block_set.h, so that a bin's own header is not touched either: most bins
// hold no block or one.)
//
// Block must have the fields `StreamId stream; Bytes size; DevPtr ptr; void* tleaf;`. tleaf is
// the leaf holding the block, or the set itself for the block held in `one_` (nullptr while in
// no set); a block's key must not change while it is in a set. Keys are packed into one 128-bit
// number (stream << 112 | size units << 64 | address), so streams must lie in [0, 65535]. Sizes
// are in 512-byte units, rounded up: a block's size is a multiple of 512 (the allocator rounds
// every request to 512 bytes, and segments and pages are multiples of it), so its key is exact,
// and a lookup key of any size finds the first block not smaller. 48 bits of units cover sizes
// up to 2^57 bytes, far above the largest device (kMaxDeviceBytes, 2^50).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "devices/device.h"

namespace gmb::caching {

struct BlockKey {
  StreamId stream;
  Bytes size;
  DevPtr ptr;
};

template <class Block, bool kBySize>
class BlockSet {
  // Keys per leaf. 4, not 8: the size bins' trees hold a few blocks, and a leaf's insert or
  // erase moves and compares every slot (the first 1 M events of the 10 M-event CSV replay:
  // 7 instructions an event fewer than with 8; with 2, 0.8 more than with 4).
  static constexpr int kLeafCap = 4;
  static constexpr int kCap = 16;     // children per inner node

  using Key = unsigned __int128;
  static constexpr Key kNoKey = ~Key{0};  // above every block's key (sizes below 2^57)
  struct Inner;
  struct Leaf {
    int n = 0;
    alignas(16) Key k[2 * kLeafCap];  // k[n..] == kNoKey
    Block* blk[2 * kLeafCap];
    Leaf* prev = nullptr;
    Leaf* next = nullptr;
    Inner* parent = nullptr;
  };
  struct Inner {
    int n = 0;  // children
    bool leaves = false;
    Key k[kCap];  // separators: child i+1 holds keys >= separator i
    void* child[kCap + 1];
    Inner* parent = nullptr;
  };

 public:
  // Where nodes come from and go back to; one may serve many sets. Free nodes are chained
  // through a pointer they do not use while free (Leaf::next, Inner::parent).
  class Nodes {
   public:
    Leaf* new_leaf() {
      Leaf* l = free_leaves_;
      if (l) {
        free_leaves_ = l->next;
      } else {
        leaf_store_.emplace_back(new Leaf());
        l = leaf_store_.back().get();
        for (Key& k : l->k) k = kNoKey;  // and so it is again when the leaf is freed (empty)
        for (Block*& b : l->blk) b = nullptr;
      }
      l->n = 0;
      l->prev = l->next = nullptr;
      l->parent = nullptr;
      return l;
    }
    void free_leaf(Leaf* l) {
      l->next = free_leaves_;
      free_leaves_ = l;
    }
    Inner* new_inner() {
      Inner* in = free_inners_;
      if (in) {
        free_inners_ = in->parent;
      } else {
        inner_store_.emplace_back(new Inner());
        in = inner_store_.back().get();
      }
      in->n = 0;
      in->leaves = false;
      in->parent = nullptr;
      return in;
    }
    void free_inner(Inner* in) {
      in->parent = free_inners_;
      free_inners_ = in;
    }

   private:
    std::vector<std::unique_ptr<Leaf>> leaf_store_;
    std::vector<std::unique_ptr<Inner>> inner_store_;
    Leaf* free_leaves_ = nullptr;
    Inner* free_inners_ = nullptr;
  };

  BlockSet() : own_(new Nodes), nodes_(own_.get()) {}
  explicit BlockSet(Nodes& shared) : nodes_(&shared) {}
  BlockSet(const BlockSet&) = delete;
  BlockSet& operator=(const BlockSet&) = delete;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  Block* first() const { return one_ ? one_ : size_ ? head_->blk[0] : nullptr; }
  Block* last() const { return one_ ? one_ : size_ ? tail_->blk[tail_->n - 1] : nullptr; }

  Block* next(const Block* b) const {
    if (b == one_) return nullptr;
    const Leaf* l = static_cast<const Leaf*>(b->tleaf);
    const int i = index_in(l, b);
    if (i + 1 < l->n) return l->blk[i + 1];
    return l->next ? l->next->blk[0] : nullptr;
  }
  Block* prev(const Block* b) const {
    if (b == one_) return nullptr;
    const Leaf* l = static_cast<const Leaf*>(b->tleaf);
    const int i = index_in(l, b);
    if (i > 0) return l->blk[i - 1];
    return l->prev ? l->prev->blk[l->prev->n - 1] : nullptr;
  }

  // First block not less than key (nullptr: none).
  [[gnu::always_inline]] Block* lower_bound(const BlockKey& key) const {
    if (!size_) return nullptr;
    const Key k = make_key(key.stream, key.size, key.ptr);
    if (one_) return key_of(one_) >= k ? one_ : nullptr;
    if (head_->k[0] >= k) return head_->blk[0];  // often so: a best-fit search starts at address 0
    const Leaf* l = descend(k);
    const int i = count_less(l->k, k);
    if (i < l->n) return l->blk[i];
    return l->next ? l->next->blk[0] : nullptr;
  }

  [[gnu::always_inline]] void insert(Block* b) {
    if (size_++ == 0) {  // into an empty set: held by the set, no leaf touched
      one_ = b;
      b->tleaf = this;
      return;
    }
    if (one_) spill_one();
    const Key k = key_of(b);
    Leaf* l = descend(k);
    const int pos = count_less(l->k, k);
    if (l->n < kLeafCap)
      put(l, pos, k, b);
    else
      split_and_put(l, pos, k, b);
  }

  [[gnu::always_inline]] void erase(Block* b) {
    if (b == one_) {
      one_ = nullptr;
      b->tleaf = nullptr;
      size_ = 0;
      return;
    }
    Leaf* l = static_cast<Leaf*>(b->tleaf);
    if (l->n == 1) {  // the leaf's only key
      store_key(&l->k[0], kNoKey);
    } else {
      // Slots i+1 .. i+4 move down one; kNoKey comes in behind the last key.
      const int i = index_in(l, b);
      move_leaf_slots(&l->k[i], &l->k[i + 1]);
      move_leaf_slots(&l->blk[i], &l->blk[i + 1]);
    }
    --l->n;
    b->tleaf = nullptr;
    --size_;
    // An empty root leaf stays for the next insert (size bins empty and refill all the time).
    if (l->n == 0 && l != root_) remove_leaf(l);
  }

 private:
  // A second block comes: the one held by the set goes into the tree, whose root is then an
  // empty leaf (or not made yet).
  __attribute__((noinline)) void spill_one() {
    if (!root_) {
      root_ = head_ = tail_ = new_leaf();
      height_ = 1;
    }
    put_first(static_cast<Leaf*>(root_), key_of(one_), one_);
    one_ = nullptr;
  }

  // Splits the full leaf l (the upper half moves to a new leaf on its right) and puts k at pos.
  __attribute__((noinline)) void split_and_put(Leaf* l, int pos, Key k, Block* b) {
    Leaf* r = new_leaf();
    const int half = kLeafCap / 2;
    for (int i = half; i < kLeafCap; ++i) {
      r->k[i - half] = l->k[i];
      r->blk[i - half] = l->blk[i];
      r->blk[i - half]->tleaf = r;
      l->k[i] = kNoKey;
    }
    r->n = kLeafCap - half;
    l->n = half;
    r->next = l->next;
    r->prev = l;
    if (l->next)
      l->next->prev = r;
    else
      tail_ = r;
    l->next = r;
    if (pos <= half)
      put(l, pos, k, b);
    else
      put(r, pos - half, k, b);
    insert_child(l->parent, l, r->k[0], r, /*leaves=*/true);
  }

  // Unlinks and frees the empty non-root leaf l.
  __attribute__((noinline)) void remove_leaf(Leaf* l) {
    if (l->prev)
      l->prev->next = l->next;
    else
      head_ = l->next;
    if (l->next)
      l->next->prev = l->prev;
    else
      tail_ = l->prev;
    Inner* p = l->parent;
    free_leaf(l);
    remove_child(p, l);
  }

  // A block's key: its size is a multiple of 512, so its units need no rounding (nor a clamp:
  // blocks are below 2^57 bytes).
  static Key key_of(const Block* b) {
    assert(!kBySize || (b->size % 512 == 0 && (b->size >> 9) < (Bytes{1} << 48)));
    Key hi = static_cast<std::uint64_t>(static_cast<std::uint16_t>(b->stream)) << 48;
    if (kBySize) hi |= b->size >> 9;
    return (hi << 64) | b->ptr;
  }
  // A lookup key: any size, rounded up to units and clamped (blocks take key_of).
  static Key make_key(StreamId stream, Bytes size, DevPtr ptr) {
    constexpr Bytes kMaxUnits = (Bytes{1} << 48) - 1;  // a larger lookup key finds nothing
    Key hi = static_cast<std::uint64_t>(static_cast<std::uint16_t>(stream)) << 48;
    if (kBySize) {
      const Bytes units = (size >> 9) + ((size & 511) != 0);
      hi |= units < kMaxUnits ? units : kMaxUnits;
      // A lookup size between two multiples of 512: every block of the rounded-up size is larger
      // than it, so none of them is below the key, whatever its address.
      if (size & 511) ptr = 0;
    }
    return (hi << 64) | ptr;
  }

  // Number of a leaf's keys that are less than key: all 4 slots compared (the unused ones
  // hold kNoKey), independent compares without a branch.
  static int count_less(const Key* ks, Key key) {
    int c = 0;
#pragma GCC unroll 4
    for (int i = 0; i < kLeafCap; ++i) c += ks[i] < key;
    return c;
  }
  // Number of separators among the first n (sorted) that are not greater than key:
  // branch-free binary search.
  static int count_le(const Key* ks, int n, Key key) {
    if (n == 0) return 0;
    const Key* base = ks;
    for (int len = n; len > 1;) {
      const int half = len >> 1;
      base += half & -static_cast<int>(base[half] <= key);
      len -= half;
    }
    return static_cast<int>(base - ks) + (*base <= key);
  }

  Leaf* descend(Key k) const {
    void* node = root_;
    for (int level = height_; level > 1; --level) {
      const Inner* in = static_cast<const Inner*>(node);
      node = in->child[count_le(in->k, in->n - 1, k)];
    }
    return static_cast<Leaf*>(node);
  }

  // Moves kLeafCap slots from src to dst (the ranges may overlap): a fixed-size memcpy through a
  // temporary compiles to straight-line vector loads and stores.
  template <class T>
  [[gnu::always_inline]] static void move_leaf_slots(T* dst, const T* src) {
    T tmp[kLeafCap];
    std::memcpy(tmp, src, sizeof tmp);
    std::memcpy(dst, tmp, sizeof tmp);
  }

  // Writes a key with one 16-byte store: move_leaf_slots reads keys with 16-byte loads, which the CPU
  // does not forward from two recent 8-byte stores (a stall of a dozen cycles).
  static void store_key(Key* slot, Key k) {
#if defined(__SSE2__)
    _mm_store_si128(reinterpret_cast<__m128i*>(slot),
                    _mm_set_epi64x(static_cast<long long>(k >> 64), static_cast<long long>(k)));
#else
    *slot = k;
#endif
  }

  static int index_in(const Leaf* l, const Block* b) {
    int i = 0;
    while (l->blk[i] != b) ++i;
    return i;
  }

  static void put_first(Leaf* l, Key k, Block* b) {  // l is empty
    store_key(&l->k[0], k);
    l->blk[0] = b;
    b->tleaf = l;
    l->n = 1;
  }

  // Puts k at pos of a leaf that is not full: slots pos .. pos+3 move up one (slots 4..7
  // receive kNoKey, so they keep it).
  [[gnu::always_inline]] static void put(Leaf* l, int pos, Key k, Block* b) {
    move_leaf_slots(&l->k[pos + 1], &l->k[pos]);
    move_leaf_slots(&l->blk[pos + 1], &l->blk[pos]);
    store_key(&l->k[pos], k);
    l->blk[pos] = b;
    b->tleaf = l;
    ++l->n;
  }

  static void set_parent(void* child, bool leaves, Inner* p) {
    if (leaves)
      static_cast<Leaf*>(child)->parent = p;
    else
      static_cast<Inner*>(child)->parent = p;
  }

  // Inserts `right` (whose keys are >= sep) just after `left` in parent p (nullptr: left is
  // the root, a new root is made).
  void insert_child(Inner* p, void* left, Key sep, void* right, bool leaves) {
    if (!p) {
      Inner* root = new_inner();
      root->leaves = leaves;
      root->n = 2;
      root->child[0] = left;
      root->child[1] = right;
      root->k[0] = sep;
      set_parent(left, leaves, root);
      set_parent(right, leaves, root);
      root_ = root;
      ++height_;
      return;
    }
    int i = 0;
    while (p->child[i] != left) ++i;
    if (p->n < kCap) {
      for (int j = p->n; j > i + 1; --j) p->child[j] = p->child[j - 1];
      for (int j = p->n - 1; j > i; --j) p->k[j] = p->k[j - 1];
      p->child[i + 1] = right;
      p->k[i] = sep;
      ++p->n;
      set_parent(right, leaves, p);
      return;
    }
    // Split the full inner node: gather kCap + 1 children and kCap separators.
    void* ch[kCap + 1];
    Key sp[kCap];
    for (int j = 0, o = 0; j < p->n; ++j) {
      ch[o++] = p->child[j];
      if (j == i) ch[o++] = right;
    }
    for (int j = 0, o = 0; j < p->n - 1; ++j) {
      if (j == i) sp[o++] = sep;
      sp[o++] = p->k[j];
    }
    if (i == p->n - 1) sp[kCap - 1] = sep;
    const int total = kCap + 1;
    const int left_n = total / 2;
    Inner* q = new_inner();
    q->leaves = p->leaves;
    p->n = left_n;
    for (int j = 0; j < left_n; ++j) {
      p->child[j] = ch[j];
      set_parent(ch[j], leaves, p);
    }
    for (int j = 0; j < left_n - 1; ++j) p->k[j] = sp[j];
    q->n = total - left_n;
    for (int j = 0; j < q->n; ++j) {
      q->child[j] = ch[left_n + j];
      set_parent(ch[left_n + j], leaves, q);
    }
    for (int j = 0; j < q->n - 1; ++j) q->k[j] = sp[left_n + j];
    insert_child(p->parent, p, sp[left_n - 1], q, /*leaves=*/false);
  }

  // Removes the (now empty, already freed) child c from p.
  void remove_child(Inner* p, void* c) {
    int i = 0;
    while (p->child[i] != c) ++i;
    for (int j = i + 1; j < p->n; ++j) p->child[j - 1] = p->child[j];
    // Child i covered [sep i-1, sep i): drop sep i-1 (or sep 0 for the first child).
    const int drop = i > 0 ? i - 1 : 0;
    for (int j = drop + 1; j < p->n - 1; ++j) p->k[j - 1] = p->k[j];
    --p->n;
    if (p->n > 0) {
      // A root with one child: the child becomes the root (repeatedly: deletion is lazy, so
      // inner nodes with one child exist).
      while (height_ > 1 && static_cast<Inner*>(root_)->n == 1) {
        Inner* r = static_cast<Inner*>(root_);
        root_ = r->child[0];
        set_parent(root_, r->leaves, nullptr);
        --height_;
        free_inner(r);
      }
      return;
    }
    // p lost its last child; p is not the root (a root keeps at least one child).
    Inner* pp = p->parent;
    free_inner(p);
    remove_child(pp, p);
  }

  Leaf* new_leaf() { return nodes_->new_leaf(); }
  void free_leaf(Leaf* l) { nodes_->free_leaf(l); }
  Inner* new_inner() { return nodes_->new_inner(); }
  void free_inner(Inner* in) { nodes_->free_inner(in); }

  std::unique_ptr<Nodes> own_;  // default-constructed sets own their nodes
  Nodes* nodes_;
  void* root_ = nullptr;
  int height_ = 0;  // 0: no node yet; 1: the root is a leaf (kept, possibly empty)
  Leaf* head_ = nullptr;
  Leaf* tail_ = nullptr;
  std::size_t size_ = 0;
  Block* one_ = nullptr;  // the only block, when it came into an empty set (then no leaf holds any)
};

}  // namespace gmb::caching
