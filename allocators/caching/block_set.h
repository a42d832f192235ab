// BlockSet: the caching allocator's ordered sets of blocks, a small B+tree.
//
// Iteration order is exactly that of PyTorch's std::set<Block*, Comparison>:
//   kBySize = true:  (stream, size, address)  -- BlockComparatorSize, the free blocks
//   kBySize = false: (stream, address)        -- BlockComparatorAddress, unmapped ranges
// Streams are ordered as unsigned numbers (the default stream 0 first).
//
// Why a B+tree: the free sets hold tens to thousands of blocks, and a binary tree walk is a
// chain of dependent loads with a hard-to-predict branch per level. Here a lookup scans at most
// 16 keys per node without branching and the tree is two or three levels deep. Nodes come from
// free lists: inserting and erasing do not allocate once the set has reached its high-water
// mark. Deletion is lazy (nodes are removed when empty, never rebalanced), which keeps the
// code short; the depth only grows on splits.
//
// Block must have the fields `StreamId stream; Bytes size; DevPtr ptr; void* tleaf;`. tleaf is
// the leaf holding the block (nullptr while in no set); a block's key must not change while it
// is in a set. Keys are packed into one 128-bit number (stream << 112 | size << 64 | address),
// so streams must lie in [0, 65535] and sizes below 2^48 (256 TiB); the allocator checks this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "allocators/device.h"

namespace gmb::caching {

struct BlockKey {
  StreamId stream;
  Bytes size;
  DevPtr ptr;
};

template <class Block, bool kBySize>
class BlockSet {
  static constexpr int kCap = 16;

  using Key = unsigned __int128;
  struct Inner;
  struct Leaf {
    int n = 0;
    Key k[kCap];
    Block* blk[kCap];
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
  BlockSet() = default;
  BlockSet(const BlockSet&) = delete;
  BlockSet& operator=(const BlockSet&) = delete;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  Block* first() const { return size_ ? head_->blk[0] : nullptr; }
  Block* last() const { return size_ ? tail_->blk[tail_->n - 1] : nullptr; }

  Block* next(const Block* b) const {
    const Leaf* l = static_cast<const Leaf*>(b->tleaf);
    int i = index_in(l, b);
    if (i + 1 < l->n) return l->blk[i + 1];
    return l->next ? l->next->blk[0] : nullptr;
  }
  Block* prev(const Block* b) const {
    const Leaf* l = static_cast<const Leaf*>(b->tleaf);
    int i = index_in(l, b);
    if (i > 0) return l->blk[i - 1];
    return l->prev ? l->prev->blk[l->prev->n - 1] : nullptr;
  }

  // First block not less than key (nullptr: none).
  Block* lower_bound(const BlockKey& key) const {
    if (!size_) return nullptr;
    const Key k = make_key(key.stream, key.size, key.ptr);
    const Leaf* l = descend(k);
    int i = count_less(l->k, l->n, k);
    if (i < l->n) return l->blk[i];
    return l->next ? l->next->blk[0] : nullptr;
  }

  void insert(Block* b) {
    const Key k = make_key(b->stream, b->size, b->ptr);
    ++size_;
    if (!root_) {
      Leaf* l = new_leaf();
      l->n = 1;
      l->k[0] = k;
      l->blk[0] = b;
      b->tleaf = l;
      root_ = l;
      height_ = 1;
      head_ = tail_ = l;
      return;
    }
    Leaf* l = descend(k);
    int pos = count_less(l->k, l->n, k);
    if (l->n < kCap) {
      put(l, pos, k, b);
      return;
    }
    // Split the full leaf: the upper half moves to a new leaf on its right.
    Leaf* r = new_leaf();
    const int half = kCap / 2;
    for (int i = half; i < kCap; ++i) {
      r->k[i - half] = l->k[i];
      r->blk[i - half] = l->blk[i];
      r->blk[i - half]->tleaf = r;
    }
    r->n = kCap - half;
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

  void erase(Block* b) {
    Leaf* l = static_cast<Leaf*>(b->tleaf);
    int i = index_in(l, b);
    for (int j = i + 1; j < l->n; ++j) {
      l->k[j - 1] = l->k[j];
      l->blk[j - 1] = l->blk[j];
    }
    --l->n;
    b->tleaf = nullptr;
    --size_;
    if (l->n > 0 || l == root_) return;  // an empty root leaf stays for the next insert
    // Remove the empty leaf.
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

 private:
  static Key make_key(StreamId stream, Bytes size, DevPtr ptr) {
    constexpr Bytes kMaxSize = (Bytes{1} << 48) - 1;  // a larger lookup key finds nothing
    Key hi = static_cast<std::uint64_t>(static_cast<std::uint16_t>(stream)) << 48;
    if (kBySize) hi |= size < kMaxSize ? size : kMaxSize;
    return (hi << 64) | ptr;
  }

  // Number of keys among the first n that are less than key (branch-free).
  static int count_less(const Key* ks, int n, Key key) {
    int c = 0;
    for (int i = 0; i < n; ++i) c += ks[i] < key;
    return c;
  }
  // Number of separators that are <= key: the child to follow.
  static int count_le(const Key* ks, int n, Key key) {
    int c = 0;
    for (int i = 0; i < n; ++i) c += ks[i] <= key;
    return c;
  }

  Leaf* descend(Key k) const {
    void* node = root_;
    for (int level = height_; level > 1; --level) {
      const Inner* in = static_cast<const Inner*>(node);
      node = in->child[count_le(in->k, in->n - 1, k)];
    }
    return static_cast<Leaf*>(node);
  }

  static int index_in(const Leaf* l, const Block* b) {
    int i = 0;
    while (l->blk[i] != b) ++i;
    return i;
  }

  static void put(Leaf* l, int pos, Key k, Block* b) {
    for (int j = l->n; j > pos; --j) {
      l->k[j] = l->k[j - 1];
      l->blk[j] = l->blk[j - 1];
    }
    l->k[pos] = k;
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

  Leaf* new_leaf() {
    if (!free_leaves_.empty()) {
      Leaf* l = free_leaves_.back();
      free_leaves_.pop_back();
      l->n = 0;
      l->prev = l->next = nullptr;
      l->parent = nullptr;
      return l;
    }
    leaf_store_.emplace_back(new Leaf());
    return leaf_store_.back().get();
  }
  void free_leaf(Leaf* l) { free_leaves_.push_back(l); }
  Inner* new_inner() {
    if (!free_inners_.empty()) {
      Inner* in = free_inners_.back();
      free_inners_.pop_back();
      in->n = 0;
      in->leaves = false;
      in->parent = nullptr;
      return in;
    }
    inner_store_.emplace_back(new Inner());
    return inner_store_.back().get();
  }
  void free_inner(Inner* in) { free_inners_.push_back(in); }

  void* root_ = nullptr;
  int height_ = 0;  // 0: no node yet; 1: the root is a leaf (kept, possibly empty)
  Leaf* head_ = nullptr;
  Leaf* tail_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::unique_ptr<Leaf>> leaf_store_;
  std::vector<std::unique_ptr<Inner>> inner_store_;
  std::vector<Leaf*> free_leaves_;
  std::vector<Inner*> free_inners_;
};

}  // namespace gmb::caching
