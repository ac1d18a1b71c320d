//===- Artifact.cpp - Reading and writing the versioned program file ------===//
//
// Part of loom, under the Apache License v2.0.
//
// Byte layout (docs/artifact-format.md has the full table):
//   header   "LOOMPROG" | u32 version | u64 file size
//   tables   arena size, buffers, instructions, input ids, output ids,
//            in-place updates, views
//   blob     u64 size | zero padding to a 64-byte file offset | constants
//   trailer  u64 FNV-1a 64 of every byte before it
// All integers little-endian, encoded byte by byte so the file is the same
// on any host. The reader checks, in order: magic, version, file size
// (truncation), checksum (corruption), then parses with every count and
// length bounded by the bytes left, then validate()s the program.
//===----------------------------------------------------------------------===//
#include "loom/runtime/Artifact.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::rt {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'P', 'R', 'O', 'G'};
constexpr uint64_t kHeaderBytes = 8 + 4 + 8;
constexpr uint64_t kBlobAlignment = 64;

/// FNV-1a, 64-bit: h = (h ^ byte) * 0x100000001b3 from 0xcbf29ce484222325.
struct Fnv1a {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
};

//===--- Writing ----------------------------------------------------------===//

struct Encoder {
  std::string bytes;
  void u8(uint8_t v) { bytes.push_back(char(v)); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(uint64_t(v), 8); }
  void f64(double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    le(u, 8);
  }
  void str(const std::string &s) {
    u32(uint32_t(s.size()));
    bytes += s;
  }
  void ids(const std::vector<uint32_t> &v) {
    u32(uint32_t(v.size()));
    for (uint32_t x : v) u32(x);
  }

private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(char(uint8_t(v >> (8 * i))));
  }
};

/// Everything between the header and the constant bytes.
std::string encodeTables(const Program &p) {
  Encoder e;
  e.u64(p.arenaBytes);
  e.u32(uint32_t(p.buffers.size()));
  for (const BufferDesc &b : p.buffers) {
    e.str(b.name);
    e.u8(uint8_t(b.dtype));
    e.u8(uint8_t(b.kind));
    e.u32(uint32_t(b.shape.size()));
    for (int64_t d : b.shape) e.i64(d);
    e.u64(b.offset);
    e.u64(b.bytes);
  }
  e.u32(uint32_t(p.instrs.size()));
  for (const Instr &I : p.instrs) {
    e.u16(uint16_t(I.op));
    e.ids(I.in);
    e.ids(I.out);
    e.u32(uint32_t(I.ints.size()));
    for (int64_t v : I.ints) e.i64(v);
    e.u32(uint32_t(I.floats.size()));
    for (double v : I.floats) e.f64(v);
  }
  e.ids(p.inputs);
  e.ids(p.outputs);
  e.u32(uint32_t(p.updates.size()));
  for (const InPlaceUpdate &u : p.updates) {
    e.u32(u.output);
    e.u32(u.input);
  }
  e.u32(uint32_t(p.views.size()));
  for (const BufferView &v : p.views) {
    e.u32(v.view);
    e.u32(v.base);
    e.i64(v.column); // since version 5
  }
  e.u64(p.constants.size());
  return e.bytes;
}

/// An open temp file that is removed unless commit() renames it into place.
class TempFile {
public:
  TempFile(std::string path, std::string target)
      : path_(std::move(path)), target_(std::move(target)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  ~TempFile() {
    if (fd_ >= 0)
      ::close(fd_);
    if (!committed_)
      ::unlink(path_.c_str());
  }
  bool opened() const { return fd_ >= 0; }

  bool write(const void *data, size_t n, Fnv1a *sum) {
    if (sum)
      sum->add(static_cast<const uint8_t *>(data), n);
    const char *p = static_cast<const char *>(data);
    while (n > 0) { // write() may take fewer bytes than asked
      ssize_t k = ::write(fd_, p, n);
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0)
        return false;
      p += k;
      n -= size_t(k);
    }
    return true;
  }

  /// Flushes to disk and renames over the target, so readers see either the
  /// old file or the complete new one.
  bool commit() {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      return false;
    }
    fd_ = -1;
    committed_ = ::rename(path_.c_str(), target_.c_str()) == 0;
    return committed_;
  }

private:
  std::string path_, target_;
  int fd_ = -1;
  bool committed_ = false;
};

//===--- Reading ----------------------------------------------------------===//

/// Bounds-checked little-endian reads. After the first failure every read
/// returns 0 and ok stays false, so callers check once per record.
class Decoder {
public:
  Decoder(const uint8_t *p, size_t n) : p_(p), left_(n), size_(n) {}
  bool ok() const { return ok_; }
  size_t left() const { return left_; }
  size_t consumed() const { return size_ - left_; }
  const uint8_t *here() const { return p_; }

  uint8_t u8() { return uint8_t(le(1)); }
  uint16_t u16() { return uint16_t(le(2)); }
  uint32_t u32() { return uint32_t(le(4)); }
  uint64_t u64() { return le(8); }
  int64_t i64() { return int64_t(le(8)); }
  double f64() {
    uint64_t u = le(8);
    double v;
    std::memcpy(&v, &u, 8);
    return v;
  }
  void skip(size_t n) {
    if (!fits(n, 1))
      return;
    p_ += n;
    left_ -= n;
  }
  std::string str() {
    uint32_t n = u32();
    if (!fits(n, 1))
      return "";
    std::string s(reinterpret_cast<const char *>(p_), n);
    skip(n);
    return s;
  }
  /// A u32 count followed by that many elements read with `one`; the count
  /// is checked against the bytes left before anything is allocated.
  template <typename T, typename Read> std::vector<T> list(size_t elemBytes, Read one) {
    uint32_t n = u32();
    if (!fits(n, elemBytes))
      return {};
    std::vector<T> v(n);
    for (T &x : v) x = one();
    return v;
  }
  std::vector<uint32_t> ids() { return list<uint32_t>(4, [&] { return u32(); }); }

  /// Whether `count` records of at least `minBytes` each can still follow.
  bool fits(uint64_t count, uint64_t minBytes) {
    if (ok_ && count <= left_ / minBytes)
      return true;
    ok_ = false;
    return false;
  }

private:
  uint64_t le(int n) {
    if (!fits(uint64_t(n), 1))
      return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(p_[i]) << (8 * i);
    p_ += n;
    left_ -= size_t(n);
    return v;
  }
  const uint8_t *p_;
  size_t left_, size_;
  bool ok_ = true;
};

/// Parses the tables and the constant blob (everything after the header and
/// before the checksum). Returns "" or which part is malformed.
std::string decodeBody(Decoder &d, uint64_t bodyStart, uint32_t version, Program &p) {
  p.arenaBytes = d.u64();
  // A buffer record is at least 26 bytes: name length, dtype, kind, rank,
  // offset, bytes.
  uint32_t nBuffers = d.u32();
  if (!d.fits(nBuffers, 26))
    return "buffer table";
  p.buffers.resize(nBuffers);
  for (BufferDesc &b : p.buffers) {
    b.name = d.str();
    b.dtype = DType(d.u8());
    b.kind = BufferKind(d.u8());
    b.shape = d.list<int64_t>(8, [&] { return d.i64(); });
    b.offset = d.u64();
    b.bytes = d.u64();
  }
  if (!d.ok())
    return "buffer table";
  // An instruction record is at least 18 bytes: opcode and four counts.
  uint32_t nInstrs = d.u32();
  if (!d.fits(nInstrs, 18))
    return "instruction list";
  p.instrs.resize(nInstrs);
  for (Instr &I : p.instrs) {
    I.op = OpCode(d.u16());
    I.in = d.ids();
    I.out = d.ids();
    I.ints = d.list<int64_t>(8, [&] { return d.i64(); });
    I.floats = d.list<double>(8, [&] { return d.f64(); });
  }
  if (!d.ok())
    return "instruction list";
  p.inputs = d.ids();
  p.outputs = d.ids();
  p.updates = d.list<InPlaceUpdate>(8, [&] {
    InPlaceUpdate u;
    u.output = d.u32();
    u.input = d.u32();
    return u;
  });
  p.views = d.list<BufferView>(version >= 5 ? 16 : 8, [&] {
    BufferView v;
    v.view = d.u32();
    v.base = d.u32();
    if (version >= 5)
      v.column = d.i64();
    return v;
  });
  if (!d.ok())
    return "input/output lists";
  // A column block's row pitch is its base's last dim (validate() checks
  // the rest of where it sits).
  for (const BufferView &v : p.views)
    if (v.column >= 0 && v.view < p.buffers.size() && v.base < p.buffers.size() &&
        !p.buffers[v.base].shape.empty())
      p.buffers[v.view].rowPitch = p.buffers[v.base].shape.back();
  // The blob starts at the next multiple of 64 in the file, so a reader
  // that maps the file sees aligned constants.
  uint64_t nConstants = d.u64();
  uint64_t offset = bodyStart + d.consumed();
  uint64_t pad = (kBlobAlignment - offset % kBlobAlignment) % kBlobAlignment;
  const uint8_t *padding = d.here();
  d.skip(pad);
  if (!d.ok() || std::any_of(padding, padding + pad, [](uint8_t b) { return b != 0; }) ||
      nConstants != d.left())
    return "constant blob";
  p.constants.assign(d.here(), d.here() + nConstants);
  return "";
}

} // namespace

bool writeArtifact(const Program &p, const std::string &path, std::string &err) {
  if (std::string invalid = p.validate(); !invalid.empty()) {
    err = cat("refusing to write an invalid program to '", path, "': ", invalid);
    return false;
  }
  std::string tables = encodeTables(p);
  uint64_t blobStart = kHeaderBytes + tables.size();
  uint64_t pad = (kBlobAlignment - blobStart % kBlobAlignment) % kBlobAlignment;
  uint64_t fileBytes = blobStart + pad + p.constants.size() + 8;

  Encoder header;
  header.bytes.append(kMagic, 8);
  header.u32(kArtifactVersion);
  header.u64(fileBytes);

  std::string tmp = cat(path, ".tmp.", ::getpid());
  TempFile file(tmp, path);
  if (!file.opened()) {
    err = cat("cannot create '", tmp, "' for artifact '", path, "': ", std::strerror(errno));
    return false;
  }
  Fnv1a sum;
  static const uint8_t zeros[kBlobAlignment] = {};
  bool ok = file.write(header.bytes.data(), header.bytes.size(), &sum) &&
            file.write(tables.data(), tables.size(), &sum) && file.write(zeros, pad, &sum) &&
            file.write(p.constants.data(), p.constants.size(), &sum);
  Encoder trailer;
  trailer.u64(sum.h);
  ok = ok && file.write(trailer.bytes.data(), 8, nullptr);
  if (!ok || !file.commit()) {
    err = cat("cannot write artifact '", path, "': ", std::strerror(errno));
    return false;
  }
  return true;
}

bool readArtifact(const std::string &path, Program &p, std::string &err) {
  auto fail = [&](const std::string &why) {
    err = cat(path, ": ", why);
    return false;
  };
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return fail(cat("cannot open: ", std::strerror(errno)));
  struct stat st;
  std::vector<uint8_t> f;
  bool readOk = ::fstat(fd, &st) == 0;
  if (readOk) {
    f.resize(size_t(st.st_size));
    for (size_t got = 0; readOk && got < f.size();) {
      ssize_t k = ::read(fd, f.data() + got, f.size() - got);
      if (k < 0 && errno == EINTR)
        continue;
      readOk = k > 0;
      got += k > 0 ? size_t(k) : 0;
    }
  }
  int readErrno = errno;
  ::close(fd);
  if (!readOk)
    return fail(cat("cannot read: ", std::strerror(readErrno)));

  // Header: magic, then version (so a future layout is named as such rather
  // than reported as corrupt), then the size the writer recorded.
  size_t n = f.size();
  if (n > 0 && std::memcmp(f.data(), kMagic, std::min<size_t>(n, 8)) != 0)
    return fail("bad magic (not a loom artifact)");
  Decoder head(f.data(), n);
  head.skip(8);
  uint32_t version = head.u32();
  if (head.ok() && version < kOldestArtifactVersion)
    return fail(cat("artifact version ", version, " is older than this loom reads (version ",
                    kOldestArtifactVersion, "): recompile the model"));
  if (head.ok() && version > kArtifactVersion)
    return fail(cat("unsupported artifact version ", version, " (this loom reads ",
                    kOldestArtifactVersion == kArtifactVersion
                        ? cat(kArtifactVersion)
                        : cat(kOldestArtifactVersion, " to ", kArtifactVersion),
                    ")"));
  uint64_t fileBytes = head.u64();
  if (!head.ok())
    return fail(cat("truncated (", n, " bytes, shorter than the header)"));
  if (n < fileBytes || fileBytes < kHeaderBytes + 8)
    return fail(cat("truncated (", n, " of ", fileBytes, " bytes)"));
  if (n > fileBytes)
    return fail(cat("trailing data (", n, " bytes, the header says ", fileBytes, ")"));

  Fnv1a sum;
  sum.add(f.data(), n - 8);
  Decoder tail(f.data() + n - 8, 8);
  if (tail.u64() != sum.h)
    return fail("checksum mismatch (the file is corrupt)");

  Decoder d(f.data() + kHeaderBytes, n - 8 - kHeaderBytes);
  p = Program();
  if (std::string bad = decodeBody(d, kHeaderBytes, version, p); !bad.empty())
    return fail("malformed " + bad);
  if (std::string invalid = p.validate(); !invalid.empty())
    return fail("invalid program: " + invalid);
  return true;
}

} // namespace loom::rt
