//===- ArtifactTest.cpp - Writing, reading and refusing program files -----===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include "loom/runtime/Artifact.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace loom::rt;
using namespace loom::rt::test;
namespace fs = std::filesystem;

namespace {

class Artifact : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::path(::testing::TempDir()) /
          ("loom-artifact-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string path(const std::string &name) const { return (dir / name).string(); }

  static Bytes slurp(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
  }
  static void spit(const std::string &p, const Bytes &b) {
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
  }
  /// Recomputes the trailing FNV-1a checksum, for files edited on purpose.
  static void reseal(Bytes &b) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < b.size() - 8; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; ++i) b[b.size() - 8 + i] = uint8_t(h >> (8 * i));
  }
  /// Writes a valid artifact and returns its bytes.
  Bytes written(const std::string &p, Rng &rng) {
    std::string err;
    EXPECT_TRUE(writeArtifact(tinyLanguageModel(rng), p, err)) << err;
    return slurp(p);
  }
  /// readArtifact must fail with a message that names the file and says `why`.
  void expectRefused(const std::string &p, const std::string &why) {
    Program q;
    std::string err;
    EXPECT_FALSE(readArtifact(p, q, err));
    EXPECT_EQ(err.rfind(p + ": ", 0), 0u) << err;
    EXPECT_NE(err.find(why), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }

  fs::path dir;
};

void expectSamePrograms(const Program &a, const Program &b) {
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const BufferDesc &x = a.buffers[i], &y = b.buffers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.bytes, y.bytes);
  }
  EXPECT_EQ(a.constants, b.constants);
  EXPECT_EQ(a.arenaBytes, b.arenaBytes);
  ASSERT_EQ(a.instrs.size(), b.instrs.size());
  for (size_t i = 0; i < a.instrs.size(); ++i) {
    const Instr &x = a.instrs[i], &y = b.instrs[i];
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.in, y.in);
    EXPECT_EQ(x.out, y.out);
    EXPECT_EQ(x.ints, y.ints);
    EXPECT_EQ(x.floats, y.floats);
  }
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.views.size(), b.views.size());
  for (size_t i = 0; i < a.views.size(); ++i) {
    EXPECT_EQ(a.views[i].view, b.views[i].view);
    EXPECT_EQ(a.views[i].base, b.views[i].base);
  }
}

TEST_F(Artifact, ViewsRoundTrip) {
  Rng rng;
  Program p = viewProgram();
  std::string file = path("view.loom"), err;
  ASSERT_TRUE(writeArtifact(p, file, err)) << err;
  Program q;
  ASSERT_TRUE(readArtifact(file, q, err)) << err;
  expectSamePrograms(p, q);
  std::vector<float> x = rng.uniform(12);
  RunResult a = runProgram(q, {toBytes(x)});
  ASSERT_TRUE(a.ok) << a.err;
  std::vector<float> got = fromBytes<float>(a.outputs[0]);
  // The CPU kernels evaluate exp in double and round once.
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], float(std::exp(-double(x[i]))));
}

TEST_F(Artifact, FilesBeforeVersion4AreRefusedAsTooOld) {
  // Version 4 changed what attention instructions mean (attention writes
  // lse; attention_grad reads o and lse), so a version 2 or 3 file cannot
  // be run as it stands: the reader says so, naming both versions, rather
  // than failing later on an attention instruction's arity. The version
  // field comes right after the magic and is checked before the tables.
  Rng rng;
  std::string file = path("old.loom");
  Bytes b = written(file, rng);
  for (uint8_t old : {uint8_t(2), uint8_t(3)}) {
    SCOPED_TRACE("version " + std::to_string(old));
    Bytes v = b;
    v[8] = old; // u32 version, little-endian
    reseal(v);
    spit(file, v);
    expectRefused(file, "artifact version " + std::to_string(old) +
                            " is older than this loom reads (version 4): recompile the model");
  }
}

TEST_F(Artifact, RoundTripKeepsEveryFieldAndResult) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  std::string file = path("model.loom"), err;
  ASSERT_TRUE(writeArtifact(p, file, err)) << err;
  Program q;
  ASSERT_TRUE(readArtifact(file, q, err)) << err;
  expectSamePrograms(p, q);

  std::vector<Bytes> in = {toBytes(rng.ints(6, 0, 10)), toBytes(rng.ints(6, 0, 10))};
  RunResult a = runProgram(p, in), b = runProgram(q, in);
  ASSERT_TRUE(a.ok && b.ok) << a.err << b.err;
  EXPECT_EQ(a.outputs, b.outputs);
}

TEST_F(Artifact, ConstantBlobIsAlignedInTheFile) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  Bytes b = written(path("m.loom"), rng);
  // The blob ends just before the 8-byte checksum.
  size_t blobStart = b.size() - 8 - p.constants.size();
  EXPECT_EQ(blobStart % 64, 0u);
}

TEST_F(Artifact, OverwritesAnExistingFile) {
  Rng rng;
  std::string file = path("m.loom"), err;
  written(file, rng);
  ASSERT_TRUE(writeArtifact(tinyLanguageModel(rng, 3, 5, 4), file, err)) << err;
  Program q;
  ASSERT_TRUE(readArtifact(file, q, err)) << err;
  EXPECT_EQ(q.buffers[0].shape, Shape{3});
}

TEST_F(Artifact, TruncatedFileIsRefused) {
  Rng rng;
  std::string file = path("m.loom");
  Bytes b = written(file, rng);
  for (size_t keep : {size_t(0), size_t(5), size_t(15), b.size() / 2, b.size() - 1}) {
    SCOPED_TRACE("keep " + std::to_string(keep));
    spit(file, Bytes(b.begin(), b.begin() + long(keep)));
    expectRefused(file, "truncated");
  }
}

TEST_F(Artifact, FlippedByteIsRefused) {
  Rng rng;
  std::string file = path("m.loom");
  Bytes b = written(file, rng);
  // Past the header: in the tables, in the constants, in the checksum.
  for (size_t at : {size_t(24), size_t(40), b.size() - 20, b.size() - 3}) {
    SCOPED_TRACE("byte " + std::to_string(at));
    Bytes bad = b;
    bad[at] ^= 0x10;
    spit(file, bad);
    expectRefused(file, "checksum mismatch");
  }
}

TEST_F(Artifact, UnknownVersionIsRefusedByNumber) {
  Rng rng;
  std::string file = path("m.loom");
  Bytes b = written(file, rng);
  b[8] = 6; // u32 version, little-endian, right after the magic
  spit(file, b);
  expectRefused(file, "unsupported artifact version 6 (this loom reads 4 to 5)");
}

TEST_F(Artifact, BadMagicAndTrailingDataAreRefused) {
  Rng rng;
  std::string file = path("m.loom");
  Bytes b = written(file, rng);
  Bytes bad = b;
  bad[0] = 'X';
  spit(file, bad);
  expectRefused(file, "bad magic");
  bad = b;
  bad.push_back(0);
  spit(file, bad);
  expectRefused(file, "trailing data");
  expectRefused(path("missing.loom"), "cannot open");
}

TEST_F(Artifact, HugeCountWithValidChecksumIsMalformedNotAllocated) {
  Rng rng;
  std::string file = path("m.loom");
  Bytes b = written(file, rng);
  // The buffer count follows the header (20 bytes) and the arena size (8).
  for (int i = 0; i < 4; ++i) b[28 + i] = 0xff;
  reseal(b);
  spit(file, b);
  expectRefused(file, "malformed buffer table");
}

TEST_F(Artifact, InconsistentTablesFailValidation) {
  Rng rng;
  std::string file = path("m.loom");
  Bytes b = written(file, rng);
  // The first buffer ('input_ids') record starts at 32: name length (4),
  // name (9), dtype (1). Claim it is f32: bytes no longer match the shape.
  ASSERT_EQ(b[32], 9);
  b[32 + 4 + 9] = uint8_t(DType::F32);
  reseal(b);
  spit(file, b);
  expectRefused(file, "invalid program: buffer 0 'input_ids'");
}

TEST_F(Artifact, FailedWriteLeavesNoFiles) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  std::string err;
  // The directory does not exist: the temp file cannot even be created.
  std::string missing = path("no-such-dir/m.loom");
  EXPECT_FALSE(writeArtifact(p, missing, err));
  EXPECT_NE(err.find("no-such-dir/m.loom"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  // The target is a directory: the temp file is written, the rename fails,
  // and the temp file must be removed.
  fs::create_directory(dir / "taken");
  EXPECT_FALSE(writeArtifact(p, path("taken"), err));
  for (const auto &entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename(), "taken") << "left behind: " << entry.path();
  EXPECT_TRUE(fs::is_empty(dir / "taken"));
}

TEST_F(Artifact, InvalidProgramIsNotWritten) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.instrs[0].in[0] = 999;
  std::string err, file = path("m.loom");
  EXPECT_FALSE(writeArtifact(p, file, err));
  EXPECT_NE(err.find("instr 0 (embedding): input id 999 out of range"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(file));
}

} // namespace
