//===- GemmTuningTest.cpp - The kept cuBLASLt choices, on disk -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// GemmTuningTable without a GPU: entries survive a save and a load, a save
// merges with entries another process wrote in between (its own win on a
// clash), malformed lines are skipped and counted, a missing file is an
// empty table, an unwritable path is a clear error with nothing left
// behind, and the file's location follows the environment. The CUDA side
// (two executors take the recorded algorithm, so the same bits) is
// CudaBackend.GemmTuningKeepsTheChoiceAcrossExecutors.
//===----------------------------------------------------------------------===//
#include "loom/runtime/GemmTuning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace loom::rt;

namespace {

std::string tempDir(const char *name) {
  std::string d = std::string(::testing::TempDir()) + "/loom-gemm-tuning-" + name + "-" +
                  std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

TEST(GemmTuning, SaveThenLoadKeepsEveryEntry) {
  std::string dir = tempDir("roundtrip"), path = dir + "/sub/gemm.tsv", err;
  GemmTuningTable t;
  t.record("H200|sm90|8192x8192x2048|bf16->bf16", 7);
  t.record("H200|sm90|2048x512x8192tA|bf16->bf16", 1);
  ASSERT_TRUE(t.save(path, err)) << err; // makes sub/
  GemmTuningTable u;
  ASSERT_TRUE(u.load(path, err)) << err;
  EXPECT_EQ(u.size(), 2u);
  EXPECT_EQ(u.lookup("H200|sm90|8192x8192x2048|bf16->bf16"), 7);
  EXPECT_EQ(u.lookup("H200|sm90|2048x512x8192tA|bf16->bf16"), 1);
  EXPECT_FALSE(u.lookup("H200|sm90|1x1x1|bf16->bf16").has_value());
  // No temp file left beside it.
  int files = 0;
  for (auto &e : std::filesystem::directory_iterator(dir + "/sub")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

TEST(GemmTuning, SaveMergesWhatAnotherProcessWrote) {
  std::string dir = tempDir("merge"), path = dir + "/gemm.tsv", err;
  GemmTuningTable first, second;
  first.record("a", 1);
  first.record("shared", 2);
  ASSERT_TRUE(first.save(path, err)) << err;
  second.record("b", 3);
  second.record("shared", 4); // the saver's own entry wins a clash
  ASSERT_TRUE(second.save(path, err)) << err;
  GemmTuningTable all;
  ASSERT_TRUE(all.load(path, err)) << err;
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(all.lookup("a"), 1);
  EXPECT_EQ(all.lookup("b"), 3);
  EXPECT_EQ(all.lookup("shared"), 4);
  std::filesystem::remove_all(dir);
}

TEST(GemmTuning, MalformedLinesAreSkippedAndCounted) {
  std::string dir = tempDir("malformed"), path = dir + "/gemm.tsv", err;
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(path);
    out << "# a comment\n"
        << "good\t3\n"
        << "no tab here\n"
        << "negative\t-1\n"
        << "word\tseven\n"
        << "\t5\n"
        << "trailing\t4x\n"
        << "\n"
        << "also|good\t0\n";
  }
  GemmTuningTable t;
  ASSERT_TRUE(t.load(path, err)) << err;
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.skipped(), 5);
  EXPECT_EQ(t.lookup("good"), 3);
  EXPECT_EQ(t.lookup("also|good"), 0);
  std::filesystem::remove_all(dir);
}

TEST(GemmTuning, AMissingFileIsAnEmptyTable) {
  GemmTuningTable t;
  std::string err;
  EXPECT_TRUE(t.load(tempDir("missing") + "/nothing.tsv", err)) << err;
  EXPECT_EQ(t.size(), 0u);
}

TEST(GemmTuning, AnUnwritablePathIsAClearError) {
  std::string dir = tempDir("unwritable"), err;
  std::filesystem::create_directories(dir);
  // A path under a regular file cannot be made into a directory.
  std::ofstream(dir + "/file") << "x";
  GemmTuningTable t;
  t.record("k", 1);
  EXPECT_FALSE(t.save(dir + "/file/gemm.tsv", err));
  EXPECT_NE(err.find("cannot write the GEMM tuning file"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(GemmTuning, TheLocationFollowsTheEnvironment) {
  auto keep = [](const char *k) {
    const char *v = std::getenv(k);
    return std::pair<std::string, bool>(v ? v : "", v != nullptr);
  };
  auto tuning = keep("LOOM_GEMM_TUNING"), file = keep("LOOM_GEMM_TUNING_FILE"),
       xdg = keep("XDG_CACHE_HOME"), home = keep("HOME");
  ::unsetenv("LOOM_GEMM_TUNING");
  ::unsetenv("LOOM_GEMM_TUNING_FILE");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(GemmTuningTable::defaultPath(), "/home/someone/.cache/loom/gemm-tuning.tsv");
  ::setenv("XDG_CACHE_HOME", "/cache", 1);
  EXPECT_EQ(GemmTuningTable::defaultPath(), "/cache/loom/gemm-tuning.tsv");
  ::setenv("LOOM_GEMM_TUNING_FILE", "/tmp/mine.tsv", 1);
  EXPECT_EQ(GemmTuningTable::defaultPath(), "/tmp/mine.tsv");
  ::setenv("LOOM_GEMM_TUNING", "0", 1);
  EXPECT_EQ(GemmTuningTable::defaultPath(), ""); // off: the heuristic's first
  auto restore = [](const char *k, const std::pair<std::string, bool> &v) {
    if (v.second)
      ::setenv(k, v.first.c_str(), 1);
    else
      ::unsetenv(k);
  };
  restore("LOOM_GEMM_TUNING", tuning);
  restore("LOOM_GEMM_TUNING_FILE", file);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}

} // namespace
